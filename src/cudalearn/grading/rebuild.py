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
import math
import types
from collections.abc import Callable
from typing import Any

import numpy as np

BUILTINS = (
    "range min max abs len int float bool round divmod pow IndexError ValueError RuntimeError "
    "ZeroDivisionError AssertionError".split()
)
ARRAY_ATTRS = {"shape", "size", "ndim", "dtype", "real", "imag"}
CUDA_ATTRS = {
    "threadIdx": {"x", "y", "z"},
    "blockIdx": {"x", "y", "z"},
    "blockDim": {"x", "y", "z"},
    "gridDim": {"x", "y", "z"},
    "shared": {"array"},
    "local": {"array"},
    "const": {"array_like"},
    "atomic": {
        "add",
        "sub",
        "max",
        "min",
        "nanmax",
        "nanmin",
        "exch",
        "inc",
        "dec",
        "compare_and_swap",
        "cas",
    },
    "fp16": None,  # any public attribute
    **dict.fromkeys(
        "grid gridsize syncthreads syncthreads_count syncthreads_and syncthreads_or syncwarp threadfence "
        "threadfence_block threadfence_system laneid warpsize fma selp activemask lanemask_lt ballot_sync "
        "shfl_sync shfl_up_sync shfl_down_sync shfl_xor_sync all_sync any_sync eq_sync match_any_sync "
        "match_all_sync popc brev clz ffs cbrt".split(),
        set(),
    ),
}
NUMPY_ATTRS = set(
    "float16 float32 float64 int8 int16 int32 int64 uint8 uint16 uint32 uint64 bool_ complex64 complex128 "
    "sqrt exp exp2 log log2 log10 sin cos tan arcsin arccos arctan arctan2 sinh cosh tanh abs absolute "
    "minimum maximum floor ceil trunc rint isnan isinf isfinite sign copysign fabs hypot power inf nan pi e"
    "".split()
)
NUMBA_TYPES = {n for n in NUMPY_ATTRS if n[0] in "fiuc" and n[-1].isdigit()} | {"boolean", "intp", "uintp"}
NODES = (
    ast.Module, ast.FunctionDef, ast.arguments, ast.arg, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For,
    ast.While, ast.If, ast.Break, ast.Continue, ast.Pass, ast.Return, ast.Expr, ast.Raise, ast.Assert,
    ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp, ast.Constant, ast.Name, ast.Attribute,
    ast.Subscript, ast.Slice, ast.Tuple, ast.Call, ast.keyword, ast.Load, ast.Store, ast.operator,
    ast.unaryop, ast.boolop, ast.cmpop, ast.expr_context,
)  # fmt: skip


class Unsafe(ValueError):
    """The kernel's source leaves the CUDA subset the grader can trace safely; the message says where."""


def _is_jit(decorator: ast.expr) -> tuple[bool, bool]:
    """(is a cuda.jit decorator, with device=True) for one decorator node."""
    call = decorator if isinstance(decorator, ast.Call) else None
    target = call.func if call else decorator
    text = ast.unparse(target)
    device = bool(call) and any(
        k.arg == "device" and isinstance(k.value, ast.Constant) and k.value.value is True
        for k in call.keywords
    )
    return text.endswith("jit"), device


