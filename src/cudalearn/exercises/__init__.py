"""The checks each lab calls after an exercise, one module per group of chapters (all labs).

`cudalearn.exercises.check_...` is what a lab imports; visible checks use a
few sizes, and the hidden tests call the same functions with other sizes.
A check is imported from its module on first use, so a lab on the first
chapters never pays for importing PyTorch models or the tracer.
"""

import importlib

#: module (under cudalearn.exercises) -> the checks it defines
CHECKS = {
    "architectures": (
        "check_attention_flops",
        "check_first_to_last",
        "check_input_gradient",
        "check_patch_embedding",
        "check_patchify",
        "check_residual_block",
    ),
    "basics": (
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
    ),
    "fusion": (
        "check_backward_coalesced",
        "check_backward_input",
        "check_epilogue_bytes",
        "check_layer_forward",
        "check_linear_relu",
        "check_linear_relu_stores_once",
    ),
    "models": (
        "check_exchange_bytes",
        "check_split_forward",
        "check_step_memory",
    ),
    "regblock": (
        "check_autocast_dtype",
        "check_reads_per_fma",
        "check_regblock_matmul",
    ),
    "tiling": (
        "check_bank_of",
        "check_global_bytes_tiled",
        "check_matmul_no_conflict",
        "check_matmul_tiled",
        "check_transpose_no_conflict",
    ),
}
_WHERE = {name: module for module, names in CHECKS.items() for name in names}
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    """Import the module that defines check `name` and return the check."""
    if name not in _WHERE:
        raise AttributeError(f"module 'cudalearn.exercises' has no check {name!r}")
    return getattr(importlib.import_module(f"cudalearn.exercises.{_WHERE[name]}"), name)


def __dir__():
    return __all__
