"""cudalearn: the helper package of the course "How CUDA powers deep learning".

Importing it has no side effect: the first notebook cell calls
`cudalearn.setup()`, which picks the run mode (gpu or sim) before Numba's
CUDA target is imported. Submodules are imported where they are used.
"""

from cudalearn.course.colab import setup_cell as _setup_cell
from cudalearn.runtime.device import device_count, info, mode, setup, torch_device
from cudalearn.runtime.sizes import size
from cudalearn.version import __version__

__all__ = [
    "setup",
    "mode",
    "info",
    "device_count",
    "torch_device",
    "size",
    "show_source",
    "bench",
    "SETUP_CELL",
    "__version__",
]

#: The first code cell of every notebook (a test checks that they all use exactly this text).
SETUP_CELL = _setup_cell()


def bench(kernel, lab: str, root=None, consts: dict | None = None) -> str:
    """Time your speed-graded kernel against the solution's, as `cudalearn grade` does (labs 2-10).

    `cudalearn.bench(vector_add, "02")` after the kernel's cell, on a GPU: the same harness and
    tiers as the grader's speed points (`cudalearn.grading.bench`); under the simulator it says
    that speed needs a GPU.
    """
    from cudalearn.grading.bench import bench as run

    return run(kernel, lab, root, consts)


def show_source(obj) -> None:
    """Show the source of a package kernel or function, highlighted, in a notebook (all chapters)."""
    import inspect

    fn = getattr(obj, "py_func", None) or getattr(obj, "fn", None) or obj
    src = inspect.getsource(fn)
    try:
        from IPython.display import Code, display

        display(Code(src, language="python"))
    except ImportError:
        print(src)
