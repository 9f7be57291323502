"""Chapter 6's deep dive 06d: mma.sync and ldmatrix emulated from one fragment table, run by the tracer."""

import numpy as np
import pytest

from cudalearn import trace
from cudalearn.chapters.ch06.kernels import mma, tc_gemm

RNG = np.random.default_rng(0)


@pytest.mark.parametrize("shape", list(mma.SHAPES))
def test_every_element_of_each_operand_is_held_by_exactly_one_lane(shape):
    for op in ("A", "B", "C"):
        rc = mma.fragment(shape, op).reshape(-1, 2)
        rows, cols = mma.operand_shape(shape, op)
        assert len({tuple(x) for x in rc}) == rows * cols == len(rc), (shape, op)


def test_the_table_is_the_ptx_isa_s_for_a_few_lanes():
    """PTX ISA, 'Matrix Fragments for mma.m16n8k16 with floating point type': lane 5 is group 1, thread 1."""
    a = mma.fragment("m16n8k16", "A")[5]
    assert a.tolist() == [[1, 2], [1, 3], [9, 2], [9, 3], [1, 10], [1, 11], [9, 10], [9, 11]]
    assert mma.fragment("m16n8k16", "B")[5].tolist() == [[2, 1], [3, 1], [10, 1], [11, 1]]
    assert mma.fragment("m16n8k8", "B")[31].tolist() == [[6, 7], [7, 7]]
    assert mma.fragment("m16n8k8", "C")[31].tolist() == [[7, 6], [7, 7], [15, 6], [15, 7]]


