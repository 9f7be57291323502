"""Warp intrinsics under the tracer: the lanes of a mask meet at the call and exchange values as a GPU
does (Chapter 10).

Each call of `cuda.shfl_*_sync`, a vote (`ballot_sync`, `all_sync`, `any_sync`, `eq_sync`), `activemask` or
`syncwarp` is rewritten (`execute._SyncToYield`) into `yield ("warp", (name, site, args))`; the block's
scheduler (`execute._run_block`) runs each lane to its next event and hands a warp's waiting lanes to
`resolve`, which completes every group whose lanes have all arrived and computes its results here.
The semantics follow the PTX ISA (shfl.sync, vote.sync, bar.warp.sync) as numba-cuda lowers them
(numba/cuda/intrinsics.py): only bits 4:0 of a shuffle's lane operand count; shfl_up_sync clamps at
lane 0 and shfl_down_sync at lane 31 (the lane keeps its own value there); ballot_sync returns an int32,
all/any/eq_sync a bool, activemask a uint32.
"""

import linecache

import numpy as np

from cudalearn.trace import collective
from cudalearn.trace.model import WARP_SIZE, TraceError, WarpError

FULL = 0xFFFFFFFF
SHUFFLES = ("shfl_sync", "shfl_up_sync", "shfl_down_sync", "shfl_xor_sync")
VOTES = ("ballot_sync", "all_sync", "any_sync", "eq_sync")
#: the intrinsics the tracer runs as warp events (each a `yield`), with their arity
OPS = {**dict.fromkeys(SHUFFLES, 3), **dict.fromkeys(VOTES, 2), "activemask": 0, "syncwarp": (0, 1)}
_SHUFFLE_VALUES = (int, float, np.int32, np.int64, np.float32, np.float64)  # numba: i4, i8, f4, f8 only
MASK_FIX = (
    "guard the work instead of returning early and keep every lane of the warp in the loop (a loop bound"
    " that is the same for the whole warp), or compute the mask before the branch, with every lane there"
    " (`mask = cuda.ballot_sync(FULL_MASK, i < n)`), and pass it to the calls inside `if i < n:`"
)


def _lane_source(lane, a, b):
    """(source lane, in range) of a shuffle: PTX shfl.sync with numba's clamp operand c."""
    b &= 31  # bval[4:0] = b[4:0]
    if a == "shfl_sync":  # .idx, c = 0x1f: the lane b % 32
        return b, True
    if a == "shfl_up_sync":  # .up, c = 0: j = lane - b, in range if j >= 0
        return lane - b, lane - b >= 0
    if a == "shfl_down_sync":  # .down, c = 0x1f: j = lane + b, in range if j <= 31
        return lane + b, lane + b <= 31
    return lane ^ b, True  # .bfly


def _bits(mask):
    """The lanes named in a 32-bit mask (numba truncates the mask to 32 bits)."""
    return [i for i in range(WARP_SIZE) if mask >> i & 1]


def _where(file, line):
    """'line N (`source`)' of a call site."""
    return f"line {line} (`{linecache.getline(file, line).strip()}`)"


class Actor(tuple):
    """A thread's (x, y, z) as the race checker's actor once its warp passed a full-warp syncwarp.

    `a != b` (the only comparison the checker makes) is False for two lanes of one warp in different
    syncwarp epochs of a phase: __syncwarp orders their memory accesses. Plain tuples are epoch 0.
    """

    def __new__(cls, thread, warp_first, epoch, dims):
        obj = super().__new__(cls, thread)
        obj.warp, obj.epoch, obj.dims = warp_first, epoch, dims
        return obj

    def __ne__(self, other):
        if isinstance(other, Actor):
            if other.warp == self.warp and other.epoch != self.epoch:
                return False
        elif self.epoch and _warp_first(other, self.dims) == self.warp:
            return False
        return tuple.__ne__(self, other)

    __hash__ = tuple.__hash__


def _warp_first(thread, dims):
    """The block-linear id of the first lane of a thread's warp; dims: (blockDim.x, blockDim.y)."""
    bx, by = dims
    return (thread[0] + bx * (thread[1] + by * thread[2])) // WARP_SIZE * WARP_SIZE


