"""The tiles of Chapter 6's register-blocked steps: their sizes per target and the rules they must follow.

`CONFIGS` (`CONFIGS_1D` for the 1-D step, `CONFIGS_WARP` for the warp-tiled one, `CONFIGS_ASYNC` for
the cp.async one) sizes the tiles for sm_80 and newer ('sm80+': A100, H100, H200), for sm_75 ('sm75':
a T4) and for the simulator ('sim'); `config_for(cc)` picks a target, `tiles(name, target)` gives a
step's tiles and `unbuilt(target)` says which step a target leaves out, and why. `check_tiles_2d` and
`tile_passes` are the rules the factories of `regblock` build with.
"""

from cudalearn.chapters.ch05.kernels.tile_steps import VEC

MAX_REGISTERS = 128  # per thread, for the last two steps: two 256-thread blocks fill 64K registers
ASYNC = "regblock_2d_async"  # the one step whose kernel takes A transposed (`launcher` transposes it)

#: Block tile (BM, BN, BK) and per-thread micro-tile (TM, TN) of the 2-D kernels, per target.
CONFIGS = {
    # sm_80 and newer (A100, H100, H200; 64K registers, over 100 KB of shared memory per SM): 128x128
    # tiles, 256 threads of 8x8 outputs; at 128 registers a thread, two blocks (16 warps) fit an SM.
    "sm80+": {"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8},
    # sm_75 (T4: 40 SMs of at most 1024 threads and 64 KB of shared memory): 64x64 tiles, 128 threads
    # of 8x4 outputs, which its compiler fits in 128 registers without spilling; four blocks an SM.
    "sm75": {"BM": 64, "BN": 64, "BK": 8, "TM": 8, "TN": 4},
    # The simulator runs a Python thread per CUDA thread: 16x16 tiles of 16 threads of 4x4 outputs.
    "sim": {"BM": 16, "BN": 16, "BK": 4, "TM": 4, "TN": 4},
}

#: The warp-tiled kernel's tiles per target: the block and micro-tiles of CONFIGS, each warp owning a
#: WM x WN sub-tile whose 32 lanes form a (WM / TM) x (WN / TN) grid; `regs` caps registers a thread.
CONFIGS_WARP = {
    # 4 warps of 64 x 64 outputs (lanes 8 x 4) in the 128 x 128 tile, 8 x 16 outputs a thread, BK = 16,
    # up to 255 registers (two blocks of 128 threads an SM): the fastest warp tiling of the H200 probe
    # of 2026-12-05 (data/gpu-runs/2026-12-05-h200); at step 4's tiles the layout alone changed little.
    "sm80+": {"BM": 128, "BN": 128, "BK": 16, "TM": 8, "TN": 16, "WM": 64, "WN": 64, "regs": 255},
    # 4 warps of 32 x 32 outputs (lanes 4 x 8) in the T4's 64 x 64 tile.
    "sm75": {"BM": 64, "BN": 64, "BK": 8, "TM": 8, "TN": 4, "WM": 32, "WN": 32, "regs": 128},
    # one warp of 16 x 32 outputs: the smallest tile a whole warp of 4 x 4 micro-tiles fills.
    "sim": {"BM": 16, "BN": 32, "BK": 4, "TM": 4, "TN": 4, "WM": 16, "WN": 32, "regs": 128},
}

#: The cp.async kernel's tiles per target (`make_regblock_2d_async`; sm_80 and newer only, so no 'sm75').
CONFIGS_ASYNC = {
    # 256 threads of 8 x 8 outputs at 128 registers (two blocks an SM), BK = 16, three stages (48 KB of
    # shared memory a block): the fastest of the cp.async candidates of the H100 probe of 2026-12-05
    # (data/gpu-runs/2026-12-05-h100-probe4).
    "sm80+": {"BM": 128, "BN": 128, "BK": 16, "TM": 8, "TN": 8, "stages": 3, "regs": 128},
    "sim": {"BM": 16, "BN": 16, "BK": 4, "TM": 4, "TN": 4, "stages": 3, "regs": 128},
}

#: The 1-D kernel's tiles (BM, BN, BK, TM) per target: TM outputs down one column per thread.
CONFIGS_1D = {
    "sm80+": {"BM": 64, "BN": 64, "BK": 8, "TM": 8},
    "sm75": {"BM": 64, "BN": 64, "BK": 8, "TM": 8},
    "sim": {"BM": 16, "BN": 8, "BK": 4, "TM": 4},
}

_TABLES = {"regblock_1d": CONFIGS_1D, "regblock_2d_warptile": CONFIGS_WARP, ASYNC: CONFIGS_ASYNC}


def config_for(cc, *, simulator=False):
    """'sim', 'sm80+' (sm_80 and newer: A100, H100, H200) or 'sm75' (older: a T4) for capability cc."""
    if simulator:
        return "sim"
    return "sm80+" if tuple(cc or (0, 0)) >= (8, 0) else "sm75"


def check_tiles_2d(BM, BN, BK, TM, TN, vec):
    """The threads of a 2-D kernel's block for these tile shapes; ValueError with the rule broken (Ch. 6)."""
    if BM % TM or BN % TN:
        raise ValueError(f"TM={TM} must divide BM={BM} and TN={TN} must divide BN={BN}")
    threads = (BM // TM) * (BN // TN)
    if threads > 1024:
        raise ValueError(f"{threads} threads per block: at most 1024")
    if threads % BK or BM % (threads // BK):
        raise ValueError(f"{threads} threads cannot load the ({BM}, {BK}) A tile in equal rows")
    if threads % BN or BK % (threads // BN):
        raise ValueError(f"{threads} threads cannot load the ({BK}, {BN}) B tile in equal rows")
    if vec and (TM % VEC or TN % VEC):
        raise ValueError(f"TM={TM} and TN={TN} must be multiples of {VEC} for 128-bit loads")
    return threads


def tile_passes(BM, BN, BK, threads):
    """(A_STEP, A_LOADS, B_STEP, B_LOADS): rows of the (BM, BK) A tile and of the (BK, BN) B tile that
    one pass of the block's `threads` loads, and the passes (loads a thread) each tile takes (Ch. 6)."""
    A_STEP, B_STEP = threads // BK, threads // BN
    return A_STEP, BM // A_STEP, B_STEP, BK // B_STEP


def tiles(kernel_name, target):
    """The tile sizes of `kernel_name` for `target` ('sm80+', 'sm75' or 'sim'), as a dict (Chapter 6)."""
    table = _TABLES.get(kernel_name, CONFIGS)
    if target not in table:
        raise ValueError(f"{kernel_name} has no tiles for {target}: {unbuilt(target)[kernel_name]}")
    return table[target]


def unbuilt(target):
    """{name: why} of the steps `regblock.build(target)` leaves out in this process (Chapter 6)."""
    from cudalearn.chapters.ch06.kernels import async_copy

    if target not in CONFIGS_ASYNC:  # 'sm75': whatever runs the kernels, a T4's ptxas refuses cp.async
        return {ASYNC: "cp.async needs sm_80 or newer; the sm75 tiles are a T4's (sm_75)"}
    why = async_copy.unavailable()
    return {} if why is None else {ASYNC: why}
