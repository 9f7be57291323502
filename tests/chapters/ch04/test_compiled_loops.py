"""The three costs of padding the row-access product that Chapter 4 reads from stored SASS, on this machine's
ptxas (sm_90): unrolling, run-time index arithmetic, and the 128-bit loads."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from cudalearn.chapters.ch04 import compiled_loops
from cudalearn.compile import toolchain

pytestmark = pytest.mark.compile

CODE = """
import json, cudalearn
cudalearn.setup("compile", quiet=True)
from numba import cuda
from cudalearn.compile import toolchain
from cudalearn.chapters.ch03 import kernels
from cudalearn.chapters.ch04 import compiled_loops
out = {}
for name in compiled_loops.KERNELS:
    ptx, _ = cuda.compile_ptx(getattr(kernels, name).py_func, kernels.SIGNATURES[name], cc=(9, 0))
    rep = toolchain.compile_report(ptx, (9, 0), loop_lines=True)
    out[name] = {"loop": rep["sass"]["loop"], "loop_lines": rep["loop_lines"]}
print(json.dumps(out))
"""


def test_padding_costs_the_row_access_product_its_unrolled_loop_and_wide_loads():
    if not (toolchain.find_tool("ptxas") and toolchain.find_tool("cuobjdump")):
        pytest.skip("ptxas or cuobjdump not found (nvidia-cuda-nvcc wheel, Triton or a CUDA toolkit)")
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_ENABLE_CUDASIM", "CUDALEARN_MODE")}
    run = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(CODE)], capture_output=True, text=True, env=env, timeout=600
    )
    assert run.returncode == 0, run.stderr[-3000:]
    loops = json.loads(run.stdout.strip().splitlines()[-1])
    per = {name: compiled_loops.per_ffma(entry) for name, entry in loops.items()}
    assert loops["matmul_tiled32"]["loop"]["FFMA"] == 32, "unpadded: the k loop unrolled completely"
    assert loops["matmul_tiled32_padded"]["loop"]["FFMA"] < 32, "padded: a k loop left"
    assert per["matmul_tiled32_padded"] > 3 * per["matmul_tiled32"], per
    assert loops["matmul_tiled32"]["loop"]["lds128"] > 0 == loops["matmul_tiled32_padded"]["loop"]["lds128"]
    listing = "\n".join(loops["matmul_tiled32_padded"]["loop_lines"])
    assert "0x21" in listing, "the padded loop multiplies by, or wraps around, the row length 33"
    assert len(compiled_loops.table_lines(loops)) == 1 + len(compiled_loops.KERNELS)
