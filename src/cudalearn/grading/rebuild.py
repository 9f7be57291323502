"""A student's kernel rebuilt in the judge from its source, so the memory tracer can run it (labs 3-5).

The tracer (`cudalearn.trace`) runs a kernel's Python source with
instrumented arrays, so it cannot work on a handle to an object in the
student's process, and the judge must never run student code as such.
But a CUDA kernel is written in a small subset of Python (what Numba can
compile for the GPU): arithmetic, indexing, loops, `cuda.*` and `math.*`
calls. `function()` takes the kernel's `def` from the student's answer
cell (the text that ran in the student's process), checks that every
node stays inside that subset (no import, no attribute outside
allow-lists, no call but to allow-listed functions and to the student's
own device functions, themselves checked, no name starting with `__`,
builtins reduced to `range`, `min`, `max`...), and only then compiles it
in the judge with names resolved there: the judge's `cuda`, `math`,
`numpy` and Numba types, the instructor's constants, and the student's
constants as plain data fetched from their process (arrays among them as
read-only copies). A name an answer cell binds by an import (`import numpy
as np`, `from numba import cuda, float32`, often repeated from the first
cells) is the judge's own module or object when the import names one a
kernel may use (IMPORTABLE), never the student's; any other import a
kernel relies on is refused with a message naming the import line. A
kernel stores only into its own arrays: an attribute
assignment (`math.sqrt = ...`) or a write into a global is refused, so a
trace cannot change the judge's modules or the instructor's arrays.

The subset's allow-lists are `kernel_subset`'s, the node-by-node check of
a def is `kernel_check`'s and what an answer cell's imports bind is
`kernel_imports`'s; this module finds the defs, resolves a kernel's global
names and compiles the verified tree.

The tracer is handed the verified syntax tree itself (`trace.execute.
use_tree`), with the cell's line numbers, and instruments that; it never
reads a rebuilt kernel's source back (inspect's search for a `def` line
can be steered into text nobody checked, such as a decorator's string).
The line cache of the answer cell holds only the verified defs' lines, the
rest blank, so messages that quote a kernel line quote verified text.

Link between what runs and what is traced: the kernel traced is the one
whose `def` binds the exercise's name at the top level of an answer cell,
bound nowhere else; the kernel launched by the checks is the object that
name holds in the student's process. A student who deliberately rebinds
the name at run time (through `globals()`) to another kernel could have a
different kernel traced than launched; result checks still run the real
one.
"""

from __future__ import annotations

import ast
import builtins
import linecache
from collections.abc import Callable
from typing import Any

from cudalearn.grading.kernel_check import check_def, is_jit
from cudalearn.grading.kernel_imports import ImportBinding
from cudalearn.grading.kernel_subset import (
    BUILTINS,
    IMPORTABLE,
    Unsafe,
    frozen,
    is_data,
    is_module,
    is_numba_object,
    judge_module,
)


