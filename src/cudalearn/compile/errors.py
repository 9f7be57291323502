"""A compile error of a student's kernel in plain words: its cause, its line and the fix (all labs).

`explain(message, fn)` turns the message of Numba's real CUDA compiler (run by `cudalearn.compile.ptx`)
into the sentence a student reads: CAUSES maps a pattern of the message to its cause and fix, and
the line comes from the message or, when the compiler gives none, from the kernel's syntax tree.
"""

from __future__ import annotations

import ast
import inspect
import linecache
import os
import re
import textwrap
from typing import Any

from cudalearn.compile.source import T4, _jitted_py_func, verified_tree

# (pattern in Numba's message, cause, fix, construct); the first pattern that matches explains the
# error; `construct` names the AST finder that locates the line when the compiler gives none.
CAUSES: list[tuple[str, str, str, str | None]] = [
    (
        r">>> array\(list\(",
        "the shape of `cuda.{space}.array` is a Python list",
        "write the shape as a tuple of constants, e.g. `cuda.{space}.array((TILE, TILE), float32)`",
        "array",
    ),
    (
        r"Function\(<function (?:shared|local)\.array.*\n.*\n\s*>>> array\((?:Tuple|UniTuple)\(",
        "the shape of `cuda.{space}.array` is computed inside the kernel (e.g. `TILE + 1`), "
        "so it is not a compile-time constant",
        "compute it once at module level, e.g. `PADDED = TILE + 1` above the kernel, then "
        "`cuda.{space}.array((TILE, PADDED), float32)`, or write literal numbers",
        "array",
    ),
    (
        r"Function\(<function (?:shared|local)\.array.*\n.*\n\s*>>> array\(",
        "the shape of `cuda.{space}.array` is a variable (a function argument or a value computed "
        "in the kernel), not a compile-time constant",
        "use literal numbers or module-level int constants (`TILE = 32` above the kernel); the size "
        "of shared and local arrays is fixed when the kernel is compiled",
        "array",
    ),
    (
        r"exception_match|Exception matching",
        "the kernel uses `try`/`except`, which the GPU does not support",
        "remove the try/except and guard the access with an `if` (e.g. `if i < out.shape[0]:`)",
        "try",
    ),
    (
        r"kernel must have void return type",
        "the kernel returns a value; a kernel cannot return anything",
        "write the result into an output array argument (e.g. `out[i] = ...`) and use a bare `return`",
        "return",
    ),
    (
        r"cannot index array\((?P<arr>[^)]*)\) with (?P<n>\d+) ind",
        "an array ({arr}) is indexed with {n} indices, which does not match its number of dimensions",
        "index a 1d array with one index (`x[i]`) and a 2d one with two (`A[i, j]`)",
        None,
    ),
    (
        r"DictType|build_map",
        "the kernel builds a Python dict, which the GPU cannot hold",
        "use separate variables, or a `cuda.local.array` of constant size indexed by an int",
        "dict",
    ),
    (
        r"function (?:zeros|empty|ones|full|array|arange)\b",
        "the kernel allocates a numpy array (`np.zeros`, `np.empty`...); a kernel cannot allocate memory",
        "use `cuda.local.array(N, float32)` with a constant N for a per-thread array, or pass the "
        "array in as an argument",
        "numpy",
    ),
    (
        r"Function\(<class 'str'>\)|unicode_type|format_value|build_string",
        "the kernel builds a string (an f-string, `str()`, `+` on strings or `%` formatting), "
        "which the GPU cannot do",
        "print values as separate arguments, `print('i =', i)`, and raise with a constant "
        'message, `raise ValueError("index out of range")`',
        "string",
    ),
    (
        r"NRT required|build_list|reflected list",
        "the kernel builds a Python list, which the GPU cannot hold (no heap)",
        "use separate variables, or `cuda.local.array(N, float32)` with a constant N",
        "list",
    ),
    (
        r"Untyped global name '(?P<name>\w+)': [^\n]*<class 'function'>",
        "`{name}` is a plain Python function, and a kernel can only call functions compiled for the GPU",
        "decorate `{name}` with `@cuda.jit(device=True)`",
        None,
    ),
    (
        r"Untyped global name '(?P<name>\w+)': Cannot determine Numba type of (?P<what>[^\n]*)",
        "the kernel uses the global `{name}`, a {what}, which the GPU cannot hold",
        "use only int/float constants, tuples of them or numpy arrays as globals; pass data as arguments",
        None,
    ),
    (
        r"NameError: name '(?P<name>\w+)' is not defined",
        "`{name}` is not defined when the kernel is compiled",
        "define `{name}` (a module-level constant) before launching, or pass it as an argument",
        None,
    ),
    (
        r">>> [gs]etitem\([^\n]*, (?:float(?:32|64)|UniTuple\(float)",
        "an array is indexed with a float: `/` gives a float in Python, even between two ints",
        "divide indices with `//` (e.g. `half = n // 2`), which keeps them int",
        "divide",
    ),
    (
        r">>> setitem\([^\n]*, none\)",
        "the value stored is None: a device function that ends without `return value` gives None",
        "end the device function with `return` and its result (e.g. `return v`)",
        "noreturn",
    ),
    (
        r"module 'numba\.cuda' has no attribute '(?P<name>\w+)' \(did you mean (?P<close>`cuda\.\w+`)\?\)",
        "`cuda.{name}` is not a CUDA function: numba.cuda has no `{name}` (a typo?)",
        "write {close}, the closest name numba.cuda defines",
        "cuda:{name}",
    ),
    (
        r"module 'numba\.cuda' has no attribute '(?P<name>\w+)'",
        "`cuda.{name}` is not a CUDA function: numba.cuda has no `{name}` (a typo?)",
        "use a name numba.cuda defines (cuda.syncthreads(), cuda.threadIdx.x, cuda.shared.array, ...)",
        "cuda:{name}",
    ),
    (
        r"recursive device function",  # `compile_for_gpu`'s own words: Numba-CUDA crashes on recursion
        "a device function calls itself (recursion), which Numba cannot compile for the GPU",
        "rewrite the recursion as a loop",
        "recursion",
    ),
]


