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
]
