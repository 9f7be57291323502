"""Chapter 6's Triton kernels under Triton's CPU interpreter (the simulator mode of the tests)."""

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("triton", reason="Triton is Linux-only; the course skips its kernels without it")
torch = pytest.importorskip("torch")

from cudalearn.chapters.ch06.kernels import triton_kernels  # noqa: E402


def test_runs_under_the_interpreter_in_sim_mode():
    assert triton_kernels.interpreted()
    assert (
        triton_kernels.matmul_config(torch.float32)
        == triton_kernels.MATMUL_CONFIGS[("interpreter", "float32")]
    )
    assert (
        triton_kernels.matmul_config(torch.float16, (7, 5))["BLOCK_M"] == 16
    )  # the interpreter's, not sm75's


@pytest.mark.parametrize("m,k,n", [(32, 32, 32), (19, 45, 23), (1, 1, 1)])
def test_matmul_float32_and_float16(m, k, n):
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(m, k, generator=g), torch.randn(k, n, generator=g)
    torch.testing.assert_close(triton_kernels.matmul(a, b), a @ b, rtol=1e-5, atol=1e-5)
    c16 = triton_kernels.matmul(a.half(), b.half())
    assert c16.dtype == torch.float16
    torch.testing.assert_close(c16.float(), a.half().float() @ b.half().float(), rtol=1e-2, atol=1e-2)


def test_matmul_writes_into_out_and_refuses_wrong_inputs():
    a, b = torch.randn(8, 5), torch.randn(5, 6)
    out = torch.full((8, 6), float("nan"))
    assert triton_kernels.matmul(a, b, out=out) is out
    torch.testing.assert_close(out, a @ b)
    with pytest.raises(ValueError, match="cannot multiply"):
        triton_kernels.matmul(a, a)
    with pytest.raises(ValueError, match="share dtype"):
        triton_kernels.matmul(a, b.half())
    with pytest.raises(ValueError, match="bfloat16"):
        triton_kernels.matmul(a.bfloat16(), b.bfloat16())


def test_bias_silu_is_silu_of_x_plus_bias():
    x, bias = torch.randn(7, 33), torch.randn(33)
    torch.testing.assert_close(triton_kernels.bias_silu(x, bias), torch.nn.functional.silu(x + bias))
    with pytest.raises(ValueError, match="contiguous"):
        triton_kernels.bias_silu(x.t(), bias)


def test_interpreter_works_when_triton_was_imported_first():
    """A PyTorch optimizer's first step imports Triton before TRITON_INTERPRET is set: still fine."""
    code = """
    import torch
    import triton.language  # what the first step of a torch.optim optimizer does
    import cudalearn
    cudalearn.setup("sim", quiet=True)
    from cudalearn.chapters.ch06.kernels import triton_kernels
    a, b = torch.randn(20, 9), torch.randn(9, 17)
    torch.testing.assert_close(triton_kernels.matmul(a, b), a @ b)
    print("ok")
    """
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "NUMBA_ENABLE_CUDASIM")}
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-3000:]
