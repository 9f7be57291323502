"""Chapter 6's register-blocked kernels: right under the simulator, lean once compiled, and lab 6's checks."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from numba import cuda, float32

from cudalearn import checks, exercises
from cudalearn.chapters.ch06.kernels import regblock, regblock_launch, regblock_layout, regblock_tiles
from cudalearn.compile import toolchain

SIZES = [(32, 32, 32), (19, 13, 23), (1, 1, 1), (16, 8, 17)]


@pytest.mark.parametrize("name", list(regblock.FACTORIES))
def test_each_step_computes_a_matmul_off_the_tile_grid(name):
    kernel, tiles = regblock.build("sim")[name]
    rng = np.random.default_rng(0)
    for m, k, n in SIZES:
        A = rng.standard_normal((m, k)).astype(np.float32)
        B = rng.standard_normal((k, n)).astype(np.float32)
        dC = cuda.to_device(checks.empty_output((m, n)))  # NaN: an element never written fails
        regblock_launch.launcher(name, kernel, tiles, cuda.to_device(A), cuda.to_device(B), dC)()
        C = dC.copy_to_host()
        checks.check_close(C, A @ B, name=f"C of {name} {m, k, n}", rtol=1e-4, atol=1e-4 * np.sqrt(k))


def test_the_async_step_wraps_its_ring_and_mixes_copied_and_guarded_tiles():
    """cp.async's kernel under the simulator: many tiles around the 3-stage ring, a K off the tile grid
    (the last tile guarded), blocks inside C (copied) and sticking out (guarded), and a B whose rows
    are not whole 16-byte pieces (every block guarded)."""
    name = regblock_tiles.ASYNC
    kernel, tiles = regblock.build("sim")[name]
    rng = np.random.default_rng(2)
    for m, k, n in [(32, 8 * tiles["BK"] + 3, 36), (16, 8 * tiles["BK"], 18)]:
        A = rng.standard_normal((m, k)).astype(np.float32)
        B = rng.standard_normal((k, n)).astype(np.float32)
        dC = cuda.to_device(checks.empty_output((m, n)))
        regblock_launch.launcher(name, kernel, tiles, cuda.to_device(A), cuda.to_device(B), dC)()
        checks.check_close(dC.copy_to_host(), A @ B, name=f"C {m, k, n}", rtol=1e-4, atol=1e-4 * np.sqrt(k))
    fortran = cuda.to_device(np.asfortranarray(B))  # flat offsets of C-ordered rows would copy wrong elements
    with pytest.raises(ValueError, match="B must be C-contiguous"):
        regblock_launch.launcher(name, kernel, tiles, cuda.to_device(A), fortran, dC)


def test_tile_rules_are_enforced_and_configs_chosen_by_compute_capability():
    with pytest.raises(ValueError, match="must divide"):
        regblock.make_regblock_2d_simple(BM=16, BN=16, BK=4, TM=3, TN=4)
    with pytest.raises(ValueError, match="multiples of 4"):
        regblock.make_regblock_2d_vec(BM=16, BN=16, BK=4, TM=2, TN=4)
    with pytest.raises(ValueError, match="multiple of 4"):
        regblock.make_regblock_2d_prefetch(BM=16, BN=16, BK=2, TM=4, TN=4)
    with pytest.raises(ValueError, match="at least two buffers"):
        regblock.make_regblock_2d_async(BM=16, BN=16, BK=4, TM=4, TN=4, stages=1)
    with pytest.raises(ValueError, match="at most 48 KB"):
        regblock.make_regblock_2d_async(BM=128, BN=128, BK=16, TM=8, TN=8, stages=4)
    assert regblock_tiles.config_for((9, 0)) == regblock_tiles.config_for((8, 0)) == "sm80+"
    assert regblock_tiles.config_for((7, 5)) == "sm75"
    assert regblock_tiles.config_for(None, simulator=True) == "sim"
    grid, threads = regblock_launch.launch_config(
        "regblock_2d_vec", regblock_tiles.CONFIGS["sm80+"], 4096, 1000
    )
    assert grid == (8, 32) and threads == 256


SASS = """
        /*0100*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*0110*/                   LDS.128 R4, [R2] ;
        /*0120*/                   LDS R8, [R3+0x4] ;
        /*0130*/                   FFMA R10, R4, R8, R10 ;
        /*0140*/                   FFMA R11, R5, R8, R11 ;
        /*0150*/                   IADD3 R2, R2, 0x10, RZ ;
        /*0160*/               @P0 BRA 0x110 ;
        /*0170*/                   STG.E [R6.64], R10 ;
        /*0180*/                   EXIT ;