class Rebuilder:
    """Rebuilds student kernels and device functions in the judge from the answer cells' source."""

    def __init__(self, answers: dict[int, str], namespace: dict, fetch: Callable[[str], Any], remote: type):
        self.namespace, self.fetch, self.remote = namespace, fetch, remote
        self.defs: dict[str, tuple[ast.FunctionDef, str]] = {}
        self.assigned: dict[str, int] = {}
        self.done: dict[str, Any] = {}
        self.cells: dict[str, list[str]] = {}  # filename -> the answer cell's lines
        self.imports: dict[str, list[_Import]] = {}  # name -> the import statements that bind it
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
                            self.imports.setdefault(bound, []).append(_Import(ex, node, alias))
                if isinstance(stmt, ast.FunctionDef):
                    self.defs[stmt.name] = (stmt, filename)

    @staticmethod
    def _bound(stmt: ast.stmt) -> list[str]:
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
        kinds = [_is_jit(d) for d in fdef.decorator_list]
        if not any(jit for jit, _ in kinds):
            raise Unsafe(f"`{name}` is not decorated with @cuda.jit")
        if device != any(dev for _, dev in kinds):
            what = "a device function (device=True)" if device else "a kernel"
            raise Unsafe(f"`{name}` is used as {what} but is not declared as one")
        self.done[name] = None  # recursion guard
        from cudalearn.trace import execute as trace_execute

        env = self._check(fdef)
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

    def _check(self, fdef: ast.FunctionDef) -> dict:
        """Check every node of a kernel's def; return the namespace to compile it in."""
        args = fdef.args
        if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs:
            raise Unsafe(f"line {fdef.lineno}: a kernel takes plain positional parameters only")
        if args.defaults or any(a.annotation for a in args.args) or fdef.returns:
            raise Unsafe(f"line {fdef.lineno}: no default values or annotations in a traced kernel")
        local = {a.arg for a in args.args}
        for node in ast.walk(fdef):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                local.add(node.id)
        env: dict[str, Any] = {"__builtins__": {n: getattr(builtins, n) for n in BUILTINS}}
        nodes = list(ast.walk(ast.Module(body=fdef.body, type_ignores=[])))
        for node in nodes:  # first each node's type, and the global names resolved
            where = f"line {getattr(node, 'lineno', fdef.lineno)}"
            if not isinstance(node, NODES):
                raise Unsafe(f"{where}: `{type(node).__name__}` is not allowed in a kernel the grader traces")
            if isinstance(node, ast.Constant) and not isinstance(
                node.value, (int, float, complex, str, type(None))
            ):
                raise Unsafe(f"{where}: this constant is not allowed in a kernel")
            if isinstance(node, ast.Name):
                if node.id.startswith("__"):
                    raise Unsafe(f"{where}: names starting with __ are not allowed")
                if isinstance(node.ctx, ast.Load) and node.id not in local and node.id not in env:
                    env[node.id] = self._resolve(node.id, where)
        for node in nodes:  # then attributes and calls, against what those names are
            where = f"line {getattr(node, 'lineno', fdef.lineno)}"
            if isinstance(node, (ast.Attribute, ast.Subscript)) and not isinstance(node.ctx, ast.Load):
                self._check_store(node, local, where)
            if isinstance(node, ast.Attribute):
                self._check_attribute(node, local, env, where)
            if isinstance(node, ast.Call):
                self._check_call(node.func, local, env, where)
        return env

    @staticmethod
    def _check_store(node: ast.Attribute | ast.Subscript, local: set, where: str) -> None:
        """A kernel stores into its own arrays only: never an attribute, never a global's element."""
        if isinstance(node, ast.Attribute):
            raise Unsafe(f"{where}: `{ast.unparse(node)} = ...` assigns an attribute; a kernel cannot")
        root = node.value
        while isinstance(root, (ast.Subscript, ast.Attribute)):
            root = root.value
        if not (isinstance(root, ast.Name) and root.id in local):
            raise Unsafe(
                f"{where}: `{ast.unparse(node)} = ...` writes into a global; a kernel writes only into "
                f"the arrays it is passed and its own shared or local arrays"
            )

    def _chain(self, node: ast.expr) -> list[str] | None:
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        return [node.id, *reversed(parts)]

    def _check_attribute(self, node: ast.Attribute, local: set, env: dict, where: str) -> None:
        chain = self._chain(node)
        if chain is None or any(p.startswith("_") for p in chain[1:]):
            raise Unsafe(f"{where}: `{ast.unparse(node)}` is not an attribute the grader can trace")
        root = chain[0]
        if root in local:
            if len(chain) != 2 or chain[1] not in ARRAY_ATTRS:
                raise Unsafe(f"{where}: `{ast.unparse(node)}`: only {sorted(ARRAY_ATTRS)} of an array")
            return
        if not self._allowed_path(env.get(root), chain[1:]):
            hint = _misspelt_cuda(chain) if env.get(root) is _judge_module("numba.cuda") else ""
            raise Unsafe(f"{where}: `{ast.unparse(node)}` is not allowed in a kernel the grader traces{hint}")

    def _allowed_path(self, obj: Any, path: list[str]) -> bool:
        import numba
        from numba import cuda

        if obj is cuda:
            first, rest = path[0], path[1:]
            allowed = CUDA_ATTRS.get(first, "missing")
            if allowed == "missing" or len(rest) > 1:
                return False
            return not rest or allowed is None or rest[0] in allowed
        if obj is math:
            return len(path) == 1
        if obj is np:
            return len(path) == 1 and path[0] in NUMPY_ATTRS
        if obj is numba:
            if path[0] == "cuda":
                return len(path) == 1 or self._allowed_path(cuda, path[1:])
            return len(path) == 1 and path[0] in NUMBA_TYPES
        return False

    def _check_call(self, func: ast.expr, local: set, env: dict, where: str) -> None:
        if isinstance(func, ast.Attribute):
            return  # checked as an attribute chain on an allowed module
        if isinstance(func, ast.Name) and func.id not in local:
            target = env.get(func.id)
            if func.id in BUILTINS or self._is_numba_object(target) or func.id in self.imported:
                return
        raise Unsafe(
            f"{where}: the call `{ast.unparse(func)}(...)` is not allowed in a kernel the grader traces"
        )

    @staticmethod
    def _is_numba_object(obj: Any) -> bool:
        """A Numba type (float32) or a jitted function of the judge (an instructor's or a rebuilt one)."""
        return type(obj).__module__.split(".")[0] == "numba" and not isinstance(obj, types.ModuleType)

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
            if isinstance(value, self.remote) or not _is_data(value):
                raise Unsafe(f"{where}: `{name}` is not a number, tuple or array the grader can use")
            return _frozen(value)
        if "*" in self.imports and (star := self._star(name, where)) is not None:
            return star
        if name in self.namespace and not isinstance(self.namespace[name], self.remote):
            value = self.namespace[name]
            if not (_is_data(value) or self._is_numba_object(value) or _is_module(value)):
                raise Unsafe(
                    f"{where}: `{name}` is not a number, array, Numba object or module a kernel uses"
                )
            return _frozen(value)
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
            judge = _judge_module(module)
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


