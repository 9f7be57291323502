"""Python stand-ins the tracer runs for a chapter's one-thread GPU intrinsics (Chapter 6's cp.async).

An `@intrinsic` of numba-cuda has no Python body: called outside a kernel it raises. On a GPU a kernel
that calls one (`async_copy.copy16`, `commit`, a `make_wait(n)` statement) is still traced on the CPU:
the chapter registers, beside the intrinsic, the plain Python function that does what it does for one
thread (`register(intrinsic, standin)`), and the tracer calls that instead (`execute._instrument`).
Warp-wide instructions (mma.sync, ldmatrix) are `trace.collective`'s.
"""

_BY_ID: dict = {}  # id(intrinsic) -> its stand-in
_KEEP: list = []  # the registered intrinsics (their ids stay valid)


def register(intrinsic, standin) -> None:
    """Run `standin` wherever a traced kernel calls `intrinsic`."""
    _BY_ID[id(intrinsic)] = standin
    _KEEP.append(intrinsic)


def standin(obj):
    """The stand-in registered for `obj`, or None."""
    return _BY_ID.get(id(obj))
