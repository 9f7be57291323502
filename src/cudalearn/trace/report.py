"""What a trace reports: counters, lines, races, kept shared requests, the bank diagram (Chapters 2-5)."""

from dataclasses import dataclass, field

import numpy as np

from cudalearn.trace.model import MAX_KEPT_REQUESTS, NUM_BANKS, dim3

#: The fix of a race in a tiled kernel: its two barriers (labs 3-6).
TILE_BARRIERS_HINT = (
    "every thread must finish writing a tile before any thread reads it (a cuda.syncthreads() after the"
    " loads), and every thread must finish reading it before any thread overwrites it with the next tile"
    " (a second cuda.syncthreads() at the end of the loop body)."
)


@dataclass
class Counts:
    """Warp requests and their cost, split into loads and stores (Chapters 2-4).

    Shared: wavefronts, and bank conflicts = wavefronts beyond the ideal
    ceil(distinct 4-byte words / 32) of each request. Global: 32-byte sectors.
    """

    shared_load_requests: int = 0
    shared_load_wavefronts: int = 0
    shared_load_bank_conflicts: int = 0
    shared_store_requests: int = 0
    shared_store_wavefronts: int = 0
    shared_store_bank_conflicts: int = 0
    global_load_requests: int = 0
    global_load_sectors: int = 0
    global_store_requests: int = 0
    global_store_sectors: int = 0

    @property
    def shared_requests(self) -> int:
        return self.shared_load_requests + self.shared_store_requests

    @property
    def shared_wavefronts(self) -> int:
        return self.shared_load_wavefronts + self.shared_store_wavefronts

    @property
    def bank_conflicts(self) -> int:
        return self.shared_load_bank_conflicts + self.shared_store_bank_conflicts

    @property
    def global_requests(self) -> int:
        return self.global_load_requests + self.global_store_requests

    @property
    def global_sectors(self) -> int:
        return self.global_load_sectors + self.global_store_sectors

    def add(self, name, requests, cost, conflicts=0):
        """Add requests of one kind ('shared_load', 'global_store', ...) and their cost."""
        unit = "_wavefronts" if name.startswith("shared") else "_sectors"
        setattr(self, name + "_requests", getattr(self, name + "_requests") + requests)
        setattr(self, name + unit, getattr(self, name + unit) + cost)
        if conflicts:
            setattr(self, name + "_bank_conflicts", getattr(self, name + "_bank_conflicts") + conflicts)

    def counters(self) -> dict:
        """All counters, measured and summed, as a flat dict of ints (Chapter 4)."""
        names = [f for f in Counts.__dataclass_fields__]
        names += [
            "shared_requests",
            "shared_wavefronts",
            "bank_conflicts",
            "global_requests",
            "global_sectors",
        ]
        return {n: getattr(self, n) for n in names}


@dataclass
class LineStats(Counts):
    """Counters of one source line (Chapter 4)."""

    file: str = ""
    line: int = 0
    source: str = ""
    races: int = 0
    uninitialized_reads: int = 0


@dataclass(frozen=True)
class Race:
    """Two unordered accesses to one element, at least one a write (Chapter 3)."""

    array: str
    index: tuple
    kind: str  # 'read-write' or 'write-write'
    first: tuple  # (block, thread) of the earlier access, each an (x, y, z)
    second: tuple  # (block, thread) of the later access
    first_line: int
    second_line: int
    # Where the missing barrier goes, when one of the two threads ran both lines in the phase of the race:
    # (line it ran first, its source, line it ran next, its source); kept for a report's first race on
    # shared memory, None otherwise.
    gap: tuple | None = None

    def __str__(self):
        (b1, t1), (b2, t2) = self.first, self.second
        idx = ", ".join(map(str, self.index))
        return (
            f"{self.kind} race on {self.array}[{idx}]: thread {t1} of block {b1}"
            f" (line {self.first_line}) and thread {t2} of block {b2}"
            f" (line {self.second_line}) with no syncthreads between them"
        )

    def missing_barrier(self) -> str:
        """Where a cuda.syncthreads() would order this race, from one thread's order; '' if unknown."""
        if self.gap is None:
            return ""
        a, a_src, b, b_src = self.gap
        if a == b:
            return (
                f"Each thread ran line {a} (`{a_src}`) more than once with no barrier in between: the"
                f" missing cuda.syncthreads() goes in the loop around line {a}, between one pass over it and"
                f" the next."
            )
        again = " runs again (at the end of the loop body)" if b < a else ""
        return (
            f"A thread ran line {a} (`{a_src}`) and then line {b} (`{b_src}`) with no barrier in between:"
            f" the missing cuda.syncthreads() goes after line {a} and before line {b}{again}."
        )


