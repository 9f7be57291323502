"""The recorder of a traced kernel's memory accesses: instrumented arrays, warp requests, wavefronts,
sectors, races and out-of-bounds accesses (Chapters 2-4)."""

import ast
import linecache
import operator
import re
import sys

import numpy as np

from cudalearn.trace import model
from cudalearn.trace.model import (
    ATOMIC,
    LOAD,
    MAX_FINDINGS,
    MAX_KEPT_REQUESTS,
    MAX_RACES,
    NUM_BANKS,
    STORE,
    LocalArray,
    TraceEndless,
    TraceError,
    TraceOutOfBounds,
)
from cudalearn.trace.report import LineStats, Race, SharedRequest, TraceReport, UninitializedRead


class Allocation:
    """One traced array: its name, memory space, base byte address and shape."""

    def __init__(self, aid, name, shared, base, data):
        self.id, self.name, self.shared, self.base = aid, name, shared, base
        self.itemsize, self.shape = data.itemsize, data.shape
        fortran = data.ndim > 1 and data.flags.f_contiguous and not data.flags.c_contiguous
        self.order = "F" if fortran else "C"

    def index(self, off):
        """The element index tuple at byte offset off."""
        flat = off // self.itemsize
        return tuple(int(i) for i in np.unravel_index(flat, self.shape, order=self.order))


class TracedArray:
    """A numpy array (or a view of one) whose element reads and writes are recorded (Chapter 2)."""

    __slots__ = ("_rec", "_alloc", "_data", "_off0", "_shape", "_strides", "_name")

    def __init__(self, rec, alloc, data, off0=0, name=None):
        self._rec, self._alloc, self._data, self._off0 = rec, alloc, data, off0
        self._shape, self._strides = data.shape, data.strides
        self._name = name or alloc.name

    shape = property(lambda self: self._shape)
    ndim = property(lambda self: self._data.ndim)
    size = property(lambda self: self._data.size)
    dtype = property(lambda self: self._data.dtype)
    strides = property(lambda self: self._strides)

    def __len__(self):
        return self._shape[0]

    def __repr__(self):
        return f"<traced {self._name} {self._data.dtype}{list(self._shape)}>"

    def _locate(self, idx, kind, frame):
        """Byte offset of a full integer index (fast paths for 1-D and 2-D), None for views."""
        shape = self._shape
        if type(idx) is int:
            if len(shape) == 1 and 0 <= idx < shape[0]:
                return self._off0 + idx * self._strides[0]
        elif type(idx) is tuple and len(idx) == 2 == len(shape):
            i, j = idx
            if type(i) is int and type(j) is int and 0 <= i < shape[0] and 0 <= j < shape[1]:
                return self._off0 + i * self._strides[0] + j * self._strides[1]
        return self._locate_any(idx, kind, frame)

    def _locate_any(self, idx, kind, frame):
        """Byte offset of any full integer index, with bounds checks; None for views."""
        if type(idx) is not tuple:
            idx = (idx,)
        if len(idx) != len(self._shape):
            return None
        off = self._off0
        for i, n, s in zip(idx, self._shape, self._strides, strict=True):
            if type(i) is not int:
                if isinstance(i, slice):
                    return None
                i = _as_index(i, self._name, frame)
            if i < 0 or i >= n:
                raise self._rec.out_of_bounds(self, idx, kind, frame)
            off += i * s
        return off

    def __getitem__(self, idx):
        frame = sys._getframe(1)
        off = self._locate(idx, LOAD, frame)
        if off is None:
            return self._view(idx, frame)
        self._rec.access(self._alloc, off, LOAD, frame, False)
        return self._data[idx]

    def __setitem__(self, idx, value):
        frame = sys._getframe(1)
        off = self._locate(idx, STORE, frame)
        if off is None:
            raise TraceError(f"line {frame.f_lineno}: assign single elements of {self._name}, not slices")
        self._rec.access(self._alloc, off, STORE, frame, False)
        self._data[idx] = value

    def _view(self, idx, frame):
        """A[i] of a 2-D array, or a slice: a traced view of the same allocation."""
        idx = idx if type(idx) is tuple else (idx,)
        if len(idx) > len(self._shape):
            raise self._rec.out_of_bounds(self, idx, LOAD, frame)
        for i, n in zip(idx, self._shape, strict=False):
            if not isinstance(i, slice) and not 0 <= _as_index(i, self._name, frame) < n:
                raise self._rec.out_of_bounds(self, idx, LOAD, frame)
        view = self._data[idx]
        off0 = view.__array_interface__["data"][0] - self._data.__array_interface__["data"][0]
        name = f"{self._name}[{', '.join(_fmt_index(i) for i in idx)}]"
        return TracedArray(self._rec, self._alloc, view, self._off0 + off0, name)

    def atomic(self, idx, update, frame):
        """Apply update(old) to one element atomically; return old (cuda.atomic.*)."""
        off = self._locate(idx, STORE, frame)
        if off is None:
            raise TraceError(f"line {frame.f_lineno}: atomics need a full index into {self._name}")
        self._rec.access(self._alloc, off, LOAD, frame, True)
        self._rec.access(self._alloc, off, STORE, frame, True)
        old = self._data[idx]
        self._data[idx] = update(old)
        return old