"""


def test_instruction_mix_finds_the_hot_loop():
    mix = toolchain.instruction_mix(SASS)
    assert mix["loop"] == {
        "FFMA": 2,
        "LDS": 2,
        "LDG": 0,
        "STS": 0,
        "STG": 0,
        "LDL": 0,
        "STL": 0,
        "BAR": 0,
        "other": 2,
        "instructions": 6,
        "lds128": 1,
        "ffma_share": 2 / 6,
    }
    assert mix["total"]["instructions"] == 9 and mix["total"]["STG"] == 1 and mix["total"]["BAR"] == 1


def _compile_mode_report(code):
    """The JSON that `code` prints last, run in a fresh process in compile mode (real numba-cuda, no GPU)."""
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_ENABLE_CUDASIM", "CUDALEARN_MODE")}
    r = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env, timeout=600
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_the_last_steps_compile_lean_for_the_h200_and_the_t4():
    """ptxas and the SASS of the kernels as the book describes them (skipped without ptxas/cuobjdump)."""
    if not (toolchain.find_tool("ptxas") and toolchain.find_tool("cuobjdump")):
        pytest.skip("ptxas or cuobjdump not found (nvidia-cuda-nvcc wheel, Triton or a CUDA toolkit)")
    code = """
    import json, cudalearn
    cudalearn.setup("compile", quiet=True)
    from numba import cuda
    from cudalearn.compile import toolchain
    from cudalearn.chapters.ch06.kernels import regblock
    out = {}
    for name, cc in [("regblock_1d", (9, 0)), ("regblock_2d_simple", (9, 0)), ("regblock_2d_vec", (9, 0)),
                     ("regblock_2d_prefetch", (9, 0)), ("regblock_2d_prefetch_t4", (7, 5))]:
        k = getattr(regblock, name)
        bounds = k.targetoptions.get("launch_bounds")
        ptx, _ = cuda.compile_ptx(k.py_func, regblock._SIG, cc=cc, launch_bounds=bounds)
        out[name] = toolchain.compile_report(ptx, cc) | {"f64": ".f64" in ptx}
    print(json.dumps(out))
    """
    rep = _compile_mode_report(code)
    for name, got in rep.items():
        assert not got["f64"], f"{name} computes in float64"
        assert got["ptxas"]["spill_store_bytes"] == 0, f"{name} spills: {got['ptxas']}"
    assert rep["regblock_1d"]["sass"]["loop"]["ffma_share"] < 0.25  # the book's figures, rounded
    assert rep["regblock_2d_simple"]["ptxas"]["registers"] > 128  # one block an SM
    assert rep["regblock_2d_simple"]["sass"]["loop"]["ffma_share"] < 0.5
    for name in ("regblock_2d_vec", "regblock_2d_prefetch"):
        got = rep[name]
        assert got["ptxas"]["registers"] <= regblock_tiles.MAX_REGISTERS, got["ptxas"]
        assert got["sass"]["loop"]["LDS"] == got["sass"]["loop"]["lds128"], f"{name}: 32-bit shared loads"
    assert rep["regblock_2d_vec"]["sass"]["loop"]["ffma_share"] > 0.75
    assert rep["regblock_2d_prefetch"]["sass"]["loop"]["ffma_share"] > 0.85
    assert rep["regblock_2d_prefetch"]["sass"]["loop"]["FFMA"] == 4 * 64  # k unrolled by 4, 8x8 outputs


def test_the_async_step_compiles_to_cp_async_from_sm80_and_is_left_out_below_and_on_mlir(monkeypatch):
    """The real compiler: cp.async in the PTX for sm_80 and sm_90, no spills at 128 registers; ptxas
    refuses it for sm_75, which is why `build('sm75')` leaves the step out (as numba-cuda-mlir does)."""
    from cudalearn.chapters.ch06.kernels import async_copy
    from cudalearn.runtime import numba_backend

    assert regblock_tiles.ASYNC not in regblock.build("sm75")
    assert "sm_80" in regblock_tiles.unbuilt("sm75")[regblock_tiles.ASYNC]
    monkeypatch.setattr(async_copy, "SIMULATOR", False)  # as on a GPU, with numba-cuda ...
    numba_cuda = numba_backend.Choice(numba_backend.NUMBA_CUDA, "gpu", "test")
    monkeypatch.setattr(numba_backend, "choice", lambda: numba_cuda)
    assert "cp.async needs sm_80 or newer; this GPU is sm_75" in async_copy.unavailable((7, 5))
    assert async_copy.unavailable((8, 0)) is None and async_copy.unavailable((9, 0)) is None
    mlir = numba_backend.Choice(numba_backend.NUMBA_CUDA_MLIR, "gpu", "test")  # ... and numba-cuda-mlir
    monkeypatch.setattr(numba_backend, "choice", lambda: mlir)
    assert "numba-cuda-mlir takes no numba-cuda intrinsics" in async_copy.unavailable((9, 0))
    assert regblock_tiles.ASYNC in regblock_tiles.unbuilt("sm80+")
    monkeypatch.undo()
    with pytest.raises(ValueError, match="no tiles for sm75: cp.async needs sm_80 or newer"):
        regblock_tiles.tiles(regblock_tiles.ASYNC, "sm75")
    code = """
    import json, cudalearn
    cudalearn.setup("compile", quiet=True)
    from numba import cuda
    from cudalearn.compile import ptx, toolchain
    from cudalearn.chapters.ch06.kernels import regblock, regblock_tiles
    ptx._pretend_device((9, 0))  # numba-cuda compiles device functions for the current GPU: none here
    cfg = regblock_tiles.tiles(regblock_tiles.ASYNC, "sm80+")
    k = regblock.make_regblock_2d_async(**cfg)
    bounds = k.targetoptions.get("launch_bounds")
    out = {}
    for cc in [(7, 5), (8, 0), (9, 0)]:
        text, _ = cuda.compile_ptx(k.py_func, regblock._SIG, cc=cc, launch_bounds=bounds)
        entry = {"cp_async": text.count("cp.async.cg.shared.global")}
        entry["wait"] = "cp.async.wait_group 1;" in text
        if toolchain.find_tool("ptxas"):
            try:
                entry["ptxas"] = toolchain.compile_report(text, cc)["ptxas"]
            except RuntimeError as e:
                entry["refused"] = str(e)
        out["sm_%d%d" % cc] = entry
    print(json.dumps(out))
    """
    rep = _compile_mode_report(code)
    cfg = regblock_tiles.CONFIGS_ASYNC["sm80+"]
    threads = (cfg["BM"] // cfg["TM"]) * (cfg["BN"] // cfg["TN"])
    pieces = (cfg["BM"] + cfg["BN"]) * cfg["BK"] // (4 * threads)  # 16-byte copies a thread, a tile
    for sm in ("sm_80", "sm_90"):
        copies = rep[sm]["cp_async"]  # the fill of the ring and the main loop's fetch, each of whole tiles
        assert copies >= 2 * pieces and copies % pieces == 0 and rep[sm]["wait"], rep[sm]
        if "ptxas" in rep[sm]:
            assert rep[sm]["ptxas"]["spill_store_bytes"] == 0 and rep[sm]["ptxas"]["registers"] <= 128, rep[
                sm
            ]
    if toolchain.find_tool("ptxas"):
        assert "cp.async" in rep["sm_75"]["refused"] and "sm_80" in rep["sm_75"]["refused"], rep["sm_75"]


# Lab 6 -------------------------------------------------------------------------------------------

BM, BN, BK, TM, TN = 12, 16, 5, 3, 2  # lab 6's sizes under the simulator
THREADS = (BM // TM) * (BN // TN)


def _lab_kernel(variant):
    """A lab-6 kernel: 'solution', 'unblocked' (a shared read per multiply-add), 'stub', 'adds-into-C'
    (accumulates in C, not zeroed), 'stores-per-tile' (stores acc into C after every tile) or 'typed-in'
    (TM's value, 3, typed in where TM belongs)."""

    @cuda.jit
    def matmul_regblock(A, B, C):
        sA = cuda.shared.array((BM, BK), float32)
        sB = cuda.shared.array((BK, BN), float32)
        acc = cuda.local.array((TM, TN), float32)
        a = cuda.local.array(TM, float32)
        b = cuda.local.array(TN, float32)
        t = cuda.threadIdx.x
        tx, ty = t % (BN // TN), t // (BN // TN)
        row0, col0 = cuda.blockIdx.y * BM, cuda.blockIdx.x * BN
        M, N, K = C.shape[0], C.shape[1], A.shape[1]
        for i in range(TM):
            for j in range(TN):
                acc[i, j] = float32(0.0)
        for k0 in range(0, K, BK):
            for e in range(t, BM * BK, THREADS):
                r, c = e // BK, e % BK
                sA[r, c] = A[row0 + r, k0 + c] if row0 + r < M and k0 + c < K else float32(0.0)
            for e in range(t, BK * BN, THREADS):
                r, c = e // BN, e % BN
                sB[r, c] = B[k0 + r, col0 + c] if k0 + r < K and col0 + c < N else float32(0.0)
            cuda.syncthreads()
            for k in range(BK):
                if variant in ("solution", "stores-per-tile"):
                    for i in range(TM):
                        a[i] = sA[ty * TM + i, k]
                    for j in range(TN):
                        b[j] = sB[k, tx * TN + j]
                    for i in range(TM):
                        for j in range(TN):
                            acc[i, j] += a[i] * b[j]
                elif variant == "typed-in":  # TM's value here typed in where TM belongs
                    for i in range(TM):
                        a[i] = sA[ty * 3 + i, k]
                    for j in range(TN):
                        b[j] = sB[k, tx * TN + j]
                    for i in range(TM):
                        for j in range(TN):
                            acc[i, j] += a[i] * b[j]
                elif variant == "unblocked":
                    for i in range(TM):
                        for j in range(TN):
                            acc[i, j] += sA[ty * TM + i, k] * sB[k, tx * TN + j]
                elif variant == "adds-into-C":
                    for i in range(TM):
                        for j in range(TN):
                            if row0 + ty * TM + i < M and col0 + tx * TN + j < N:
                                C[row0 + ty * TM + i, col0 + tx * TN + j] += (
                                    sA[ty * TM + i, k] * sB[k, tx * TN + j]
                                )
            if variant == "stores-per-tile":
                for i in range(TM):
                    for j in range(TN):
                        if row0 + ty * TM + i < M and col0 + tx * TN + j < N:
                            C[row0 + ty * TM + i, col0 + tx * TN + j] = acc[i, j]
            cuda.syncthreads()
        if variant in ("solution", "unblocked", "typed-in"):
            for i in range(TM):
                for j in range(TN):
                    if row0 + ty * TM + i < M and col0 + tx * TN + j < N:
                        C[row0 + ty * TM + i, col0 + tx * TN + j] = acc[i, j]

    return matmul_regblock


def test_lab_regblock_check_passes_the_solution_and_names_what_is_wrong():
    exercises.check_regblock_matmul(_lab_kernel("solution"), BM, BN, BK, TM, TN)
    with pytest.raises(AssertionError, match="not done yet"):
        exercises.check_regblock_matmul(_lab_kernel("stub"), BM, BN, BK, TM, TN)
    with pytest.raises(AssertionError, match=f"reads shared memory {2 * TM * TN} times per step along k"):
        exercises.check_regblock_matmul(_lab_kernel("unblocked"), BM, BN, BK, TM, TN)
    with pytest.raises(AssertionError, match="adds into C"):
        exercises.check_regblock_matmul(_lab_kernel("adds-into-C"), BM, BN, BK, TM, TN)
    with pytest.raises(AssertionError, match="stores each element of C 2 times"):
        exercises.check_regblock_matmul(_lab_kernel("stores-per-tile"), BM, BN, BK, TM, TN)
    typed_in = (
        r"tile size typed in as a number .*\(line \d+, `a\[i\] = sA\[ty \* 3 \+ i, k\]`: 3 is TM here\)"
    )
    with pytest.raises(AssertionError, match=typed_in):
        exercises.check_regblock_matmul(_lab_kernel("typed-in"), BM, BN, BK, TM, TN)


def test_lab_function_checks():
    exercises.check_reads_per_fma(lambda tm, tn: (tm + tn) / (tm * tn))
    with pytest.raises(AssertionError, match="reads_per_fma"):
        exercises.check_reads_per_fma(lambda tm, tn: 2 / (tm * tn))

    def stub(cc):
        raise NotImplementedError()

    with pytest.raises(AssertionError, match="not done yet"):
        exercises.check_autocast_dtype(stub)
    import torch

    exercises.check_autocast_dtype(
        lambda cc: torch.bfloat16 if cc >= (8, 0) else torch.float16 if cc >= (7, 0) else None
    )
    with pytest.raises(AssertionError, match=r"autocast_dtype\(\(7, 5\)\)"):
        exercises.check_autocast_dtype(lambda cc: torch.bfloat16 if cc >= (7, 0) else None)
    with pytest.raises(AssertionError, match=r"1 of 14 .*autocast_dtype\(\(7, 0\)\) is None"):
        exercises.check_autocast_dtype(
            lambda cc: torch.bfloat16 if cc >= (8, 0) else torch.float16 if cc >= (7, 2) else None
        )
    with pytest.raises(AssertionError, match=r"autocast_dtype\(\(12, 0\)\)"):
        exercises.check_autocast_dtype(
            lambda cc: torch.bfloat16 if (8, 0) <= cc < (10, 0) else torch.float16 if cc >= (7, 0) else None
        )


@pytest.mark.parametrize(
    "target,name",
    [
        ("sm80+", "regblock_2d_vec"),
        ("sm80+", "regblock_2d_prefetch"),
        ("sm75", "regblock_2d_prefetch"),
        ("sm80+", "regblock_2d_warptile"),  # 8 warps: every warp's sub-tile, not only warp 0's
        ("sm75", "regblock_2d_warptile"),
        ("sm80+", regblock_tiles.ASYNC),
    ],
)
def test_real_tile_sizes_right_and_race_free_on_full_and_edge_tiles(target, name):
    """Traced on the CPU at the GPU tile sizes: one interior block, three edge blocks, 3 tiles along k.

    For the cp.async step, C's sides are multiples of 4, so the interior block copies its first two
    tiles (the simulator's copy lands at once) and guards the third, and the ring is checked for races.
    """
    from cudalearn.trace import trace

    kernel, tiles = regblock.build(target)[name]
    m, k, n = tiles["BM"] + 6, 2 * tiles["BK"] + 3, tiles["BN"] + 5
    if name == regblock_tiles.ASYNC:
        m, n = tiles["BM"] + 8, tiles["BN"] + 4
    rng = np.random.default_rng(1)
    A, B = rng.standard_normal((m, k), dtype=np.float32), rng.standard_normal((k, n), dtype=np.float32)
    grid, threads = regblock_launch.launch_config(name, tiles, m, n)
    first = np.ascontiguousarray(A.T) if name == regblock_tiles.ASYNC else A  # the kernel takes A transposed
    report = trace(kernel, grid, threads, first, B, np.full((m, n), np.nan, np.float32))
    assert report.race_count == 0, report.races[:3]
    checks.check_close(report.outputs[2], A @ B, name=f"traced C of {name}", rtol=1e-4, atol=1e-4)


TINY_PTX = """.version 7.0
.target sm_75
.address_size 64
.visible .entry tiny()
{
    ret;
}
"""


def test_compile_report_tries_every_ptxas_until_one_reads_the_ptx(tmp_path, monkeypatch):
    """An older ptxas refuses newer PTX ('Unsupported .version'): the report moves on to the next copy."""
    real_ptxas, cuobjdump = toolchain.find_tool("ptxas"), toolchain.find_tool("cuobjdump")
    if not (real_ptxas and cuobjdump):
        pytest.skip("ptxas or cuobjdump not found (nvidia-cuda-nvcc wheel, Triton or a CUDA toolkit)")
    old = tmp_path / "ptxas"
    old.write_text(
        "#!/bin/sh\necho \"ptxas fatal: Unsupported .version 7.0; current version is '6.0'\" >&2\nexit 1\n"
    )
    old.chmod(0o755)
    paths = {"ptxas": [str(old), real_ptxas], "cuobjdump": [cuobjdump]}
    monkeypatch.setattr(toolchain, "tool_paths", lambda name: paths[name])
    report = toolchain.compile_report(TINY_PTX, (7, 5))
    assert report["arch"] == "sm_75" and report["sass"]["total"]["instructions"] > 0
    paths["ptxas"] = [str(old)]
    with pytest.raises(RuntimeError, match="Unsupported .version"):
        toolchain.compile_report(TINY_PTX, (7, 5))


def _first_step_reads(name):
    """(cfg, reads, base): the sim kernel's traced shared reads of lanes 0-31 at k = 0, as
    {array: {lane: set of byte addresses}}, and each shared array's first byte."""
    from cudalearn.trace import trace

    kernel, cfg = regblock.build("sim")[name]
    threads = regblock_launch.threads_per_block(name, cfg)
    rng = np.random.default_rng(1)
    A = rng.standard_normal((cfg["BM"], cfg["BK"])).astype(np.float32)
    B = rng.standard_normal((cfg["BK"], cfg["BN"])).astype(np.float32)
    first = np.ascontiguousarray(A.T) if name == regblock_tiles.ASYNC else A  # the kernel takes A transposed
    rep = trace(kernel, (1, 1), threads, first, B, np.zeros((cfg["BM"], cfg["BN"]), np.float32))
    read = {"sAt": {}, "sB": {}}  # array -> {lane: set of byte addresses read at k = 0}
    stored = {"sAt": [], "sB": []}
    for (_, warp, _, occurrence), requests in rep.kept_requests.items():
        for req in requests:
            if req.store:
                stored[req.array] += req.addresses
            elif warp == 0 and occurrence < max(cfg["TM"], cfg["TN"]):  # the first k of the first tile
                for lane, addr in zip(req.lanes, req.addresses, strict=True):
                    read[req.array].setdefault(lane, set()).add(addr)
    return cfg, read, {array: min(addresses) for array, addresses in stored.items()}


@pytest.mark.parametrize(
    "name",
    [
        "regblock_2d_simple",
        "regblock_2d_vec",
        "regblock_2d_prefetch",
        "regblock_2d_warptile",
        regblock_tiles.ASYNC,
    ],
)
def test_thread_outputs_are_the_rows_and_columns_each_thread_reads(name):
    """Chapter 6's micro-tile picture: thread_outputs agrees with the traced shared reads of the kernel."""
    cfg, read, base = _first_step_reads(name)
    for t in range(min(regblock_launch.threads_per_block(name, cfg), 32)):
        rows, cols = regblock_layout.thread_outputs(name, cfg, t)
        got_rows = sorted((a - base["sAt"]) // 4 for a in read["sAt"][t])
        got_cols = sorted((a - base["sB"]) // 4 for a in read["sB"][t])
        assert sorted(rows) == got_rows and sorted(cols) == got_cols, (t, rows, got_rows, cols, got_cols)


@pytest.mark.parametrize(
    "name", ["regblock_2d_vec", "regblock_2d_prefetch", "regblock_2d_warptile", regblock_tiles.ASYNC]
)
def test_warp_read_runs_counts_the_16_byte_runs_a_warp_reads(name):
    """Chapter 6's table of runs a step along k: warp_read_runs agrees with the traced reads of warp 0."""
    cfg, read, base = _first_step_reads(name)
    runs = [len({(a - base[array]) // 16 for lane in read[array].values() for a in lane}) for array in read]
    assert regblock_layout.warp_read_runs(name, cfg) == tuple(runs)
    with pytest.raises(ValueError, match="16-byte runs"):
        regblock_layout.warp_read_runs("regblock_2d_simple", cfg)
    with pytest.raises(ValueError, match="warp 9 is not in a block"):
        regblock_layout.warp_read_runs(name, cfg, warp=9)


def test_the_gemm_goal_needs_85_percent_of_cublas_and_to_beat_triton():
    """Issue 17's goal: both parts from the same run; a stored verdict without the Triton part still reads."""
    from types import SimpleNamespace

    from cudalearn.chapters.ch06 import bench as gemm

    def run(best, triton):
        rows = [{"name": "regblock_2d_prefetch", "gflops": best}, {"name": "cuBLAS FP32", "gflops": 50_000.0}]
        if triton:
            rows.append({"name": "Triton FP32", "gflops": triton})
        return gemm.verdict(SimpleNamespace(rows=rows))

    met = run(44_000.0, 39_000.0)
    assert met["met"] and met["beats_triton"] and round(met["fraction_of_cublas_fp32"], 2) == 0.88
    assert gemm.verdict_line(met).endswith("1.13x Triton FP32's speed (goal > 1): met")
    slow = run(44_000.0, 45_000.0)  # 88% of cuBLAS but slower than Triton: missed
    assert not slow["met"] and gemm.verdict_line(slow).endswith("MISSED")
    assert not run(40_000.0, 30_000.0)["met"], "80% of cuBLAS is below the goal, whatever Triton does"
    alone = run(44_000.0, None)
    assert not alone["met"] and "Triton FP32 not in this run" in gemm.verdict_line(alone)
    old = {"best": "regblock_2d_prefetch", "fraction_of_cublas_fp32": 0.72, "goal": 0.5, "met": True}
    assert "(goal >= 50%): met (judged by an earlier goal; today's: >= 85%" in gemm.verdict_line(old)
    assert gemm.verdict(SimpleNamespace(rows=[{"name": "cuBLAS FP32", "gflops": 1.0}])) is None


@pytest.mark.parametrize(
    ("target", "name"),
    [
        (target, name)
        for name in ("regblock_2d_prefetch", "regblock_2d_warptile", regblock_tiles.ASYNC)
        for target in ("sm80+", "sm75", "sim")
        if not (name == regblock_tiles.ASYNC and target == "sm75")  # no cp.async on a T4
    ],
)
def test_every_output_of_the_block_tile_belongs_to_exactly_one_thread(target, name):
    """make_layout, warp by warp or block-wide: the threads' outputs tile the block tile once."""
    cfg = regblock_tiles.tiles(name, target)
    owners = np.zeros((cfg["BM"], cfg["BN"]), int)
    for t in range(regblock_launch.threads_per_block(name, cfg)):
        rows, cols = regblock_layout.thread_outputs(name, cfg, t)
        owners[np.ix_(rows, cols)] += 1
    assert (owners == 1).all(), np.argwhere(owners != 1)[:5]
    with pytest.raises(ValueError, match="hold 32 lanes"):
        regblock_layout.make_layout(128, 128, 8, 8, warp=(64, 64))  # 8 x 8 lanes: 64, not a warp
