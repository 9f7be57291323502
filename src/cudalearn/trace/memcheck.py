"""memcheck in the tracer: an out-of-bounds access as a TraceOutOfBounds with a true hint (Chapters 2-4).

The hints read only the line cache and the executing instruction's source
span, parsed and never evaluated: a negative index, a `<=` guard, a shared
tile smaller than the block, the last partial block, or the index
arithmetic (swapped row and column).
"""

import ast
import linecache
import re

from cudalearn.trace.arrays import fmt_index
from cudalearn.trace.model import STORE, LocalArray, TraceOutOfBounds


class Memcheck:
    """The Recorder's out-of-bounds errors, from its current thread, block, grid and kernel file."""

    def out_of_bounds(self, array, idx, kind, frame):
        """memcheck: the TraceOutOfBounds error for the current thread's access, with a true hint."""
        name, shape = array._name, tuple(array.shape)
        what = "write to" if kind == STORE else "read of"
        line = frame.f_lineno
        src = linecache.getline(frame.f_code.co_filename, line).strip()
        idx = tuple(i if isinstance(i, slice) else int(i) for i in idx)
        msg = (
            f"out-of-bounds {what} {name}[{', '.join(fmt_index(i) for i in idx)}]"
            f" (shape {shape}) by thread {self.thread} of block {self.block},"
            f" line {line}: {src}\n" + self._bounds_hint(array, idx, frame)
        )
        return TraceOutOfBounds(msg, name, idx, shape, self.thread, self.block, line)

    def local_out_of_bounds(self, e):
        """memcheck for a local array (cuda.local.array, plain NumPy in the tracer): the IndexError of the
        current thread as a TraceOutOfBounds naming the array, line and thread; `e` itself when it was
        raised elsewhere (an IndexError of the kernel's own making)."""
        tb, frame = e.__traceback__, None
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == self.kernel_file:
                frame = tb.tb_frame
            tb = tb.tb_next
        if frame is None:
            return e
        node = _executing_node(frame)
        if not (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)):
            return e
        name = node.value.id
        array = frame.f_locals.get(name, frame.f_globals.get(name))
        if not isinstance(array, LocalArray):
            return e
        parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        index = ", ".join(ast.unparse(p) for p in parts)
        line = frame.f_lineno
        src = linecache.getline(frame.f_code.co_filename, line).strip()
        msg = (
            f"out-of-bounds access of {name}[{index}] (shape {array.shape}) by thread {self.thread} of"
            f" block {self.block}, line {line}: {src}\n{e}. {name} is a local array: cuda.local.array gives"
            f" every thread its own, with the shape it is declared with. Check this line's indices against"
            f" that shape: an index meant for another axis or array (i where j belongs, TM where TN"
            f" belongs), or a loop that runs one step too far."
        )
        return TraceOutOfBounds(msg, name, (), tuple(array.shape), self.thread, self.block, line)

    def _bounds_hint(self, array, idx, frame):
        """Why an index is outside: a negative index, the last partial block, or the index arithmetic."""
        name, shape = array._name, array.shape
        pairs = enumerate(zip(idx, shape, strict=False))
        bad = [(d, i) for d, (i, n) in pairs if not isinstance(i, slice) and not 0 <= i < n]
        if not bad:
            return f"{name} has {len(shape)} dimension(s) but is indexed with {len(idx)} indices."
        axis, i = bad[0]
        n = shape[axis]
        expr = _index_source(frame, axis, len(idx))
        value = f"the index `{expr}` is {i}" if expr else f"the index is {i}"
        where = f"{value} on axis {axis} of {name}, whose extent is {n} (valid: 0 to {n - 1})"
        if i < 0:
            return f"{where}. CUDA does not wrap negative indices around: index -1 is outside the array."
        if i == n and expr and (guard := _le_guard(frame, expr)):
            line, text = guard
            return (
                f"{where}. Line {line} (`{text}`) lets `{expr}` reach {n} with `<=`: the last valid index is"
                f" {n - 1}, one less than the extent, so that comparison needs `<`."
            )
        if array._alloc.shared:  # one tile per block: the block's threads, not the grid, must fit it
            bx, by, bz = self.blockdim
            threads = f"{bx} x {by}" + (f" x {bz}" if bz > 1 else "")
            return (
                f"{where}. {name} is a shared array, one per block, and this block has {threads} threads:"
                f" a tile that threads index by threadIdx must be at least as large as the block along"
                f" each axis (with TILE x TILE threads, declare it (TILE, TILE)). Guarding the last"
                f" partial block does not help here: every block indexes its own tile."
            )
        for a, xyz in enumerate("xyz"):
            b, g = self.blockdim[a], self.block[a] * self.blockdim[a] + self.thread[a]
            partial = (self.griddim[a] - 1) * b < n < self.griddim[a] * b  # the last block sticks out
            if partial and self.block[a] == self.griddim[a] - 1 and g >= n:
                guard = f"{expr or 'i'} < {name}.shape[{axis}]"
                launched = self.griddim[a] * b
                return (
                    f"{where}. This thread is one of the surplus threads of the last, partial block along"
                    f" {xyz}: {self.griddim[a]} block(s) of {b} threads make {launched} threads along {xyz}"
                    f" for {n} elements, so the last {launched - n} (global {xyz} index {n} to"
                    f" {launched - 1}; this one is {g}) have no element."
                    f" Did you guard the last partial block (if {guard}: ...)?"
                )
        hint = (
            f"{where}. The thread is not a surplus thread of a last partial block, so check the index"
            " arithmetic: swapped row and column, a wrong stride or offset, an off-by-one (<= for <),"
            " or a tile that sticks out of the matrix (guard its loads and store 0 there)."
        )
        if len(idx) == 2 == len(shape) and all(0 <= j < m for j, m in zip(idx[::-1], shape, strict=True)):
            hint += f" [{idx[1]}, {idx[0]}] would be inside {name}: are the row and column swapped?"
        return hint