@dataclass(frozen=True)
class BarrierError:
    """synccheck: threads of a block that leave or skip a barrier the others wait at (Chapter 3).

    kind: 'returned' (they executed a `return` on left_line), 'skipped' (they
    ran to the end of the kernel without reaching the barrier) or 'divergent'
    (they wait at another barrier, on left_line). threads: the first of them,
    each (x, y, z); count: how many; waiting: threads at the barrier on `line`.
    """

    kind: str
    block: tuple
    threads: tuple
    count: int
    waiting: int
    line: int
    source: str
    left_line: int = 0
    left_source: str = ""

    def __str__(self):
        who = f"{self.count} thread(s) (first {self.threads[0]})"
        barrier = f"the barrier on line {self.line} (`{self.source}`)"
        if self.kind == "returned":
            what = (
                f"{who} returned on line {self.left_line} (`{self.left_source}`) while"
                f" {self.waiting} other thread(s) wait at {barrier}"
            )
        elif self.kind == "skipped":
            what = (
                f"{who} ran to the end of the kernel without reaching {barrier}, where"
                f" {self.waiting} other thread(s) wait"
            )
        else:
            what = (
                f"{who} wait at the barrier on line {self.left_line} (`{self.left_source}`) while"
                f" {self.waiting} other thread(s) wait at {barrier}"
            )
        return (
            f"Barrier error detected. Divergent thread(s) in block {self.block}: {what};"
            " every thread of a block must reach the same barriers (undefined behaviour on a GPU)"
        )


@dataclass(frozen=True)
class UninitializedRead:
    """initcheck: a shared-memory read of an element no thread of the block wrote before it (Chapter 3).

    Before it means: in an earlier phase (before a barrier), or by the same
    thread earlier in this phase. same_phase: another thread writes the element
    in the reader's phase, unordered with the read (a missing syncthreads).
    """

    array: str
    index: tuple
    thread: tuple
    block: tuple
    line: int
    source: str
    same_phase: bool = False

    def __str__(self):
        idx = ", ".join(map(str, self.index))
        why = (
            "another thread writes it in the same phase, with no cuda.syncthreads() between the write and"
            " this read"
            if self.same_phase
            else "no thread of the block wrote it before"
        )
        return (
            f"uninitialized shared-memory read of {self.array}[{idx}] by thread {self.thread} of block"
            f" {self.block}, line {self.line} (`{self.source}`): {why}"
        )


