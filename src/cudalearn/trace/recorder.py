"""The recorder of a traced kernel's accesses: warp requests, races, uninitialized reads (Chapters 2-4).

It groups each block's accesses into warp requests and counts them per
line and per trace, race-checks each phase and each block, and finds
shared reads of elements the block has not written. Its arrays are
`arrays.TracedArray`s; a request's cost is `request_cost`'s (wavefronts,
sectors); its out-of-bounds errors are `memcheck`'s.
"""

import linecache

from cudalearn.trace import model
from cudalearn.trace.arrays import Allocation, TracedArray
from cudalearn.trace.memcheck import Memcheck
from cudalearn.trace.model import (
    ATOMIC,
    LOAD,
    MAX_FINDINGS,
    MAX_KEPT_REQUESTS,
    MAX_RACES,
    STORE,
    TraceEndless,
)
from cudalearn.trace.report import LineStats, Race, SharedRequest, TraceReport, UninitializedRead
from cudalearn.trace.request_cost import sectors_touched, wavefronts

# accesses that conflict with an access of each category, and the kind of race they make
_CONFLICTS = {
    LOAD: ((STORE, "read-write"), (ATOMIC, "read-write")),
    STORE: ((STORE, "write-write"), (ATOMIC, "write-write"), (LOAD, "read-write")),
    ATOMIC: ((STORE, "write-write"), (LOAD, "read-write")),
}


class Recorder(Memcheck):
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