class Warp:
    """The state of one warp of the block being traced: its lanes' thread ids and where each one is."""

    def __init__(self, first_tid, nlanes, kernel, file, block, threads, gone, barrier, dims):
        self.first, self.nlanes, self.kernel, self.block = first_tid, nlanes, kernel, block
        self.dims = dims  # (blockDim.x, blockDim.y)
        self.file = file  # the kernel's file (where its returns are)
        self.threads = threads  # thread coordinates by block-linear id
        self.gone = gone  # thread id -> line of its `return` (0: it ran to the end of the kernel)
        self.barrier = barrier  # thread id -> line of the barrier it waits at (this phase)
        self.epoch = 0  # full-warp syncwarps completed in this phase (race checking)

    def actor(self, tid):
        """The race checker's actor of a lane: its thread, ordered after this phase's full-warp syncwarps."""
        return Actor(self.threads[tid], self.first, self.epoch, self.dims)

    def lanes_text(self, lanes):
        """'lanes 3-5 (first thread (3, 0, 0))' or 'lane 7 (thread (7, 0, 0))', for a message."""
        if not lanes:
            return "no lanes"
        run = (
            f"{lanes[0]}-{lanes[-1]}"
            if lanes[-1] - lanes[0] == len(lanes) - 1
            else ", ".join(map(str, lanes))
        )
        if len(lanes) > 1 and len(run) > 40:
            run = ", ".join(map(str, lanes[:8])) + ", ..."
        text = f"lane{'s' if len(lanes) > 1 else ''} {run}"
        if self.first + lanes[0] >= len(self.threads):
            return text
        return f"{text} ({'first ' if len(lanes) > 1 else ''}thread {self.threads[self.first + lanes[0]]})"

    def error(self, what, name, site, fix=MASK_FIX):
        """The WarpError of a call of `cuda.<name>` at site (file, line, column) in this warp."""
        file, line = site[0], site[1]
        return WarpError(
            f"`cuda.{name}` in kernel `{self.kernel}`, {_where(file, line)}, block {self.block}, warp"
            f" {self.first // WARP_SIZE}: {what}. In CUDA this is undefined behaviour (a wrong value or a"
            f" hang): the programming guide asks every non-exited lane named in the mask to execute the same"
            f" intrinsic with the same mask, and NVIDIA's CUDA C++ guidelines to name only lanes that take"
            f" part; the tracer asks every lane of the mask to wait at this very call. Fix: {fix}.",
            self.kernel,
            line,
        )


def resolve(warp, waiting, sends, report):
    """Complete the groups of `warp` whose lanes have all arrived; return the thread ids to resume.

    waiting: lane -> (name, site, args) of the warp's lanes at a warp event; completed lanes are removed
    and their results put in sends (by thread id). Raises WarpError when no group can complete.
    """
    groups = {}
    exists = (1 << warp.nlanes) - 1
    for lane, (name, site, args) in waiting.items():
        if name == "activemask":
            key = (name, site, 0)
        elif collective.known(name):  # mma.sync, ldmatrix (Chapter 6): the whole warp, at this call
            key = (name, site, FULL)
        else:
            mask = int(args[0]) & FULL if args else FULL
            if not mask >> lane & 1:
                raise warp.error(f"the calling lane {lane} is not in its own mask {mask:#010x}", name, site)
            if mask & ~exists:
                raise warp.error(
                    f"the mask {mask:#010x} names {warp.lanes_text(_bits(mask & ~exists))}, which no thread"
                    f" of the block occupies: this last warp of the block has {warp.nlanes} lanes",
                    name,
                    site,
                    "launch blocks of a multiple of 32 threads, and guard the surplus threads' work instead"
                    " of leaving them out",
                )
            key = (name, site if name != "syncwarp" else None, mask)  # any syncwarp with the mask meets
        groups.setdefault(key, []).append(lane)
    ready = []
    for (name, _, mask), lanes in groups.items():
        if name != "activemask" and len(lanes) != mask.bit_count():
            continue  # some lanes of the mask have not arrived (yet)
        ready += _complete(warp, name, lanes, mask, waiting, sends, report)
    if not ready:
        raise _stuck(warp, waiting, min(waiting))
    return ready