def _fmt_index(i):
    """An index or slice as the kernel wrote it."""
    if isinstance(i, slice):
        parts = ["" if v is None else str(v) for v in (i.start, i.stop)]
        return ":".join(parts) + (f":{i.step}" if i.step is not None else "")
    return str(i)


def _as_index(i, name, frame):
    """An integer index, or a TypeError naming the line and the array."""
    try:
        return operator.index(i)
    except TypeError:
        msg = f"line {frame.f_lineno}: index {i!r} into {name} is a {type(i).__name__}, not an integer"
        raise TypeError(msg) from None


# accesses that conflict with an access of each category, and the kind of race they make
_CONFLICTS = {
    LOAD: ((STORE, "read-write"), (ATOMIC, "read-write")),
    STORE: ((STORE, "write-write"), (ATOMIC, "write-write"), (LOAD, "read-write")),
    ATOMIC: ((STORE, "write-write"), (LOAD, "read-write")),
}


class Recorder:
    """Per-trace state: the current thread, warp request groups, race tables and the report."""

    def __init__(self, griddim, blockdim, kernel_file):
        self.griddim, self.blockdim, self.kernel_file = griddim, blockdim, kernel_file
        self.report = TraceReport(griddim=griddim, blockdim=blockdim)
        self.allocations = []
        self.grid_state = {}  # (allocation id, offset) of global arrays -> accesses by block
        self.kept = 0
        self.warned = set()  # keys of warnings already given
        self.lane = self.warp = 0
        self.block = self.thread = (0, 0, 0)
        self.counts = {}
        self.budget = model.MAX_BLOCK_ACCESSES  # read here, so a test can lower it
        self.accesses = 0  # array accesses of the current block

    def warn(self, key, msg):
        """Add a warning to the report once per key (as the first block shows it)."""
        if key not in self.warned:
            self.warned.add(key)
            self.report.warnings.append(msg)

    def allocate(self, name, shared, base, data):
        """A TracedArray over data, a new allocation in global or shared memory."""
        alloc = Allocation(len(self.allocations), name, shared, base, data)
        self.allocations.append(alloc)
        return TracedArray(self, alloc, data)

    def begin_block(self, block):
        """Reset the per-block state: request groups, shared arrays, phase log."""
        self.block = block
        self.groups = {}  # (warp, (file, line, allocation id, kind), k) -> [(lane, offset)]
        self.block_global = {}  # (allocation, offset, category) -> first (thread, key) in the block
        self.shared_arrays, self.shared_top = {}, 0
        self.log, self.written = [], set()
        self.init = set()  # shared byte addresses written in earlier phases of the block
        self.mine = set()  # ... and by the current thread in this phase (set by the scheduler)
        self.phase_mines, self.pending = [], []  # this phase's `mine` sets; its kept uninitialized reads
        self.accesses = 0

    def access(self, alloc, off, kind, frame, atomic):
        """Record one element access of the current thread (the hot path)."""
        key = (frame.f_code.co_filename, frame.f_lineno, alloc.id, kind)
        counts = self.counts
        k = counts.get(key, 0)  # the k-th execution of this line, array and kind by this thread
        counts[key] = k + 1
        self.accesses += 1
        if self.accesses > self.budget:
            raise self.endless()
        gkey = (self.warp, key, k)
        group = self.groups.get(gkey)
        if group is None:
            self.groups[gkey] = [(self.lane, off)]
        else:
            group.append((self.lane, off))
        if alloc.shared:  # initcheck: written by the block before, or by this thread in this phase?
            addr = alloc.base + off
            if kind == STORE:
                self.mine.add(addr)
            elif addr not in self.init and addr not in self.mine:
                self._uninitialized(alloc, off, addr, frame)
        if atomic and kind == LOAD:
            return  # an atomic is race-checked once, as its store
        if kind == STORE:
            self.written.add(alloc.id)
        self.log.append((alloc, off, ATOMIC if atomic else kind, self.thread, key))

    def endless(self):
        """The TraceEndless for the current thread: its most executed access line and how often it ran."""
        (file, line, _, _), steps = max(self.counts.items(), key=lambda kv: kv[1])
        return TraceEndless("", "", self.thread, self.block, line if file == self.kernel_file else 0, steps)

    def end_phase(self):
        """At a barrier: race-check the phase's accesses to arrays written in it; commit its shared writes."""
        table, written, seen = {}, self.written, self.block_global
        for alloc, off, cat, thread, key in self.log:
            if alloc.id in written:
                self._check(table, (alloc.id, off), thread, cat, alloc, off, key, thread)
            if not alloc.shared:
                seen.setdefault((alloc, off, cat), (thread, key))
        self.log, self.written = [], set()
        for alloc, off, addr, thread, file, line, mine in self.pending:
            same = any(addr in s for s in self.phase_mines if s is not mine)
            src = linecache.getline(file, line).strip()
            found = UninitializedRead(alloc.name, alloc.index(off), thread, self.block, line, src, same)
            self.report.uninitialized.append(found)
        for s in self.phase_mines:
            self.init |= s
        self.phase_mines, self.pending = [], []

    def _uninitialized(self, alloc, off, addr, frame):
        """Count a shared read of an element the block has not written; keep the first MAX_FINDINGS."""
        rep = self.report
        rep.uninitialized_reads += 1
        file, line = frame.f_code.co_filename, frame.f_lineno
        self.line_stats(file, line).uninitialized_reads += 1
        if len(rep.uninitialized) + len(self.pending) < MAX_FINDINGS:
            self.pending.append((alloc, off, addr, self.thread, file, line, self.mine))

    def _check(self, table, ekey, actor, cat, alloc, off, key, thread):
        """Race check against earlier accesses by other actors (threads, or blocks)."""
        slots = table.get(ekey)
        if slots is None:
            table[ekey] = slots = [[], [], []]  # loads, stores, atomics by up to 2 actors each
        elif slots[STORE] or slots[ATOMIC] or (cat != LOAD and slots[LOAD]):
            for other_cat, race_kind in _CONFLICTS[cat]:
                first = next((e for e in slots[other_cat] if e[0] != actor), None)
                if first is not None:
                    self._race(alloc, off, race_kind, first, thread, key)
                    break
        mine = slots[cat]
        if len(mine) < 2 and (not mine or mine[0][0] != actor):
            mine.append((actor, self.block, thread, key[1]))

    def _race(self, alloc, off, kind, first, thread, key):
        """Count a race, and keep it while fewer than MAX_RACES are kept."""
        rep = self.report
        rep.race_count += 1
        self.line_stats(key[0], key[1]).races += 1
        if len(rep.races) < MAX_RACES:
            _, block, other, line = first
            # where a barrier goes: for the first race only (race_message's), on a block's shared memory
            first_shared = not rep.races and alloc.shared and block == self.block
            gap = self._gap(key[0], (other, thread), {line, key[1]}, alloc.id) if first_shared else None
            race = Race(
                alloc.name, alloc.index(off), kind, (block, other), (self.block, thread), line, key[1], gap
            )
            rep.races.append(race)

    def _gap(self, file, threads, lines, array):
        """Where a barrier would order a race of this phase on `array` (an allocation id): the two lines
        as one of the racing threads ran them (first, then next), with their source; for a race of one
        line, that line when a racing thread stored to the array there more than once (a loop around
        it); None when neither thread shows an order."""
        mine = [(t, k[1], k[3]) for *_, t, k in self.log if k[0] == file and k[2] == array and k[1] in lines]
        if len(lines) == 1:
            (line,) = lines
            for thread in threads:
                if sum(t == thread and kind == STORE for t, _, kind in mine) > 1:
                    src = linecache.getline(file, line).strip()
                    return line, src, line, src
            return None
        for thread in threads:
            order = [ln for t, ln, _ in mine if t == thread]
            if len(set(order)) == 2:
                a = order[0]
                (b,) = lines - {a}
                return a, linecache.getline(file, a).strip(), b, linecache.getline(file, b).strip()
        return None

    def line_key(self, file, line):
        """by_line's key: the line number in the kernel's file, else (file, line)."""
        return line if file == self.kernel_file else (file, line)

    def line_stats(self, file, line):
        """The LineStats of a source line, created with its source text."""
        lkey = self.line_key(file, line)
        s = self.report.by_line.get(lkey)
        if s is None:
            src = linecache.getline(file, line).strip()
            s = self.report.by_line[lkey] = LineStats(file=file, line=line, source=src)
        return s

    def end_block(self):
        """Race-check global accesses against other blocks; count wavefronts and sectors."""
        for (alloc, off, cat), (thread, key) in self.block_global.items():
            self._check(self.grid_state, (alloc.id, off), self.block, cat, alloc, off, key, thread)
        for (warp, (file, line, aid, kind), k), items in self.groups.items():
            alloc = self.allocations[aid]
            stats = self.line_stats(file, line)
            op = "_load" if kind == LOAD else "_store"
            if alloc.shared:
                waves, ideal = wavefronts(items, alloc.base, alloc.itemsize)
                for c in (stats, self.report):
                    c.add("shared" + op, 1, waves, waves - ideal)
                self._keep(warp, file, line, k, alloc, kind, items)
            else:
                sectors = sectors_touched(items, alloc.itemsize)
                for c in (stats, self.report):
                    c.add("global" + op, 1, sectors)

    def _keep(self, warp, file, line, k, alloc, kind, items):
        """Keep a shared request for shared_request / bank_diagram (the first MAX_KEPT_REQUESTS)."""
        if self.kept >= MAX_KEPT_REQUESTS:
            return
        self.kept += 1
        lanes, addresses = [i[0] for i in items], [alloc.base + i[1] for i in items]
        req = SharedRequest(alloc.name, kind == STORE, alloc.itemsize, lanes, addresses)
        key = (self.block, warp, self.line_key(file, line), k)
        self.report.kept_requests.setdefault(key, []).append(req)

    def out_of_bounds(self, array, idx, kind, frame):
        """memcheck: the TraceOutOfBounds error for the current thread's access, with a true hint."""
        name, shape = array._name, tuple(array.shape)
        what = "write to" if kind == STORE else "read of"
        line = frame.f_lineno
        src = linecache.getline(frame.f_code.co_filename, line).strip()
        idx = tuple(i if isinstance(i, slice) else int(i) for i in idx)
        msg = (
            f"out-of-bounds {what} {name}[{', '.join(_fmt_index(i) for i in idx)}]"
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
                return (
                    f"{where}. This thread is one of the surplus threads of the last, partial block along"
                    f" {xyz}: its global {xyz} index is {g}, and {n} is not a multiple of the block size"
                    f" {b}. Did you guard the last partial block (if {guard}: ...)?"
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


def wavefronts(items, base, itemsize):
    """(wavefronts, ideal) of one shared request: max distinct words in a bank, ceil(words / 32)."""
    if itemsize == 4:
        words = {(base + off) >> 2 for _, off in items}
    else:
        words = set()
        for _, off in items:
            a = base + off
            words.update(range(a >> 2, ((a + itemsize - 1) >> 2) + 1))
    per_bank = [0] * NUM_BANKS
    for w in words:
        per_bank[w % NUM_BANKS] += 1
    return max(per_bank), -(-len(words) // NUM_BANKS)


def sectors_touched(items, itemsize):
    """Distinct 32-byte sectors touched by one global request."""
    if itemsize <= 4:
        return len({off >> 5 for _, off in items})
    sectors = set()
    for _, off in items:
        sectors.update(range(off >> 5, ((off + itemsize - 1) >> 5) + 1))
    return len(sectors)