@dataclass
class SharedRequest:
    """One warp's shared-memory request: which lane touches which byte address (Chapter 4)."""

    array: str
    store: bool
    itemsize: int
    lanes: list  # lane of each access
    addresses: list  # byte address of each access in the block's shared space

    def banks(self) -> dict:
        """Map bank -> {4-byte word: sorted lanes touching it}, banks and words sorted."""
        out = {}
        for lane, addr in zip(self.lanes, self.addresses, strict=True):
            for word in range(addr // 4, (addr + self.itemsize - 1) // 4 + 1):
                out.setdefault(word % NUM_BANKS, {}).setdefault(word, set()).add(lane)
        return {b: {w: sorted(ls) for w, ls in sorted(out[b].items())} for b in sorted(out)}

    @property
    def wavefronts(self) -> int:
        return max(len(words) for words in self.banks().values())

    @property
    def bank_conflicts(self) -> int:
        words = sum(len(ws) for ws in self.banks().values())
        return self.wavefronts - max(1, -(-words // NUM_BANKS))


def _line_order(key):
    """Sort key of by_line: the kernel's lines by number, then other files' (file, line)."""
    return (isinstance(key, tuple), key)


@dataclass(repr=False)
class TraceReport(Counts):
    """What a traced kernel did to memory: totals, per line, races, outputs (Chapters 2-5).

    by_line maps a line number of the kernel's file (or (file, line) for device
    functions in other files) to its LineStats; outputs holds the arrays after
    the kernel ran, aligned with the arguments.
    """

    kernel: str = ""
    griddim: tuple = (1, 1, 1)
    blockdim: tuple = (1, 1, 1)
    races: list = field(default_factory=list)
    race_count: int = 0
    by_line: dict = field(default_factory=dict)
    outputs: list = field(default_factory=list)
    warnings: list = field(default_factory=list)
    barrier_errors: list = field(default_factory=list)  # the first MAX_FINDINGS BarrierErrors
    barrier_error_count: int = 0
    uninitialized: list = field(default_factory=list)  # the first MAX_FINDINGS UninitializedReads
    uninitialized_reads: int = 0
    kept_requests: dict = field(default_factory=dict)  # (block, warp, line, k) -> [SharedRequest]
    warp_ops: dict = field(default_factory=dict)  # intrinsic name -> executions, one per warp per call
    atomics: int = 0  # atomic operations executed, one per thread per call

    def __repr__(self):
        return (
            f"<TraceReport {self.kernel}: {self.shared_requests} shared requests,"
            f" {self.bank_conflicts} bank conflicts, {self.global_sectors} global"
            f" sectors, {self.race_count} races>"
        )

    def __str__(self):
        return self.table()

    def table(self) -> str:
        """Per-line counts and source, totals, races, uninitialized reads, warnings (Chapter 4)."""
        head = ("line", "sh.req", "sh.wave", "confl", "gl.req", "sectors", "races")
        rows = [f"{head[0]:>6} " + " ".join(f"{h:>8}" for h in head[1:]) + "  source"]
        for key in sorted(self.by_line, key=_line_order):
            s = self.by_line[key]
            where = key if isinstance(key, int) else f"{s.file}:{s.line}"
            rows.append(f"{where:>6} " + _cells(s, s.races) + "  " + s.source)
        rows.append(f"{'total':>6} " + _cells(self, self.race_count))
        threads = int(np.prod(self.griddim) * np.prod(self.blockdim))
        out = [f"{self.kernel}[{self.griddim}, {self.blockdim}]: {threads} threads", *rows]
        if self.race_count:
            shown = f" (first {len(self.races)})" if self.race_count > len(self.races) else ""
            out += [f"{self.race_count} races{shown}:"] + [f"  {r}" for r in self.races]
        if self.uninitialized_reads:  # barrier errors are among the warnings, one per barrier
            kept = self.uninitialized
            shown = f" (first {len(kept)})" if self.uninitialized_reads > len(kept) else ""
            out += [f"{self.uninitialized_reads} uninitialized shared reads{shown}:"]
            out += [f"  {u}" for u in kept]
        if self.warp_ops:
            ops = ", ".join(f"{n} {c}" for n, c in sorted(self.warp_ops.items()))
            out.append(f"warp-level executions (one per warp per call): {ops}; atomics: {self.atomics}")
        out += [f"warning: {w}" for w in self.warnings]
        return "\n".join(out)

    def sanitizer_message(self, *, init_hint: str | None = None, return_hint: str | None = None) -> str:
        """The first barrier error, else uninitialized read, as a message with its fix; or '' (labs 3-6, 10).

        An uninitialized read that another thread's write in the same phase explains is also a race,
        and is left to the race checks (report.races), whose hint names the missing barrier.
        init_hint and return_hint: the fix of an uninitialized read and of a return before a barrier,
        in the words of the caller's kernel (by default a tiled matmul's: zero-fill the tile, guard
        the store of C).
        """
        if self.barrier_errors:
            err = self.barrier_errors[0]
            if err.kind == "returned":
                hint = return_hint or (
                    "move the return after the last cuda.syncthreads(), or guard the work instead of"
                    " returning (e.g. `if row < C.shape[0] and col < C.shape[1]:` around the store only)"
                    ", so that every thread of the block reaches every barrier."
                )
            else:
                hint = (
                    "a syncthreads() inside an if must be reached by every thread of the block: call it"
                    " outside the if, and guard only the loads and stores."
                )
            return (
                f"the tracer found {self.barrier_error_count} barrier error(s) in your kernel (synccheck)."
                f" The first: {err}. Hint: {hint}"
            )
        unexplained = [u for u in self.uninitialized if not u.same_phase]
        if unexplained:
            u = unexplained[0]
            return (
                f"the tracer found {self.uninitialized_reads} read(s) of shared memory that the block"
                f" had not written (initcheck). The first: {u}. Hint: "
                + (
                    init_hint
                    or "zero-fill the tile elements outside the matrix: every thread stores its element of"
                    " the tile, the matrix value or 0 (e.g. `sA[ty, tx] = A[row, k0 + tx] if row < m and"
                    " k0 + tx < K else float32(0.0)`), before the cuda.syncthreads() that precedes the reads."
                )
            )
        return ""

    def race_message(self, hint: str | None = None) -> str:
        """The first race as a student-facing message with `hint`, its fix; '' when race-free (labs 2-6).

        The one wording of a race for every check; `hint` defaults (None) to a tiled kernel's two barriers.
        """
        if not self.race_count:
            return ""
        hint = hint or TILE_BARRIERS_HINT
        return (
            f"the tracer found {self.race_count} race(s) in your kernel: two threads accessed one element,"
            f" at least one writing it, with nothing ordering them. The first: {self.races[0]}."
            f"{' ' + where if (where := self.races[0].missing_barrier()) else ''} Hint: {hint}"
        )

    def shared_request(self, line, warp=0, block=(0, 0, 0), occurrence=0, array=None, store=None):
        """The kept shared request of one warp for the occurrence-th execution of a line (Chapter 4)."""
        block = dim3(block, "block", least=0)
        found = self.kept_requests.get((block, warp, line, occurrence), [])
        found = [r for r in found if array in (None, r.array) and store in (None, r.store)]
        if not found:
            lines = sorted({k[2] for k in self.kept_requests}, key=_line_order)
            raise KeyError(
                f"no shared request kept for line {line}, warp {warp}, block {block},"
                f" occurrence {occurrence}; lines with shared requests: {lines}"
                f" (the first {MAX_KEPT_REQUESTS} requests are kept)"
            )
        return found[0]

    def bank_diagram(self, line, warp=0, block=(0, 0, 0), occurrence=0, array=None, store=None):
        """A matplotlib Figure of one request: banks across, wavefronts down, lanes in cells (Chapter 4)."""
        from matplotlib.figure import Figure
        from matplotlib.patches import Rectangle

        req = self.shared_request(line, warp, block, occurrence, array, store)
        depth = req.wavefronts
        fig = Figure(figsize=(16, 1.4 + 0.4 * depth))
        ax = fig.add_subplot()
        for bank, words in req.banks().items():
            for row, lanes in enumerate(words.values()):
                color = "#9ecae1" if row == 0 else "#fc9272"
                ax.add_patch(Rectangle((bank, row), 1, 1, facecolor=color, edgecolor="white"))
                ax.text(bank + 0.5, row + 0.5, _lanes_label(lanes), ha="center", va="center", fontsize=7)
        ax.set_xlim(0, NUM_BANKS)
        ax.set_ylim(depth, 0)
        ax.set_xticks([b + 0.5 for b in range(NUM_BANKS)], [str(b) for b in range(NUM_BANKS)], fontsize=7)
        ax.set_yticks([r + 0.5 for r in range(depth)], [str(r + 1) for r in range(depth)], fontsize=7)
        ax.set_xlabel("bank (a cell lists the lanes that touch one 4-byte word; several lanes = broadcast)")
        ax.set_ylabel("wavefront")
        op = "store to" if req.store else "load from"
        ax.set_title(
            f"line {line}: warp {warp} of block {block}, {op} {req.array}:"
            f" {depth} wavefront{'s' if depth > 1 else ''},"
            f" {req.bank_conflicts} bank conflict{'' if req.bank_conflicts == 1 else 's'}"
        )
        fig.tight_layout()
        return fig


def _cells(c, races):
    """The numeric cells of one table row."""
    vals = (c.shared_requests, c.shared_wavefronts, c.bank_conflicts, c.global_requests, c.global_sectors)
    return " ".join(f"{v:>8}" for v in (*vals, races))


def _lanes_label(lanes):
    """Lanes in a diagram cell: '5', '0,16', '0-31' or 'n lanes'."""
    if len(lanes) > 2 and lanes[-1] - lanes[0] == len(lanes) - 1:
        return f"{lanes[0]}-{lanes[-1]}"
    return ",".join(map(str, lanes)) if len(lanes) <= 3 else f"{len(lanes)} lanes"
