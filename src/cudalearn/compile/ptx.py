"""Every student kernel compiled for a real GPU inside its check: PTX, compile errors, float64 (all labs).

On a laptop with no GPU, kernels run under Numba's CUDA simulator, which
runs them as Python and accepts code the real compiler rejects: a
`cuda.shared.array` shape computed in the kernel, a Python list, a call to
a plain Python function... A student whose kernel "passes" there would
see it fail on Colab's T4. And a kernel that starts its accumulator at
`0.0` compiles, but computes in float64, which a T4 runs at 1/32 of its
float32 rate.

`check_kernel` (called by `checks.run_kernel` before every launch) compiles
the kernel's Python function with Numba's real CUDA compiler for sm_75 (a
T4), with the types of the launch's actual arguments, explains a compile
error in plain words (`cudalearn.compile.errors`), and looks for float64 instructions in the PTX.

Under the simulator the real compiler is not importable in the same
process (Numba reads `NUMBA_ENABLE_CUDASIM` once, when `numba.cuda` is
first imported, and swaps its compiler for a stub), so the compile runs in
a worker process started once with the real CUDA target: the kernel
travels there pickled by value (`numba.cuda.cloudpickle`), its device
functions re-jitted on arrival. No GPU and no CUDA driver are needed,
only NVVM (shipped with Numba's CUDA wheels). On a GPU the compile runs
in-process. Results are cached by (pickled function, argument types, cc).
"""

from __future__ import annotations

import atexit
import hashlib
import linecache
import os
import pickle
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import warnings
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cudalearn.compile.errors import did_you_mean, explain, recursive, uncalled_cuda
from cudalearn.compile.source import T4, _jitted_py_func, kernel_function

FIRST_TIMEOUT_S = 180.0  # the first compile starts the worker and loads NVVM
TIMEOUT_S = 60.0
#: in a judge, its compile worker forked by the grade run's server (`forkserver`): "FD:PID"
WORKER_ENV = "CUDALEARN_PTX_WORKER"

_CACHE: dict[tuple, tuple[str, str]] = {}  # key -> ("ok", ptx) | ("error", compiler message)
TIMINGS: list[tuple[str, float]] = []  # (kernel name, seconds) of each compile that ran (not cached)
_WARNED: set[str] = set()
_LINTED: set[Any] = set()  # kernel functions whose source `uncalled_cuda` read and found clean
_LOCK = threading.Lock()
_REQUIRED = False  # `require()`: cudalearn grade's judge, where a compile check that cannot run fails


class CompilerUnavailable(RuntimeError):
    """The real CUDA compiler cannot run here (no NVVM, no worker process): the check is skipped."""


# The kernel's Python function and the types of a launch (all labs) -------------------------------


def argument_types(args: Sequence[Any]) -> tuple:
    """The Numba types a launch with `args` compiles for, as a real GPU's dispatcher types them."""
    import numba
    from numba.core import types

    out = []
    for a in args:
        try:
            out.append(numba.typeof(a))
            continue
        except (ValueError, TypeError):
            pass
        dtype, ndim = getattr(a, "dtype", None), getattr(a, "ndim", None)
        if dtype is None or ndim is None:  # e.g. a simulator device array numba.typeof does not know
            raise TypeError(f"cannot type a kernel argument of type {type(a).__name__}")
        flags = getattr(a, "flags", {})
        layout = "C" if flags.get("C_CONTIGUOUS", True) else "F" if flags.get("F_CONTIGUOUS") else "A"
        out.append(types.Array(numba.from_dtype(dtype), ndim, layout))
    return tuple(out)


# Pickling a kernel for the worker ------------------------------------------------------------------


def _device_function(fn: Any) -> Any:
    """In the worker: a device function of the kernel, jitted for the real target."""
    from numba import cuda

    return cuda.jit(device=True)(fn)


def _real_cuda_attr(name: str) -> Any:
    """In the worker: `numba.cuda.<name>` of the real target (a simulator object on the way in)."""
    import numba.cuda

    return getattr(numba.cuda, name)


def _payload(fn: Any) -> bytes:
    """`fn` pickled by value with its globals; device functions and simulator objects by name."""
    from numba.cuda import cloudpickle

    class _Pickler(cloudpickle.Pickler):
        def reducer_override(self, obj: Any) -> Any:
            inner = _jitted_py_func(obj)
            if inner is not None:
                return _device_function, (inner,)
            module = getattr(type(obj), "__module__", "") or ""
            if module.startswith("numba.cuda.simulator") and not isinstance(obj, type):
                name = getattr(obj, "__name__", None)
                if isinstance(name, str):
                    return _real_cuda_attr, (name,)
            return super().reducer_override(obj)

    import io

    buf = io.BytesIO()
    _Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(fn)
    return buf.getvalue()


