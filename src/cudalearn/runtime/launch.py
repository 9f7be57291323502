"""Launch grids: how many blocks cover an array, the one rule every chapter's launch uses (Chapters 2-9);
`prepared`, a launch whose arguments are typed and marshalled once (Chapters 5, 9-10)."""

from __future__ import annotations

import numpy as np

from cudalearn.runtime import counting


def blocks(n: int, per_block: int) -> int:
    """Blocks of `per_block` threads (or tiles) that cover n elements: the ceiling of n / per_block."""
    if per_block <= 0:
        raise ValueError(f"a block must hold at least one thread or element, got {per_block}")
    return -(-n // per_block)


def grid_2d(m: int, n: int, block: tuple[int, int], per_thread: tuple[int, int] = (1, 1)):
    """(griddim, blockdim) over an (m, n) output: x along its n columns, y along its m rows.

    `per_thread` is the (x, y) outputs each thread computes (a register-blocked kernel's (tn, tm)):
    a block then covers (block[0] * per_thread[0]) columns and (block[1] * per_thread[1]) rows.
    """
    bx, by = block
    return (blocks(n, bx * per_thread[0]), blocks(m, by * per_thread[1])), (bx, by)


def square(m: int, n: int, tile: int):
    """(griddim, blockdim) of a kernel with (tile, tile) blocks, one output per thread (Chapters 3-5)."""
    return grid_2d(m, n, (tile, tile))


def kernel_name(kernel) -> str:
    """The Python name of a kernel: a Numba dispatcher, a simulator kernel or a function (Chapters 9-10)."""
    return getattr(kernel, "__name__", None) or kernel.py_func.__name__


class Prepared:
    """A launch with its host work done once (`prepared`): call it to launch (Chapters 5, 9-10).

    `arguments` are the arguments it points at (kept alive with it); `set_scalar(i, value)` changes
    number argument i for the launches that follow, and `set_array(i, array)` array argument i,
    without preparing the others again (Chapter 5's network passes the step's index and the loss
    buffer to its loss kernel that way). Each call is counted by `cudalearn.runtime.counting` as a launch
    of the kernel, as a plain launch is.
    """

    def __init__(
        self, name: str, arguments: list, go, scalars: dict, arrays: dict, cuda=None, *, counted: bool = True
    ):
        self.name, self.arguments, self._go = name, arguments, go
        self._scalars, self._arrays, self._cuda = scalars, arrays, cuda  # cuda: the kernel's package
        self._counted = counted  # False where `go` is a plain launch, which counting sees itself

    def __call__(self) -> None:
        if self._counted and counting.active():
            counting.launched(self.name)
        self._go()

    def set_scalar(self, position: int, value) -> None:
        """Argument `position` (an int or float, not a bool or float16) becomes `value` for the next launches.

        The value is packed as a plain launch packs it (the argument's type, fixed when it was prepared).
        """
        if position not in self._scalars:
            raise TypeError(
                f"argument {position} of {self.name} is not an int or float argument: only those (and "
                "arrays, with set_array) can be changed after preparing"
            )
        if not _changeable_number(value):
            raise TypeError(f"{value!r} is not an int or a float")
        self._scalars[position](value)

    def set_array(self, position: int, array) -> None:
        """Array argument `position` becomes `array` (a device array of its type) for the next launches."""
        if position not in self._arrays:
            raise TypeError(f"argument {position} of {self.name} is not an array")
        self._arrays[position](cuda_view(array, self._cuda))
        self.arguments[position] = array  # kept alive with the launch, as the others


_HOST_ARRAY = (
    "launch.prepared needs device arrays: a host (NumPy) argument would be copied to the GPU and "
    "back at every call. Copy it once with cuda.to_device and pass the device array."
)


def prepared(kernel, griddim, blockdim, *args, sim_launch=None) -> Prepared:
    """A `Prepared` that runs kernel[griddim, blockdim](*args), its host work done once (Chapters 5, 9-10).

    `kernel[griddim, blockdim](*args)` does, at every call, on the host: it types each argument
    to find the compiled kernel, turns each array into the 5 + 2 * ndim values the kernel
    receives (two empty fields, size, item size, pointer, shape, strides) and builds a launch
    configuration; only then does the driver launch it. For a kernel that runs tens of microseconds on the GPU
    that host work takes as long as the kernel. `prepared` does it once, for these very arguments,
    and returns a callable that only launches (cuda.core's `launch`, the call Numba's own launch ends
    in). The arrays must be device arrays (or objects with `__cuda_array_interface__`, such as
    PyTorch's CUDA tensors): a host array would need a copy at every call, and is refused. The
    callable keeps the arguments alive and launches on the legacy default stream, as the
    plain launch does (not PyTorch's current stream, if that is another). It captures the arrays'
    addresses, shapes and strides once: a tensor reallocated in place (`resize_`, `set_`) or replaced
    by a new one is not followed; a number argument can be changed with `set_scalar`. No dynamic
    shared memory, cooperative launch or `debug=True` error check; it uses numba-cuda internals
    (`_prepare_args`, `_codelibrary`), checked against 0.30.4. Under the simulator it is
    `sim_launch(kernel, griddim, blockdim, *args)` at every call (the plain launch by default;
    Chapter 10 passes `cudalearn.trace.launch`, which runs a kernel that shuffles on the tracer),
    with the same `set_scalar` and `set_array`. For a
    numba-cuda-mlir kernel (`cudalearn.runtime.numba_backend`) it is the configured launch
    `kernel[griddim, blockdim]`, kept and called with these arguments, with the same setters:
    numba-cuda-mlir's launcher does the host work in C++ and caches it per launch configuration
    and argument types.
    """
    from cudalearn.runtime import device, numba_backend

    name = kernel_name(kernel)
    cuda = numba_backend.cuda_for(kernel)  # the kernel's own package
    kept = list(args)  # what the caller passed, kept alive with the launch
    args = [cuda_view(a, cuda) for a in args]
    numbers = {i for i, a in enumerate(args) if _changeable_number(a)}
    held = {i for i, a in enumerate(args) if isinstance(a, (bool, np.bool_, np.number, int, float))} - numbers
    if device.mode() == "sim" or cuda.__name__.startswith("numba_cuda_mlir"):

        def setter(i):
            def set_value(value):
                args[i] = value

            return set_value

        scalars = {i: setter(i) for i in numbers}
        arrays = {i: setter(i) for i in range(len(args)) if i not in numbers | held}
        if device.mode() == "sim":
            sim = sim_launch or (lambda k, g, b, *a: k[g, b](*a))
            go = lambda: sim(kernel, griddim, blockdim, *args)  # noqa: E731
        else:
            if any(isinstance(a, np.ndarray) for a in args):
                raise TypeError(_HOST_ARRAY)
            configured = kernel[griddim, blockdim]
            go = lambda: configured(*args)  # noqa: E731
        return Prepared(name, kept, go, scalars, arrays, cuda, counted=False)  # counting sees these
    from cuda.core import LaunchConfig
    from cuda.core import launch as core_launch
    from numba.cuda.cudadrv.driver import _to_core_stream
    from numba.cuda.dispatcher import normalize_kernel_dimensions

    griddim, blockdim = normalize_kernel_dimensions(griddim, blockdim)
    compiled = kernel.compile(tuple(kernel.typeof_pyval(a) for a in args))
    stream = _to_core_stream(0)
    writeback, values, scalars, arrays = [], [], {}, {}
    for i, (ty, value) in enumerate(zip(compiled.argument_types, args, strict=True)):
        first = len(values)
        compiled._prepare_args(ty, value, stream, writeback, values)
        if i not in held:  # a number or an array that can change: keep a function that repacks it
            number = i in numbers
            setter = _repacker(kernel, compiled, ty, stream, values, first, len(values), number=number)
            (scalars if number else arrays)[i] = setter
    if writeback:
        raise TypeError(_HOST_ARRAY)
    config = LaunchConfig(grid=griddim, block=blockdim, shmem_size=0)
    cu_kernel = compiled._codelibrary.get_cufunc().kernel

    def launch_prepared():
        core_launch(stream, config, cu_kernel, *values)

    return Prepared(name, kept, launch_prepared, scalars, arrays, cuda)


def _changeable_number(a) -> bool:
    """Whether `a` is a number `Prepared.set_scalar` takes: an int or float, not a bool or float16."""
    return isinstance(a, (int, float, np.integer, np.floating)) and not isinstance(a, (bool, np.float16))


def _repacker(kernel, compiled, ty, stream, values, start: int, stop: int, *, number: bool):
    """A function that packs another value of type `ty` into values[start:stop], as a launch packs it."""

    def repack(a):
        if not number and kernel.typeof_pyval(a) != ty:
            raise TypeError(f"an argument of type {kernel.typeof_pyval(a)} where {ty} was prepared")
        packed: list = []
        compiled._prepare_args(ty, a, stream, [], packed)
        values[start:stop] = packed  # as many values as before: the type is the same

    return repack


def cuda_view(a, cuda=None):
    """a as a Numba launch takes it, no copy: a CUDA tensor viewed, a CPU tensor's NumPy view (Ch. 9-10).

    Any object with `__cuda_array_interface__` (a PyTorch CUDA tensor, or a device array of the
    other Numba package) becomes a device array of `cuda` (default: the course's compiler's,
    `cudalearn.runtime.numba_backend`) over the same GPU memory; a PyTorch CPU tensor (under the simulator)
    its NumPy view of the same memory; anything else is returned as it is.
    """
    if cuda is None:
        from cudalearn.runtime.numba_backend import cuda

    if getattr(a, "is_cuda", None) is False and hasattr(a, "numpy"):
        return a.numpy()
    same_package = type(a).__module__.partition(".")[0] == cuda.__name__.partition(".")[0]
    if hasattr(a, "__cuda_array_interface__") and not (hasattr(a, "copy_to_host") and same_package):
        return cuda.as_cuda_array(a)  # not a device array of this package yet
    return a