def _head(message: str) -> str:
    """A Numba message without the nested reasons of each candidate it tried ("There are N candidate...")."""
    return message.split("\nThere are ", 1)[0]


def _same_file(path: str, filename: str) -> bool:
    """Whether a path in a compiler message (often relative to the working folder) is `filename`."""
    return path == filename or os.path.abspath(path) == os.path.abspath(filename)


def _relevant_line(message: str) -> str:
    """The first line of a Numba message that says something (and the `>>>` call it could not type)."""
    lines = [s.strip() for s in _head(message).splitlines() if s.strip()]
    skip = ("Failed in ", "During:", "File ", "There are ", ">>> ")
    first = next((s for s in lines if not s.startswith(skip)), lines[0] if lines else "")
    call = next((s for s in lines if s.startswith(">>> ")), None)
    return f"{first} {call}" if call and call not in first else first


def _is_constant_shape(node: ast.expr, fn: Any) -> bool:
    """A shape Numba sees as a compile-time constant: int literals, global ints, tuples of them."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int)
    if isinstance(node, ast.Name):
        return isinstance(fn.__globals__.get(node.id), int | tuple)
    return isinstance(node, ast.Tuple) and all(_is_constant_shape(e, fn) for e in node.elts)


def _is_construct(node: ast.AST, construct: str, fn: Any) -> bool:
    """Whether `node` is the kind of code a compile error's cause names (see CAUSES)."""
    if construct == "array" and isinstance(node, ast.Call):
        if re.search(r"(shared|local)\.array$", ast.unparse(node.func)):
            shapes = [*node.args[:1], *(k.value for k in node.keywords if k.arg == "shape")]
            shape = shapes[0] if shapes else None
            return shape is not None and not _is_constant_shape(shape, fn)
        return False
    if construct == "numpy" and isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return isinstance(node.func.value, ast.Name) and node.func.value.id in ("np", "numpy")
    if construct == "string":
        call_str = isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "str"
        return isinstance(node, ast.JoinedStr) or call_str
    if construct == "recursion" and isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return _jitted_py_func(fn.__globals__.get(node.func.id)) is not None
    if construct == "divide":
        return isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)
    if construct == "uncalled":  # a statement that only names `cuda.syncthreads`: no call, no barrier
        value = node.value if isinstance(node, ast.Expr) else None
        return (
            isinstance(value, ast.Attribute)
            and isinstance(value.value, ast.Name)
            and value.value.id == "cuda"
        )
    if construct == "noreturn" and isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        inner = _jitted_py_func(fn.__globals__.get(node.func.id))
        return inner is not None and not _returns_value(inner)
    if construct.startswith("cuda:") and isinstance(node, ast.Attribute):  # `cuda.<name>`, a name Numba lacks
        return node.attr == construct[5:] and isinstance(node.value, ast.Name) and node.value.id == "cuda"
    kinds = {"list": (ast.List, ast.ListComp), "dict": (ast.Dict, ast.DictComp), "try": (ast.Try,)}
    if construct == "return":
        return isinstance(node, ast.Return) and node.value is not None
    return isinstance(node, kinds.get(construct, ()))