# The compile itself: in this process (real target) or in the worker (simulator) -----------------


def _pretend_device(cc: tuple[int, int]) -> None:
    """With no CUDA driver, let Numba compile device functions for `cc` (it asks the current device)."""
    from numba import cuda
    from numba.cuda import dispatcher

    if cuda.is_available():
        return

    class _Device:
        compute_capability = cc

    dispatcher.get_current_device = lambda: _Device()


def _compile_here(fn: Any, sig: tuple, cc: tuple[int, int]) -> str:
    """PTX of `fn` for `sig` and sm_<cc> with the real target of this process (source lines kept)."""
    from numba.cuda.compiler import compile_ptx

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ptx, _ = compile_ptx(fn, sig, cc=cc, lineinfo=True)
    return ptx


def _outcome(e: BaseException) -> tuple[str, str]:
    """('error', message) for what the compiler rejects; ('unavailable', message) for a broken setup."""
    mro = {c.__name__ for c in type(e).__mro__}
    if "NumbaError" in mro and "CudaSupportError" not in mro:
        return "error", str(e)
    if isinstance(e, TypeError) and "kernel must have void return type" in str(e):
        return "error", str(e)
    missing = re.search(r"module 'numba\.cuda' has no attribute '(\w+)'", str(e))
    if isinstance(e, AttributeError) and missing:  # `cuda.syncthread()`: a typo, which Numba raises raw
        return "error", f"AttributeError: {e}{did_you_mean(missing.group(1))}"
    return "unavailable", f"{type(e).__name__}: {e}"


def _write(stream: Any, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(struct.pack(">Q", len(data)) + data)
    stream.flush()


def _read(stream: Any) -> Any:
    head = stream.read(8)
    if len(head) < 8:
        return None
    return pickle.loads(stream.read(struct.unpack(">Q", head)[0]))


def _serve() -> None:
    """The worker's loop: read (payload, sig, cc), answer ('ok', ptx) or an outcome (run by `_Worker`)."""
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # anything Numba prints must not corrupt the answers
    import numba.cuda  # noqa: F401  (the real target: NUMBA_ENABLE_CUDASIM is unset for this process)

    while (request := _read(stdin)) is not None:
        _write(stdout, answer(*request))


def answer(payload: bytes, sig: tuple, cc: tuple[int, int]) -> tuple[str, str]:
    """In a worker: ('ok', ptx) for a pickled kernel, or the outcome of its failure (`_outcome`)."""
    try:
        _pretend_device(cc)
        return "ok", _compile_here(pickle.loads(payload), sig, cc)
    except BaseException as e:  # noqa: BLE001  (every failure goes back to the parent)
        return _outcome(e)


def worker_env() -> dict[str, str]:
    """A compile worker's environment: the real CUDA target, and the modules a kernel may name importable."""
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env["CUDALEARN_MODE"] = "compile"  # a cudalearn module the kernel names may be imported there
    root = str(Path(__file__).resolve().parents[2])
    path = [root, *(p for p in sys.path if p and os.path.isdir(p))]  # the modules a kernel may name
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(path))
    return env


class _Worker:
    """A process with Numba's real CUDA target that compiles kernels for a parent under the simulator.

    In a judge of `cudalearn grade`, the first worker is the one the grade run's compile server forked
    for it (`forkserver`: NVVM already loaded, earlier submissions' results kept), named by the
    environment (`WORKER_ENV`); any later one (after a timeout) is started here.
    """

    def __init__(self) -> None:
        self.owner, self.answered, self.proc = os.getpid(), False, None
        given = os.environ.pop(WORKER_ENV, "")
        if given:
            fd, pid = (int(x) for x in given.split(":"))
            self.sock = socket.socket(fileno=fd)
            self.writer, self.fd, self.worker_pid = self.sock.makefile("wb"), fd, pid
            return
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from cudalearn.compile.ptx import _serve; _serve()"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=worker_env(),
        )
        self.writer, self.fd, self.worker_pid = self.proc.stdin, self.proc.stdout.fileno(), self.proc.pid

    def alive(self) -> bool:
        if self.owner != os.getpid():
            return False
        if self.proc is not None:
            return self.proc.poll() is None
        try:
            os.kill(self.worker_pid, 0)
        except OSError:
            return False
        return self.writer is not None

    def request(self, payload: bytes, sig: tuple, cc: tuple[int, int]) -> tuple[str, str]:
        _write(self.writer, (payload, sig, cc))
        deadline = time.monotonic() + (TIMEOUT_S if self.answered else FIRST_TIMEOUT_S)
        fd, data = self.fd, b""
        need = 8
        while len(data) < need:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                self.close()
                raise CompilerUnavailable("the compile worker did not answer in time")
            chunk = os.read(fd, need - len(data))
            if not chunk:
                raise CompilerUnavailable("the compile worker exited (NVVM or numba-cuda missing?)")
            data += chunk
            if need == 8 and len(data) == 8:
                need += struct.unpack(">Q", data)[0]
        self.answered = True
        return pickle.loads(data[8:])

    def close(self) -> None:
        if self.proc is None:  # the compile server's worker: not our child, killed by pid
            if self.writer is not None:
                self.writer.close()
                self.sock.close()
                self.writer = None
            try:
                os.kill(self.worker_pid, signal.SIGKILL)
            except OSError:
                pass
            return
        for stream in (self.proc.stdin, self.proc.stdout):
            stream.close()
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


