"""Checks of lab 8 (ResNet skip gradients): `residual_block`, `input_gradient`, `first_to_last`.

One module per exercise: the residual block, dL/dx with its +1, first-to-last gradient ratios.

Every check compares the student's code with PyTorch: outputs with the reference computation, gradients
with autograd. The student's code runs in experiments that return plain data (`torch_answers`). Visible
checks use a few sizes; the hidden tests in the solution notebook call the same functions with others.
`cudalearn.exercises` finds the checks.
"""
