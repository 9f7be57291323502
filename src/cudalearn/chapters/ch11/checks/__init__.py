"""Checks of lab 11 (beyond two GPUs), one module per exercise: the ring all-reduce (`ring_allreduce`),
the tensor-parallel MLP (`tp_mlp`), ZeRO's memory per GPU (`zero_memory`).

Everything runs in one process on the CPU, in seconds, with no GPU and no socket. The student's
functions run through `checks.student_side` experiments (module-level functions of these modules), so
under `cudalearn grade` the ring and the threads live in the student's process and only plain data
comes back; the reference is computed here from the same seeds. `cudalearn.exercises` finds the checks.
"""