_WORKER: _Worker | None = None


@atexit.register
def _stop_worker() -> None:
    """Stop this process's compile worker at exit."""
    if _WORKER is not None and _WORKER.owner == os.getpid():
        _WORKER.close()


def _via_worker(payload: bytes, sig: tuple, cc: tuple[int, int]) -> tuple[str, str]:
    global _WORKER
    if _WORKER is None or not _WORKER.alive():
        _WORKER = _Worker()
    try:
        return _WORKER.request(payload, sig, cc)
    except (BrokenPipeError, OSError) as e:
        raise CompilerUnavailable(f"the compile worker failed: {e}") from None


def _warm_up_kernel(out):  # noqa: D103  (compiled by `prestart` to load NVVM; never launched)
    out[0] = 0


def prestart() -> None:
    """Start the compile worker and load NVVM in the background, so the first check is fast (grading)."""
    if not _simulated():
        return

    def warm() -> None:
        global _WORKER
        with _LOCK:
            try:
                if _WORKER is None or not _WORKER.alive():
                    _WORKER = _Worker()
                _WORKER.request(_payload(_warm_up_kernel), signature_types("void(float32[::1])"), T4)
            except (CompilerUnavailable, OSError):
                pass  # the first real check will say so

    threading.Thread(target=warm, daemon=True, name="cudalearn-ptx-prestart").start()


def _simulated() -> bool:
    from numba.cuda.core import config

    return bool(config.ENABLE_CUDASIM)


def signature_types(signature: str) -> tuple:
    """The argument types of a Numba signature string such as "void(float32[::1], int32)"."""
    from numba.core import sigutils

    return tuple(sigutils.normalize_signature(signature)[0])


def compile_for_gpu(
    kernel: Any, args: Sequence[Any] = (), cc: tuple[int, int] = T4, *, signature: str | None = None
) -> str:
    """PTX of `kernel` for sm_<cc> and the types of `args`; a compile error as AssertionError (all labs).

    `signature` ("void(float32[::1], ...)", as the package's SIGNATURES) replaces `args` when given.
    Raises CompilerUnavailable when the real compiler cannot run here (the caller then skips the check).
    """
    fn = kernel_function(kernel)
    if fn is None:
        raise CompilerUnavailable(f"no Python function found in {type(kernel).__name__}")
    sig = signature_types(signature) if signature is not None else argument_types(args)
    try:
        payload = _payload(fn)
    except Exception as e:  # noqa: BLE001  (an unpicklable global: the check cannot run)
        why = f"{type(e).__name__}: {e}"
        raise CompilerUnavailable(f"cannot send the kernel to the compiler: {why}") from None
    key = (hashlib.sha256(payload).digest(), sig, tuple(cc))
    with _LOCK:
        result = _CACHE.get(key)
        if result is None:
            start = time.perf_counter()
            if _simulated():
                result = _via_worker(payload, sig, tuple(cc))
            else:
                try:
                    _pretend_device(tuple(cc))
                    result = ("ok", _compile_here(fn, sig, tuple(cc)))
                except BaseException as e:  # noqa: BLE001
                    result = _outcome(e)
            TIMINGS.append((fn.__name__, time.perf_counter() - start))
            if result[0] != "unavailable":
                _CACHE[key] = result
    status, text = result
    if status == "unavailable" and recursive(fn):
        status, text = "error", f"Numba-CUDA crashed compiling a recursive device function: {text}"
    if status == "unavailable":
        raise CompilerUnavailable(text)
    if status == "error":
        raise AssertionError(explain(text, fn, cc))
    return text


# float64 in the PTX (all labs) -----------------------------------------------------------------

_F64 = re.compile(r"^\s*(?:@!?%\w+\s+)?([a-z][\w.]*\.f64\b[\w.]*)", re.M)
_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+\d+", re.M)
_FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]*)"', re.M)