@pytest.mark.parametrize("shape", list(mma.SHAPES))
def test_emulated_mma_is_a_matrix_product(shape):
    m, n, k = mma.SHAPES[shape]
    A = RNG.standard_normal((m, k)).astype(np.float16)
    B = RNG.standard_normal((k, n)).astype(np.float16)
    C = RNG.standard_normal((m, n)).astype(np.float32)
    regs = [mma.to_registers(X, shape, op) for X, op in ((A, "A"), (B, "B"), (C, "C"))]
    D = mma.from_registers(mma.emulate_mma(shape, *regs), shape, "D")
    np.testing.assert_allclose(D, A.astype(np.float64) @ B + C, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(mma.from_registers(regs[0], shape, "A"), A)


def test_ldmatrix_gives_the_a_fragment_and_trans_the_transposed_matrix():
    M = RNG.standard_normal((16, 16)).astype(np.float16)  # a 16 x 16 piece of A, rows of 8 words
    W = M.view(np.uint32)
    rows = np.concatenate([W[0:8, 0:4], W[8:16, 0:4], W[0:8, 4:8], W[8:16, 4:8]])  # lanes 0-31's rows
    np.testing.assert_array_equal(mma.emulate_ldmatrix(rows), mma.to_registers(M, "m16n8k16", "A"))
    T = mma.emulate_ldmatrix(W[0:8, 0:4], trans=True)  # one 8 x 8 matrix, transposed
    np.testing.assert_array_equal(T[:, 0], M[0:8, 0:8].T.copy().view(np.uint32).reshape(-1))


@pytest.mark.parametrize("shape", list(mma.SHAPES))
def test_one_warp_tile_kernel_on_the_tracer(shape):
    A = RNG.standard_normal((32, 64)).astype(np.float16)
    B = RNG.standard_normal((16, 64)).astype(np.float16)
    C = np.full((32, 16), np.nan, np.float32)
    rep = trace.run(tc_gemm.make_warp_tile(shape), (2, 2), 32, tc_gemm.words(A), tc_gemm.words(B), C)
    np.testing.assert_allclose(C, A.astype(np.float64) @ B.T, rtol=1e-5, atol=1e-4)
    assert rep.warp_ops == {f"mma_{shape}": 4 * 4 * (1 if shape == "m16n8k16" else 2)}


@pytest.mark.parametrize(
    "layout, stages, conflicts", [("plain", 1, 3), ("pad", 1, 0), ("swizzle", 1, 0), ("swizzle", 2, 0)]
)
def test_block_tile_ldmatrix_bank_conflicts_counted_by_the_tracer(layout, stages, conflicts):
    """8 rows of 64 bytes share 8 of the 32 banks (4 wavefronts a matrix); padding or a swizzle: 1."""
    A = RNG.standard_normal((32, 64)).astype(np.float16)
    B = RNG.standard_normal((32, 64)).astype(np.float16)
    bias = RNG.standard_normal(32).astype(np.float32)
    C = np.full((32, 32), np.nan, np.float32)
    tiles = {**tc_gemm.CONFIGS["sim"], "stages": stages, "layout": layout}
    k = tc_gemm.make_tc_gemm(**tiles, relu=True)
    rep = trace.run(k, (1, 1), 128, tc_gemm.words(A), tc_gemm.words(B), bias, C)
    np.testing.assert_allclose(C, np.maximum(A.astype(np.float64) @ B.T + bias, 0), rtol=1e-5, atol=1e-4)
    lines = [s for s in rep.by_line.values() if "x4(" in s.source]
    matrices = sum(s.shared_load_requests for s in lines)
    assert matrices == 4 * 2 * 2 * (1 + 1) * 4  # warps x k tiles x k16 steps x (A, B) x 4 matrices
    assert sum(s.shared_load_bank_conflicts for s in lines) == conflicts * matrices
    assert not rep.races and rep.uninitialized_reads == 0


def test_warp_instructions_need_the_tracer_and_say_so():
    with pytest.raises(trace.TraceError, match="warp instruction"):
        mma.mma_m16n8k16(0, 0, 0, 0, 0, 0, 0.0, 0.0, 0.0, 0.0)
    assert trace.simulator_lacks(tc_gemm.make_warp_tile()) == "ptx.mma_m16n8k16"


def test_unavailable_names_the_gpu_and_the_compiler(monkeypatch):
    from cudalearn.runtime import numba_backend

    monkeypatch.setattr(mma, "SIMULATOR", False)
    monkeypatch.setattr(
        numba_backend, "choice", lambda: numba_backend.Choice(numba_backend.NUMBA_CUDA, "gpu", "t")
    )
    assert "m16n8k16 needs sm_80" in mma.unavailable((7, 5), "m16n8k16")
    assert mma.unavailable((7, 5), "m16n8k8") is None and mma.unavailable((9, 0)) is None
    mlir = numba_backend.Choice(numba_backend.NUMBA_CUDA_MLIR, "gpu", "t")
    monkeypatch.setattr(numba_backend, "choice", lambda: mlir)
    assert "numba-cuda-mlir takes no numba-cuda intrinsics" in mma.unavailable((9, 0))


def test_a_half_epilogue_rounds_to_float16_and_the_mlp_matches_its_float32_forward():
    from cudalearn.chapters.ch05 import model
    from cudalearn.chapters.ch06 import mlp_tc

    A = RNG.standard_normal((32, 32)).astype(np.float16)
    B = RNG.standard_normal((32, 32)).astype(np.float16)
    bias = RNG.standard_normal(32).astype(np.float32)
    C = np.zeros((32, 16), np.uint32)
    k = tc_gemm.make_tc_gemm(**tc_gemm.CONFIGS["sim"], relu=True, half=True)
    trace.run(k, (1, 1), 128, tc_gemm.words(A), tc_gemm.words(B), bias, C)
    want = np.maximum(A.astype(np.float32) @ B.T.astype(np.float32) + bias, 0).astype(np.float16)
    np.testing.assert_allclose(C.view(np.float16).astype(np.float32), want, rtol=1e-3, atol=1e-3)
    params = model.init_params((40, 24, 10))
    X = RNG.random((20, 40), dtype=np.float32)
    got = mlp_tc.TensorCoreMLP(params).prepare(X)()[:20, :10].numpy()
    h = np.maximum(X.astype(np.float16).astype(np.float32) @ params[0][0].astype(np.float16), 0)
    want = h.astype(np.float16).astype(np.float32) @ params[1][0].astype(np.float16).astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3)
