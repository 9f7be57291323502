"""Warp instructions a chapter defines (Chapter 6's mma.sync and ldmatrix), run by the tracer as warp events.

A chapter registers an instruction with `register(name, obj, compute, rows=0)`: `obj` is what its kernels
call (the simulator's `Instruction` stand-in, or the GPU intrinsic: both are recognised), `compute`
what the warp gets. The tracer rewrites each call of a registered object, in a kernel or a device
function, into a warp event (`execute._SyncToYield`), like a shuffle; when all 32 lanes of the warp
wait at the call (`.sync.aligned`: the PTX ISA asks every lane of the warp to execute the same
instruction), `complete` computes every lane's result:

* `rows == 0` (mma.sync): `compute(args by lane)` -> results by lane, from registers only;
* `rows > 0` (ldmatrix): each of lanes 0 .. rows - 1 passes (shared uint32 array, flat word offset) of
  one 16-byte row; the tracer reads the rows (`compute(rows (rows, 4) uint32)` -> results by lane) and
  records each 8 x 8 matrix as one shared-memory request of its 8 rows: wavefronts = the busiest
  bank's distinct words, ideal 1 (128 bytes), so a matrix whose rows share banks counts its conflicts
  as any shared load does (`request_cost.wavefronts`), on the line of the call, with the race and
  initcheck findings of those reads.
"""

import itertools
import types

import numpy as np

from cudalearn.trace.model import LOAD, WARP_SIZE, TraceError

ROW_WORDS = 4  # an ldmatrix row: 16 bytes
_BY_NAME: dict = {}  # name -> (compute, rows)
_BY_ID: dict = {}  # id(obj) -> name
_KEEP: list = []  # the registered objects (their ids stay valid)
_CALLS = itertools.count()  # a request key for each ldmatrix matrix: never an ordinary access's k


def resolve(module, attr):
    """`module.attr`, imported: how an Instruction is unpickled (in the compile server, the GPU intrinsic)."""
    import importlib

    return getattr(importlib.import_module(module), attr)


class Instruction:
    """The simulator's stand-in for a warp instruction: the tracer runs it; Numba's simulator cannot.

    It pickles as a reference to `module.<name>`, so that a kernel sent to the real compiler (the
    labs' compile check) finds there what that module defines on a GPU: the intrinsic.
    """

    def __init__(self, name, arity, module=None):
        self.__name__ = self.name = name
        self.arity, self.module = arity, module

    def __reduce__(self):
        return (resolve, (self.module, self.name))

    def __call__(self, *args):
        raise TraceError(
            f"{self.name} is a warp instruction (the 32 lanes of a warp exchange registers): Numba's"
            " simulator cannot run it. Launch the kernel with cudalearn.trace.launch (or trace.run), which"
            " runs it on the CPU tracer, or on a GPU."
        )

    def __repr__(self):
        return f"<warp instruction {self.name}>"


def register(name, obj, compute, rows=0):
    """Make calls of `obj` warp events named `name` whose results `compute` gives (see the module)."""
    _BY_NAME[name] = (compute, rows)
    _BY_ID[id(obj)] = name
    _KEEP.append(obj)


def name_of(obj):
    """The registered name of a warp instruction object, else None."""
    return _BY_ID.get(id(obj)) if obj is not None else None


def known(name) -> bool:
    """Whether `name` is a registered warp instruction (a warp event the tracer completes here)."""
    return isinstance(name, str) and name in _BY_NAME


def complete(warp, name, entries, sends):
    """Every lane's result of instruction `name`, the warp's 32 lanes having arrived: into sends."""
    compute, rows = _BY_NAME[name]
    if warp.nlanes != WARP_SIZE or len(entries) != WARP_SIZE:
        raise TraceError(
            f"`{name}` in kernel `{warp.kernel}`: the instruction needs all 32 lanes of warp"
            f" {warp.first // WARP_SIZE}, but the block has only {warp.nlanes} there: launch blocks of a"
            " multiple of 32 threads"
        )
    args = [entries[lane][2] for lane in range(WARP_SIZE)]
    data = _read_rows(warp, name, entries, rows) if rows else args
    for lane, value in enumerate(compute(data)):
        sends[warp.first + lane] = value


def _read_rows(warp, name, entries, rows):
    """(rows, 4) uint32: row r from lane r's (array, offset); each 8 rows recorded as one request."""
    _, site, (arr, _) = entries[0]
    rec = getattr(arr, "_rec", None)
    if rec is None:
        raise TraceError(f"line {site[1]}: `{name}` reads shared memory: pass it a cuda.shared.array")
    frame = types.SimpleNamespace(f_code=types.SimpleNamespace(co_filename=site[0]), f_lineno=site[1])
    saved = rec.thread, rec.lane, rec.warp, rec.counts, rec.mine
    out = np.zeros((rows, ROW_WORDS), np.uint32)
    try:
        rec.warp = warp.first // WARP_SIZE
        for j in range(rows // 8):
            k = -1 - next(_CALLS)  # one request per matrix (ordinary requests count k from 0)
            for r in range(8 * j, 8 * j + 8):
                a, off = entries[r][2]
                alloc, base = _row(a, off, r, name, site, warp)
                tid = warp.first + r
                rec.thread, rec.lane = warp.actor(tid), r
                rec.mine = rec.mines[tid] if getattr(rec, "mines", None) and rec.mines[tid] else set()
                for w in range(ROW_WORDS):
                    rec.counts = {(site[0], site[1], alloc.id, LOAD): k}
                    rec.access(alloc, base + 4 * w, LOAD, frame, False)
                out[r] = a._data.reshape(-1)[int(off) : int(off) + ROW_WORDS]
    finally:
        rec.thread, rec.lane, rec.warp, rec.counts, rec.mine = saved
    return out


def _row(arr, off, lane, name, site, warp):
    """(allocation, byte offset in it) of the 16-byte row lane `lane` addresses; TraceError if invalid."""
    alloc = getattr(arr, "_alloc", None)
    where = f"`{name}` in kernel `{warp.kernel}`, line {site[1]}, lane {lane} of warp {warp.first // 32}"
    if alloc is None or not alloc.shared or alloc.itemsize != 4:
        raise TraceError(f"{where}: the rows must be in a uint32 cuda.shared.array (two float16 a word)")
    data = arr._data
    if not data.flags.c_contiguous:
        raise TraceError(f"{where}: pass the whole C-contiguous shared array, not a strided view")
    off = int(off)
    if off % ROW_WORDS:
        raise TraceError(
            f"{where}: row offset {off} is not a multiple of 4 words: ldmatrix's rows must be 16-byte"
            " aligned (pad rows by multiples of 4 words)"
        )
    if not 0 <= off <= data.size - ROW_WORDS:
        raise TraceError(f"{where}: the row at flat offset {off} runs outside {arr!r} ({data.size} words)")
    return alloc, arr._off0 + 4 * off


class recording:  # noqa: N801  (used as `with collective.recording(name) as calls:`)
    """Within `with recording(name) as calls:`, each warp's call of instruction `name` appends its 32 lanes'
    arguments to `calls` (in the order the tracer completes them); results are unchanged (lab checks)."""

    def __init__(self, name):
        self.name, self.calls = name, []

    def __enter__(self):
        compute, rows = self.saved = _BY_NAME[self.name]

        def recorded(data):
            self.calls.append(data)
            return compute(data)

        _BY_NAME[self.name] = (recorded, rows)
        return self.calls

    def __exit__(self, *exc):
        _BY_NAME[self.name] = self.saved
        return False
