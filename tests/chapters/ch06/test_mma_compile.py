"""Deep dive 06d's kernels compiled by the real compiler for sm_75 (a T4) and sm_90 (an H100), ptxas too."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.compile

CODE = """
import json, cudalearn
cudalearn.setup("compile", quiet=True)
from numba import cuda
from cudalearn.compile import ptx, toolchain
from cudalearn.chapters.ch06 import tc_steps
from cudalearn.chapters.ch06.kernels import tc_gemm
ptx._pretend_device((9, 0))  # numba-cuda compiles device functions for the current GPU: none here
SIG = "void(uint32[:, ::1], uint32[:, ::1], float32[::1], float32[:, ::1])"
out = {}
for cc in [(7, 5), (9, 0)]:
    shape = tc_gemm.shape_for(cc)
    for step, over in tc_steps.STEPS.items():
        if step == tc_steps.FAST:  # its own test below
            continue
        if over is None:
            k, sig = tc_gemm.make_warp_tile(shape), "void(uint32[:, ::1], uint32[:, ::1], float32[:, ::1])"
        else:
            tiles = {**tc_gemm.CONFIGS["gpu"], **over}
            if tiles["stages"] > 1 and cc < (8, 0):
                continue
            k, sig = tc_gemm.make_tc_gemm(**tiles, shape=shape), SIG
        text, _ = cuda.compile_ptx(k.py_func, sig, cc=cc, launch_bounds=k.targetoptions.get("launch_bounds"))
        e = {"mma": text.count("mma.sync.aligned." + shape), "ldmatrix": text.count("ldmatrix.sync.aligned"),
             "cp_async": text.count("cp.async.cg.shared.global")}
        if toolchain.find_tool("ptxas"):
            e["ptxas"] = toolchain.compile_report(text, cc)["ptxas"]
        out["%s@sm_%d%d" % (step, *cc)] = e
print(json.dumps(out))
"""


def test_the_06d_kernels_compile_for_the_t4_and_the_h100():
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_ENABLE_CUDASIM", "CUDALEARN_MODE")}
    r = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(CODE)], capture_output=True, text=True, env=env, timeout=600
    )
    assert r.returncode == 0, r.stderr[-3000:]
    rep = json.loads(r.stdout.strip().splitlines()[-1])
    assert set(rep) == {
        *(f"{s}@sm_75" for s in ("mma warp tile", "block tile, padded rows", "block tile, swizzled rows")),
        *(f"{s}@sm_90" for s in ("mma warp tile", "block tile, padded rows", "block tile, swizzled rows")),
        "cp.async pipeline@sm_90",
    }, rep
    for name, e in rep.items():
        assert e["mma"] > 0, name
        if "warp tile" not in name:  # 4 x 4 mma tiles a warp, 2 k16 steps a tile: 32 k16 products
            assert e["mma"] == (64 if name.endswith("sm_75") else 32) and e["ldmatrix"] == 12, (name, e)
        assert e["cp_async"] == (12 if name.startswith("cp.async") else 0), (name, e)
    pipelined = rep["cp.async pipeline@sm_90"].get("ptxas")
    if pipelined:  # the timed kernel: two blocks an SM (128 registers) without spilling
        assert pipelined["registers"] <= 128 and pipelined["spill_store_bytes"] == 0, pipelined


VARIANTS_CODE = """
import json, cudalearn
cudalearn.setup("compile", quiet=True)
from numba import cuda
from cudalearn.compile import ptx, toolchain
from cudalearn.chapters.ch06 import tc_steps
from cudalearn.chapters.ch06.kernels import tc_gemm
ptx._pretend_device((9, 0))
SIG = "void(uint32[:, ::1], uint32[:, ::1], float32[::1], float32[:, ::1])"
F = tc_steps.FAST_TILES
runs = [("fast", F, (9, 0)), ("4 warps, static", {**F, "BN": 128, "WARPS_N": 2, "dynamic": False}, (9, 0))]
one = {**F, "stages": 1, "dynamic": False, "prefetch": False, "BN": 128, "WARPS_N": 2}  # 16 KB, no cp.async
runs.append(("sm_75, one stage", one, (7, 5)))
out = {}
for name, tiles, cc in runs:
    shape = tc_gemm.shape_for(cc)
    k = tc_gemm.make_tc_gemm(**tiles, shape=shape)
    text, _ = cuda.compile_ptx(k.py_func, SIG, cc=cc, launch_bounds=k.targetoptions.get("launch_bounds"))
    e = {"mma": text.count("mma.sync.aligned." + shape), "ldmatrix": text.count("ldmatrix.sync.aligned"),
         "dynamic": ".extern .shared" in text}
    if toolchain.find_tool("ptxas"):
        e["ptxas"] = toolchain.compile_report(text, cc)["ptxas"]
    out[name] = e
print(json.dumps(out))
"""


def test_the_fast_step_compiles_for_the_h100_without_spilling_and_for_the_t4():
    """64 x 64 warp tiles: 4 x 8 mma tiles a k16 step, 2 steps a tile; dynamic shared memory above 48 KB."""
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_ENABLE_CUDASIM", "CUDALEARN_MODE")}
    r = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(VARIANTS_CODE)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    rep = json.loads(r.stdout.strip().splitlines()[-1])
    # (mma, ldmatrix.x4) a tile: 32 mma and 4 + 4 ldmatrix a k16 step; sm_75 has two m16n8k8 a k16 product
    # the prefetching kernel holds a third copy of the 8 ldmatrix: the first fragments, before its loop
    want = {"fast": (64, 24), "4 warps, static": (64, 24), "sm_75, one stage": (128, 16)}
    assert set(rep) == set(want), rep
    for name, e in rep.items():
        assert (e["mma"], e["ldmatrix"]) == want[name], (name, e)
        assert e["dynamic"] == (name == "fast"), (name, e)
        if "ptxas" in e:  # 255 registers at most, and nothing spilled to local memory
            assert e["ptxas"]["registers"] <= 255 and e["ptxas"]["spill_store_bytes"] == 0, (name, e)