def _returns_value(fn: Any) -> bool:
    """Whether a device function's source has a `return` with a value (else it gives None)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return True  # no source to read: do not accuse it
    return any(isinstance(n, ast.Return) and n.value is not None for n in ast.walk(tree))


def _kernel_tree(fn: Any) -> tuple[ast.AST, int] | None:
    """(syntax tree of `fn`, what to add to its line numbers for the file's), or None without source.

    A kernel the grader rebuilt is read from the syntax tree its rebuilder verified (real line
    numbers), never from source text a student controls.
    """
    fdef = verified_tree(fn)
    if fdef is not None:
        return fdef, 0
    try:
        return ast.parse(textwrap.dedent(inspect.getsource(fn))), fn.__code__.co_firstlineno - 1
    except (OSError, TypeError, SyntaxError):
        return None


def _construct_line(fn: Any, construct: str) -> int | None:
    """Line number of the first code in `fn` of the kind `construct` (the compiler gave no line)."""
    found = _kernel_tree(fn)
    if found is None:
        return None
    tree, offset = found
    hits = _index_divisions(tree) if construct == "divide" else []
    hits = hits or [
        n.lineno for n in ast.walk(tree) if hasattr(n, "lineno") and _is_construct(n, construct, fn)
    ]
    return offset + min(hits) if hits else None


def _index_divisions(tree: ast.AST) -> list[int]:
    """Lines of a `/` that ends up in an index: inside a subscript, or assigned to a name used in one."""

    def divides(node: ast.AST) -> bool:
        return any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div) for n in ast.walk(node))

    subscripts = [n for n in ast.walk(tree) if isinstance(n, ast.Subscript)]
    indexed = {n.id for s in subscripts for n in ast.walk(s.slice) if isinstance(n, ast.Name)}
    lines = [s.lineno for s in subscripts if divides(s.slice)]
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AugAssign) and divides(node.value):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id in indexed for t in targets):
                lines.append(node.lineno)
    return lines


def _source_line(fn: Any, message: str, construct: str | None) -> str:
    """' (line N: `<code>`)' for the student's line the compiler points to (or the AST finds), or ''."""
    filename = fn.__code__.co_filename
    found = [
        int(b or d)
        for a, b, c, d in re.findall(r'File "([^"]*)", line (\d+)|at (\S+) \((\d+)\)', message)
        if _same_file(a or c, filename)
    ]
    line = found[-1] if found else _construct_line(fn, construct) if construct else None
    if line is None:
        return ""
    text = linecache.getline(filename, line).strip()
    return f" (line {line}: `{text}`)" if text else f" (line {line})"


def uncalled_cuda(fn: Any) -> str | None:
    """The message for a statement that names a `cuda` function without calling it, or None (all labs).

    `cuda.syncthreads` alone on a line compiles and does nothing, so the barrier the student sees
    is not there; the tracer would call the result a race with no barrier.
    """
    found = _kernel_tree(fn)
    if found is None:
        return None
    tree, offset = found
    uncalled = sorted(
        (n.lineno + offset, ast.unparse(n.value)) for n in ast.walk(tree) if _is_construct(n, "uncalled", fn)
    )
    if not uncalled:
        return None
    line, name = uncalled[0]
    return (
        f"your kernel `{fn.__name__}` names `{name}` without calling it (line {line}): the statement does "
        f"nothing, so there is no barrier or call there. Fix: write `{name}()`."
    )


def recursive(fn: Any, seen: set | None = None) -> bool:
    """Whether `fn` or a device function it calls calls itself (directly or through others)."""
    seen = set() if seen is None else seen
    if fn in seen:
        return True
    seen.add(fn)
    for name in fn.__code__.co_names:
        inner = _jitted_py_func(fn.__globals__.get(name))
        if inner is not None and recursive(inner, seen):
            return True
    seen.discard(fn)
    return False


def explain(message: str, fn: Any, cc: tuple[int, int] = T4) -> str:
    """The student-facing message for a compile error `message` of kernel `fn` (all labs)."""
    target = f"sm_{cc[0]}{cc[1]}" + (", a T4" if tuple(cc) == T4 else "")
    space = "local" if "local.array" in message else "shared"
    cause, fix, construct = "Numba cannot compile it for the GPU", "", None
    for text in (_head(message), message):  # the message's head first: nested reasons mislead
        match = next(((c, f, k, m) for p, c, f, k in CAUSES if (m := re.search(p, text))), None)
        if match:
            c, f, construct, m = match
            names = {"space": space, **{k: v for k, v in m.groupdict().items() if v is not None}}
            cause, fix = c.format(**names), f.format(**names)
            construct = construct.format(**names) if construct else None
            break
    where = _source_line(fn, message, construct)
    fix = f" Fix: {fix}." if fix else " Fix: use only what Numba supports in CUDA kernels."
    if construct and construct.startswith("cuda:"):  # a typo fails everywhere, not only on a GPU
        return f"your kernel `{fn.__name__}` cannot compile: {cause}{where}.{fix}"
    return (
        f"your kernel `{fn.__name__}` runs under the simulator but a real GPU's compiler ({target}) "
        f"rejects it: {cause}{where}.{fix} (Compiler said: {_relevant_line(message)})"
    )


def did_you_mean(name: str) -> str:
    """' (did you mean `cuda.syncthreads`?)': the public name of numba.cuda closest to `name`, or ''."""
    import difflib

    from numba import cuda

    close = difflib.get_close_matches(name, [n for n in dir(cuda) if not n.startswith("_")], n=1)
    return f" (did you mean `cuda.{close[0]}`?)" if close else ""