def float64_ops(ptx: str) -> Counter:
    """How many times each float64 instruction (add.f64, fma.rn.f64, cvt.f64.f32...) appears in `ptx`."""
    return Counter(_F64.findall(ptx))


def float64_lines(ptx: str) -> list[tuple[str, int]]:
    """(file, line) of the source lines whose code has float64 instructions, from the PTX's `.loc`."""
    files = dict(_FILE.findall(ptx))
    where, seen = None, []
    for line in ptx.splitlines():
        loc = _LOC.match(line)
        if loc:
            where = (files.get(loc.group(1), ""), int(loc.group(2)))
        elif _F64.match(line) and where and where[1] > 0 and where not in seen:
            seen.append(where)
    return seen


def check_float32(ptx: str, fn: Any, arg_types: Sequence[Any], names: Sequence[str] = ()) -> None:
    """Raise when a kernel launched on float32 data computes in float64 (all labs).

    Skipped when an argument is a float64 array: then the data itself is float64.
    """
    from numba.core import types

    if any(isinstance(t, types.Array) and t.dtype == types.float64 for t in arg_types):
        return
    ops = float64_ops(ptx)
    if not ops:
        return
    counts = ", ".join(f"{n} {op}" for op, n in ops.most_common())
    lines = []
    for filename, line in float64_lines(ptx):
        text = linecache.getline(filename, line).strip()
        if text and filename == fn.__code__.co_filename:
            lines.append(f"line {line}: `{text}`")
    where = f" Where: {'; '.join(lines[:4])}." if lines else ""
    names = list(names) + [f"argument {i + 1}" for i in range(len(names), len(arg_types))]
    scalars = [n for n, t in zip(names, arg_types, strict=False) if t == types.float64]
    passed = (
        f" The launch passes {', '.join(f'`{n}`' for n in scalars)} as a Python float (float64): "
        f"pass np.float32(...) instead."
        if scalars
        else ""
    )
    raise AssertionError(
        f"your kernel `{fn.__name__}` computes in float64 (PTX has {counts}); the exercise asks for "
        f"float32 (a T4 runs float64 at 1/32 of the float32 rate).{where} Fix: start the accumulator "
        f"at float32(0.0) and write constants as float32(...): in Numba a float literal (`0.0`, "
        f"`x * 0.1`, `max(x, 0.0)`) is a float64 and an int mixed with a float32 (`x / n`) gives "
        f"float64, which promotes the whole expression.{passed}"
    )


def require() -> None:
    """Make a compile check that cannot compile (no function, worker timeout or crash) fail (the judge)."""
    global _REQUIRED
    _REQUIRED = True


def _unchecked(kernel: Any, why: str) -> AssertionError:
    """The failure of a compile check that could not run under the grader (`require`), saying why."""
    return AssertionError(
        f"the grader could not compile `{getattr(kernel, '__name__', 'your kernel')}` for a real GPU, so "
        f"it cannot check that a T4 accepts it and computes in float32: {why}. The check fails rather "
        f"than pass unchecked: define the kernel by a plain `@cuda.jit` `def` at the top of its exercise "
        f"cell; if the compiler failed, ask your instructor to grade again."
    )


def check_kernel(
    kernel: Any, args: Sequence[Any], *, float32_only: bool = True, names: Sequence[str] = ()
) -> None:
    """Compile `kernel` for a T4 with the launch's `args`; raise on a compile error or float64 (all labs).

    Called by `checks.run_kernel` before each launch (cached per kernel and argument types). When the
    real compiler cannot run here, warns once and returns (under the grader, `require`, it raises).
    """
    if os.environ.get("CUDALEARN_PTX_CHECK") == "0":
        return  # turned off for this process (a machine where the compile worker cannot run)
    fn = kernel_function(kernel)
    if fn is None:
        if _REQUIRED:  # the grader could not rebuild the kernel (the judge adds why to the message)
            raise _unchecked(kernel, "its Python function could not be rebuilt from your answer cell")
        return
    if fn not in _LINTED:  # its source is read once, not before every launch
        uncalled = uncalled_cuda(fn)
        if uncalled:
            raise AssertionError(uncalled)
        _LINTED.add(fn)
    try:
        ptx = compile_for_gpu(kernel, args)
    except CompilerUnavailable as e:
        if _REQUIRED:
            raise _unchecked(kernel, str(e)) from None
        if "unavailable" not in _WARNED:
            _WARNED.add("unavailable")
            warnings.warn(
                f"cudalearn could not compile the kernel for a real GPU here ({e}); the check that a "
                f"T4 accepts it is skipped.",
                RuntimeWarning,
                stacklevel=3,
            )
        return
    if float32_only:
        check_float32(ptx, fn, argument_types(args), names)