def _misspelt_cuda(chain: list[str]) -> str:
    """'; `cuda.syncthread` is no CUDA name: did you mean `cuda.syncthreads`?' for a name CUDA_ATTRS lacks."""
    import difflib

    if chain[1] in CUDA_ATTRS:
        return ""
    close = difflib.get_close_matches(chain[1], list(CUDA_ATTRS), n=1)
    return f"; `cuda.{chain[1]}` is no CUDA name" + (f": did you mean `cuda.{close[0]}`?" if close else "")


IMPORTABLE = {  # module -> the names `from module import ...` may take (None: any public name)
    "numpy": NUMPY_ATTRS,
    "math": None,
    "numba": NUMBA_TYPES | {"cuda"},
    "numba.cuda": set(),  # `cuda.syncthreads()` through the module: the tracer swaps `cuda` itself
}


def _judge_module(path: str) -> Any:
    """The judge's own module `path`, a key of IMPORTABLE: a student's text never picks what is imported."""
    import numba
    from numba import cuda

    return {"numpy": np, "math": math, "numba": numba, "numba.cuda": cuda}[path]


class _Import:
    """One name an answer cell's import binds (`import numpy as np`, `from numba import float32`)."""

    def __init__(self, ex: int, node: ast.Import | ast.ImportFrom, alias: ast.alias):
        self.node, self.alias = node, alias
        self.text = ast.unparse(node)
        self.place = f"exercise {ex}, line {node.lineno}"

    def followed_star(self) -> str | None:
        """The module of `from module import *` when the judge resolves names through it (numpy, math,
        numba); None for a relative import, another module, or numba.cuda (its calls go through `cuda.`)."""
        module = self.node.module or ""
        if self.node.level or module not in IMPORTABLE or module == "numba.cuda":
            return None
        return module

    def value(self, name: str, where: str, already: Callable[[str], str]) -> Any:
        """The judge's object this import binds to `name`; Unsafe, naming the import line, if not allowed.

        `already(name)` says that the notebook's first cells import `name` already ('' if not).
        """
        node, alias = self.node, self.alias
        what = f"{where}: `{name}` comes from `{self.text}` ({self.place})"
        refuse = (
            f"{what}, which the grader cannot accept: a kernel it traces uses only numpy, math, numba and "
            f"numba.cuda (and names from them, such as float32). Remove this import from the exercise cell"
            + (already(name) or f", and `{name}` from the kernel")
        )
        if isinstance(node, ast.Import):
            if alias.name not in IMPORTABLE:
                raise Unsafe(refuse)
            return _judge_module(alias.name if alias.asname else alias.name.split(".")[0])
        module = node.module or ""
        if node.level or module not in IMPORTABLE:
            raise Unsafe(refuse)
        names = IMPORTABLE[module]
        if module == "numba.cuda":
            raise Unsafe(
                f"{what}; the grader traces a kernel's CUDA calls through the module, so write "
                f"`cuda.{alias.name}`. Remove this import from the exercise cell{already('cuda')}"
            )
        if alias.name.startswith("_") or (names is not None and alias.name not in names):
            raise Unsafe(refuse)
        try:
            return getattr(_judge_module(module), alias.name)
        except AttributeError:
            raise Unsafe(f"{where}: `{self.text}` ({self.place}): `{module}` has no `{alias.name}`") from None


def _is_module(value: Any) -> bool:
    """One of the modules a kernel may name: numba.cuda, math, numpy, numba."""
    import numba
    from numba import cuda

    return any(value is m for m in (cuda, math, np, numba))


def _frozen(value: Any) -> Any:
    """A kernel's global as it sees it: arrays as read-only copies (the judge's own stay untouched)."""
    if isinstance(value, np.ndarray):
        value = value.copy()
        value.flags.writeable = False
        return value
    if isinstance(value, tuple):
        return tuple(_frozen(v) for v in value)
    return value


def _is_data(value: Any) -> bool:
    if value is None or isinstance(value, (bool, int, float, complex, str, np.generic, np.ndarray)):
        return True
    return isinstance(value, tuple) and all(_is_data(v) for v in value)