def _index_source(frame, axis, ndim):
    """The source text of the index along `axis` of the access the frame is executing, or ''.

    The access is found by the executing instruction's source position (its subscript, or the atomic's
    call), cut out of the line cache and parsed: nothing of it is evaluated.
    """
    node = _executing_node(frame)
    if isinstance(node, ast.Subscript):
        index = node.slice
    elif isinstance(node, ast.Call) and len(node.args) >= 2:  # cuda.atomic.add(ary, idx, val)
        index = node.args[1]
    else:
        return ""
    parts = index.elts if isinstance(index, ast.Tuple) else [index]
    return ast.unparse(parts[axis]) if len(parts) == ndim else ""


def _le_guard(frame, expr):
    """(line, source) of the first line of the frame's function, up to the executing one, that compares
    `expr` with `<=` (an off-by-one guard), or None. Read from the line cache, as messages quote lines."""
    pattern = re.compile(r"(?<![\w.])" + r"\s*".join(map(re.escape, expr.split())) + r"\s*<=(?!=)")
    file, first = frame.f_code.co_filename, frame.f_code.co_firstlineno
    for line in range(first, frame.f_lineno):
        text = linecache.getline(file, line).split("#")[0].strip()
        if text.startswith(("if ", "elif ", "while ")) and pattern.search(text):
            return line, text
    return None


def _executing_node(frame):
    """The expression the frame's current instruction comes from, parsed from its source span, or None."""
    try:
        start, end, col, end_col = list(frame.f_code.co_positions())[frame.f_lasti // 2]
    except (AttributeError, IndexError, ValueError):
        return None
    if None in (start, end, col, end_col):
        return None
    lines = [ln.encode() for ln in linecache.getlines(frame.f_code.co_filename)[start - 1 : end]]
    if len(lines) != end - start + 1:
        return None
    text = (
        lines[0][col:end_col]
        if start == end
        else lines[0][col:] + b"".join(lines[1:-1]) + lines[-1][:end_col]
    )
    try:
        return ast.parse(text.decode(), mode="eval").body
    except (SyntaxError, ValueError, UnicodeDecodeError):
        return None
