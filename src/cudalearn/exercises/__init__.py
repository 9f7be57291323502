"""The checks each lab calls after an exercise, one module per group of chapters (all labs).

`cudalearn.exercises.check_...` is what a lab imports; visible checks use a
few sizes, and the hidden tests call the same functions with other sizes.
"""

from cudalearn.exercises.basics import (
    check_attainable,
    check_blocks_for,
    check_fill_index,
    check_grid_2d,
    check_intensity,
    check_matmul,
    check_matmul_flops,
    check_matmul_loops,
    check_round_trip,
    check_vector_add,
)
from cudalearn.exercises.tiling import (
    check_bank_of,
    check_global_bytes_tiled,
    check_matmul_no_conflict,
    check_matmul_tiled,
    check_transpose_no_conflict,
)

__all__ = [
    "check_attainable",
    "check_blocks_for",
    "check_fill_index",
    "check_grid_2d",
    "check_intensity",
    "check_matmul",
    "check_matmul_flops",
    "check_matmul_loops",
    "check_round_trip",
    "check_vector_add",
    "check_bank_of",
    "check_global_bytes_tiled",
    "check_matmul_no_conflict",
    "check_matmul_tiled",
    "check_transpose_no_conflict",
]
