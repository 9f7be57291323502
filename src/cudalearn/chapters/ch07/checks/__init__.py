"""Checks of lab 7 (AlexNet's two-GPU split): `exchange`, `split_forward`, `memory`, one per exercise.

The bytes across the bus (`exchange`), the split forward pass (`split_forward`), the memory a training
step holds (`memory`).

Visible checks already use more than the 2012 case (another exchange pattern, 2-byte elements, a
float16 network); the hidden tests in the solution notebook call the same functions with still other
patterns, activations, batch sizes and element sizes, so an answer that hard-codes the 2012 network or
float32 is caught. The student's functions run through `checks.student_side` experiments (module-level
functions of these modules), so under `cudalearn grade` the two-column network is built, run and
differentiated in the student's process and only plain data (logits, gradients, byte counts) comes
back; the unsplit reference is built here from the same configuration and seed. Everything runs on the
CPU in a few seconds. `cudalearn.exercises` finds the checks.
"""
