"""Checks of lab 10 (softmax and reductions): a block sum, a warp-shuffle sum, a row softmax, the online rule.

Every kernel is compared with a float64 NumPy sum or softmax, with a
tolerance derived from how many float32 additions each input goes through.
The tracer (`cudalearn.trace`, the course's sanitizer) runs each kernel on a
small launch first: races, barrier errors, a shuffle some lanes of its mask
do not reach (`WarpError`: undefined behaviour on a GPU), and the number of
atomics, which must be one per block. Under the simulator the shuffle
kernels run on the tracer (`checks.run_kernel` sends them there). A wrong
result is matched against what the usual mistakes compute, emulated lane by
lane in NumPy, so the message names the mistake. Visible checks use a few
sizes; the hidden tests call the same functions with others.
"""
