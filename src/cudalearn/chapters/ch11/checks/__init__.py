"""Checks of lab 11 (beyond two GPUs): `ring_allreduce`, `tp_mlp`, `zero_memory`, one per exercise.

The ring all-reduce, the tensor-parallel MLP, ZeRO's memory per GPU.

Everything runs in one process on the CPU, in seconds, with no GPU and no socket. The student's
functions run through `checks.student_side` experiments (module-level functions of these modules), so
under `cudalearn grade` the ring and the threads live in the student's process and only plain data
comes back; the reference is computed here from the same seeds. `cudalearn.exercises` finds the checks.
"""