class Rebuilder:
    """Rebuilds student kernels and device functions in the judge from the answer cells' source."""

    def __init__(self, answers: dict[int, str], namespace: dict, fetch: Callable[[str], Any], remote: type):
        self.namespace, self.fetch, self.remote = namespace, fetch, remote
        self.defs: dict[str, tuple[ast.FunctionDef, str]] = {}
        self.assigned: dict[str, int] = {}
        self.done: dict[str, Any] = {}
        self.cells: dict[str, list[str]] = {}  # filename -> the answer cell's lines
        self.imports: dict[str, list[ImportBinding]] = {}  # name -> the import statements that bind it
        self.imported: set[str] = set()  # names resolved to the judge's own module or object
        for ex, code in sorted(answers.items()):
            if code is None:
                continue
            try:
                tree = ast.parse(code)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                continue
            filename = f"<exercise {ex} source>"
            self.cells[filename] = code.splitlines(True)
            linecache.cache[filename] = (0, None, ["\n"] * len(self.cells[filename]), filename)
            for stmt in tree.body:
                for name in self._bound(stmt):
                    self.assigned[name] = self.assigned.get(name, 0) + 1
                for node in (
                    ()
                    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                    else ast.walk(stmt)
                ):
                    if isinstance(node, (ast.Import, ast.ImportFrom)):
                        for alias in node.names:
                            bound = (alias.asname or alias.name).split(".")[0]
                            self.imports.setdefault(bound, []).append(ImportBinding(ex, node, alias))
                if isinstance(stmt, ast.FunctionDef):
                    self.defs[stmt.name] = (stmt, filename)

    @staticmethod
    def _bound(stmt: ast.stmt) -> list[str]:
        """The names a top-level statement of an answer cell binds (a def's, an assignment's, an import's)."""
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return [stmt.name]
        names = []
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.append(node.id)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names += [(a.asname or a.name).split(".")[0] for a in node.names]
        return names

    def function(self, name: str, device: bool = False) -> Any:
        """The kernel (a plain function) or device function (jitted in the judge) `name`, rebuilt."""
        if name in self.done:
            return self.done[name]
        if name not in self.defs:
            raise Unsafe(f"`{name}` is not a function defined by a `def` at the top of an exercise cell")
        if self.assigned.get(name, 0) != 1:
            raise Unsafe(f"`{name}` is bound more than once in your exercise cells")
        fdef, filename = self.defs[name]
        kinds = [is_jit(d) for d in fdef.decorator_list]
        if not any(jit for jit, _ in kinds):
            raise Unsafe(f"`{name}` is not decorated with @cuda.jit")
        if device != any(dev for _, dev in kinds):
            what = "a device function (device=True)" if device else "a kernel"
            raise Unsafe(f"`{name}` is used as {what} but is not declared as one")
        self.done[name] = None  # recursion guard
        from cudalearn.trace import execute as trace_execute

        env = check_def(fdef, self._resolve, self.imported)
        fdef_copy = ast.FunctionDef(
            name=fdef.name,
            args=fdef.args,
            body=fdef.body,
            decorator_list=[],
            returns=None,
            type_comment=None,
            **({"type_params": []} if hasattr(fdef, "type_params") else {}),
        )
        ast.copy_location(fdef_copy, fdef)
        node = ast.fix_missing_locations(ast.Module(body=[fdef_copy], type_ignores=[]))
        env[trace_execute.REBUILT] = True
        exec(compile(node, filename, "exec"), env)
        fn = env[name]
        trace_execute.use_tree(fn, fdef_copy)  # the tracer instruments this tree, never a re-read source
        self._show(filename, fdef)
        if device:
            from numba import cuda

            fn = cuda.jit(device=True)(fn)
        self.done[name] = fn
        return fn

    def _show(self, filename: str, fdef: ast.FunctionDef) -> None:
        """Put a verified def's lines (not its decorators) in the line cache; other lines stay blank.

        Messages quote kernel lines from the line cache (and a reader of source, such as inspect, would
        find there only text that was verified), with the answer cell's own line numbers.
        """
        cell = self.cells[filename]
        _, _, shown, _ = linecache.cache.get(filename, (0, None, ["\n"] * len(cell), filename))
        shown = list(shown)
        for i in range(fdef.lineno - 1, (fdef.end_lineno or fdef.lineno)):
            shown[i] = cell[i]
        linecache.cache[filename] = (sum(map(len, shown)), None, shown, filename)

    def _resolve(self, name: str, where: str) -> Any:
        """A global name of a kernel: a student device function, a student constant, or the judge's own."""
        if name in self.defs:
            return self.function(name, device=True)
        if name in self.imports:
            return self._imported(name, where)
        if name in self.assigned:
            try:
                value = self.namespace[name] if name in self.namespace else self.fetch(name)
            except Exception:
                raise Unsafe(f"{where}: the value of `{name}` could not be read from your notebook") from None
            if isinstance(value, self.remote) or not is_data(value):
                raise Unsafe(f"{where}: `{name}` is not a number, tuple or array the grader can use")
            return frozen(value)
        if "*" in self.imports and (star := self._star(name, where)) is not None:
            return star
        if name in self.namespace and not isinstance(self.namespace[name], self.remote):
            value = self.namespace[name]
            if not (is_data(value) or is_numba_object(value) or is_module(value)):
                raise Unsafe(
                    f"{where}: `{name}` is not a number, array, Numba object or module a kernel uses"
                )
            return frozen(value)
        if name in BUILTINS:
            return getattr(builtins, name)
        raise self._unknown(name, where)

    def _imported(self, name: str, where: str) -> Any:
        """A name an answer cell imports: the judge's own module or object, if the import is allowed.

        Only the modules a kernel may use (IMPORTABLE) are named, and only names of them a kernel may use;
        the object is the judge's own (imported before any student code ran), never the student's. A name
        bound by an import and also assigned, or by imports of different objects, is refused.
        """
        bindings = self.imports[name]
        first = bindings[0]
        if self.assigned.get(name, 0) != len(bindings):
            raise Unsafe(
                f"{where}: `{name}` is imported by `{first.text}` ({first.place}) and also assigned in your "
                f"exercise cells; the grader cannot tell which one the kernel uses. Rename the variable, or "
                f"remove this import from the exercise cell{self._already(name)}"
            )
        values = [b.value(name, where, self._already) for b in bindings]
        if any(v is not values[0] for v in values[1:]):
            raise Unsafe(
                f"{where}: `{name}` is imported as different things in your exercise cells "
                f"({'; '.join(f'`{b.text}` ({b.place})' for b in bindings)}); remove these imports from the "
                f"exercise cells{self._already(name)}"
            )
        self.imported.add(name)
        return values[0]

    def _star(self, name: str, where: str) -> Any:
        """What `from module import *` in an answer cell binds to `name` (the last such import that has
        it, as Python would), the judge's own object; None when no star import of numpy, math or numba
        binds it. A name it binds that a kernel may not use is refused naming the import's line.
        """
        for b in reversed(self.imports["*"]):
            module = b.followed_star()
            if module is None:
                continue  # never imported in the judge; _unknown names it if nothing else binds `name`
            judge = judge_module(module)
            public = getattr(judge, "__all__", None) or [n for n in dir(judge) if not n.startswith("_")]
            if name not in public:
                continue
            names = IMPORTABLE[module]
            if names is not None and name not in names:
                raise Unsafe(
                    f"{where}: `{name}` comes from `{b.text}` ({b.place}), and `{module}.{name}` is not "
                    f"something a kernel the grader traces may use. Remove this import from the exercise "
                    f"cell, and `{name}` from the kernel"
                )
            self.imported.add(name)
            return getattr(judge, name)
        return None

    def _unknown(self, name: str, where: str) -> Unsafe:
        """`name` is not defined; where an answer cell star-imports a module the grader refuses, say so."""
        for b in self.imports.get("*", []):
            if b.followed_star() is not None:
                continue
            if b.node.module == "numba.cuda" and not b.node.level:
                why = f"it traces a kernel's CUDA calls through the module, so write `cuda.{name}`"
            else:
                why = "a kernel it traces uses only numpy, math, numba and numba.cuda"
            return Unsafe(
                f"{where}: `{name}` is not defined, unless `{b.text}` ({b.place}) defines it, and the grader "
                f"does not follow that import: {why}. Remove this import from the exercise cell"
            )
        return Unsafe(f"{where}: `{name}` is not defined")

    def _already(self, name: str) -> str:
        """'; the notebook's first cells import it already' when the judge's cells bound `name` too."""
        if name not in self.namespace or isinstance(self.namespace[name], self.remote):
            return ""
        return f"; the notebook's first cells import `{name}` already"