def _complete(warp, name, lanes, mask, waiting, sends, report):
    """Compute one group's results into sends; return its thread ids."""
    first = warp.first
    entries = {lane: waiting.pop(lane) for lane in lanes}
    report.warp_ops[name] = report.warp_ops.get(name, 0) + 1
    if name == "activemask":
        bits = np.uint32(sum(1 << lane for lane in lanes))
        for lane in lanes:
            sends[first + lane] = bits
    elif name == "syncwarp":
        for lane in lanes:
            sends[first + lane] = None
        if len(lanes) == warp.nlanes:
            warp.epoch += 1  # memory ordering among all the warp's lanes (see execute._run_block)
    elif collective.known(name):
        collective.complete(warp, name, entries, sends)
    elif name in VOTES:
        preds = {lane: bool(entries[lane][2][1]) for lane in lanes}
        ballot = sum(1 << lane for lane, p in preds.items() if p)
        result = {
            "ballot_sync": np.int32(ballot - (1 << 32) if ballot >> 31 else ballot),
            "all_sync": all(preds.values()),
            "any_sync": any(preds.values()),
            "eq_sync": len(set(preds.values())) == 1,
        }[name]
        for lane in lanes:
            sends[first + lane] = result
    else:
        for lane in lanes:
            _, site, (_, value, b) = entries[lane]
            if not isinstance(value, _SHUFFLE_VALUES) or isinstance(value, bool):
                raise TraceError(
                    f"`cuda.{name}` in kernel `{warp.kernel}`, {_where(*site[:2])}: the value is a"
                    f" {type(value).__name__}; numba shuffles 32- and 64-bit ints and floats only"
                )
            src, in_range = _lane_source(lane, name, int(b))
            if not in_range:
                sends[first + lane] = value
            elif src not in entries:
                raise warp.error(
                    f"lane {lane} reads lane {src}, which is not in the mask {mask:#010x}",
                    name,
                    site,
                    "name every source lane in the mask (usually the full mask FULL_MASK = 0xFFFFFFFF,"
                    " with every lane of the warp at the call), or shuffle with an offset that stays inside"
                    " the mask's lanes",
                )
            else:
                sends[first + lane] = entries[src][2][1]
    return [first + lane for lane in sorted(lanes)]


def _stuck(warp, waiting, lane):
    """The WarpError of a warp none of whose groups can complete: where the missing lanes are."""
    name, site, args = waiting[lane]
    if (name == "syncwarp" and not args) or collective.known(name):
        mask = FULL
    else:
        mask = int(args[0]) & FULL
    mine = [i for i, w in waiting.items() if w[0] == name and (name == "syncwarp" or w[1] == site)]
    same = [
        i
        for i in mine
        if collective.known(name) or (int(waiting[i][2][0]) & FULL if waiting[i][2] else FULL) == mask
    ]
    missing = [i for i in _bits(mask) if i not in same]
    places = {}
    for i in missing:
        if warp.first + i in warp.gone:
            where = warp.gone[warp.first + i]
            key = f"returned on {_where(warp.file, where)}" if where else "ran to the end of the kernel"
        elif warp.first + i in warp.barrier:
            key = f"wait at the barrier on {_where(warp.file, warp.barrier[warp.first + i])}"
        elif i in waiting:
            other = waiting[i]
            om = int(other[2][0]) & FULL if other[2] and not collective.known(other[0]) else FULL
            at = _where(*other[1][:2])
            key = f"wait at `cuda.{other[0]}` on {at}" + (f" with mask {om:#010x}" if om != mask else "")
        else:
            key = "are elsewhere"
        places.setdefault(key, []).append(i)
    why = "; ".join(f"{warp.lanes_text(ls)} {key}" for key, ls in places.items())
    return warp.error(
        f"{warp.lanes_text(same)} wait here with mask {mask:#010x}, but {why}, so the call can never"
        f" complete",
        name,
        site,
    )
