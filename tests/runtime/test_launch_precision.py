"""cudalearn.runtime.launch (the one grid rule) and cudalearn.runtime.precision (TF32 off, then restored)."""

import pytest

from cudalearn.runtime import launch, precision


@pytest.mark.parametrize(
    ("m", "n", "tile", "grid"),
    [(1, 1, 16, (1, 1)), (32, 32, 32, (1, 1)), (33, 32, 32, (1, 2)), (100, 70, 32, (3, 4))],
)
def test_square_grid_covers_the_output_with_no_spare_row_or_column_of_blocks(m, n, tile, grid):
    assert launch.square(m, n, tile) == (grid, (tile, tile))


def test_a_register_blocked_grid_counts_the_outputs_each_thread_computes():
    # 16 x 16 threads of 4 x 4 outputs: a block covers 64 x 64; 193 rows need 4 blocks, 128 columns 2
    assert launch.grid_2d(193, 128, (16, 16), (4, 4)) == ((2, 4), (16, 16))


def test_a_block_of_no_threads_is_refused():
    with pytest.raises(ValueError, match="at least one"):
        launch.blocks(10, 0)


def test_fp32_turns_tf32_off_and_restores_every_switch_even_when_the_block_raises():
    torch = pytest.importorskip("torch")
    before = precision.settings()
    torch.backends.cudnn.allow_tf32 = True
    torch.set_float32_matmul_precision("high")
    seen = precision.settings()
    try:
        with pytest.raises(RuntimeError), precision.fp32():
            assert precision.settings() == {
                "matmul_allow_tf32": False,
                "cudnn_allow_tf32": False,
                "float32_matmul_precision": "highest",
            }
            raise RuntimeError
        assert precision.settings() == seen
    finally:
        precision.restore(before)


def test_tensor_core_16bit_is_float16_before_sm80_whatever_is_bf16_supported_says(monkeypatch):
    """A T4 (sm_75) has no bfloat16 tensor cores, though torch.cuda.is_bf16_supported() says True there."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)  # emulation counts
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (7, 5))
    assert precision.tensor_core_16bit(on_gpu=True) is torch.float16
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))
    assert precision.tensor_core_16bit(on_gpu=True) is torch.bfloat16
    assert precision.tensor_core_16bit(on_gpu=False) is torch.bfloat16  # the CPU runs both
