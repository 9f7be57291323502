"""The data-only channel between the judge and a submission's process (instructors).

One message is a frame: 8 bytes of length, 4 bytes of JSON length, the JSON
header, then the raw bytes of the arrays it carries. Only data crosses:
None, bools, ints, floats, complex numbers, strings, bytes, tuples, lists,
dicts, numpy arrays and scalars of a numeric dtype, Numba device arrays and
torch tensors (as copies). Any other object stays in the submission's
process and crosses as a numbered handle (`{"$": "r", "id": n}`).

Nothing here unpickles or evaluates what it receives: a submission can send
any bytes it likes, and the worst it gets is a `ProtocolError` or a value
that is plain data. The decoder builds only builtin containers and fresh
numpy arrays, so the judge never holds an object of a class the submission
defined.
"""

from __future__ import annotations

import json
import os
import re
import select
import struct
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

MAX_DEPTH = 32
STALL_SECONDS = 30.0  # a frame's writer gives up when its reader took none of it for this long
MAX_ITEMS = 1_000_000
ARRAY_KINDS = "biufc"  # bool, int, uint, float, complex: no objects, strings or records
BUILTIN_TYPES = {t.__name__: t for t in (int, float, complex, bool, str, bytes)}
TORCH_DTYPES = (
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "int8",
    "uint8",
    "int16",
    "int32",
    "int64",
    "bool",
)
_DEVICE = re.compile(r"^(cpu|cuda(:\d{1,2})?)$")


class ProtocolError(Exception):
    """A frame or value on the channel is malformed, too large, or not data (instructors)."""


class ChannelClosed(ProtocolError):
    """The other end closed the channel (its process exited or closed the pipe)."""


class Deadline(Exception):
    """No complete frame arrived before the deadline."""


# Framing ----------------------------------------------------------------------


def send(fd: int, header: dict, buffers: list[bytes] = (), deadline: float | None = None) -> None:
    """Write one frame: the JSON `header` (with the buffer sizes added) and the raw `buffers`.

    On a non-blocking `fd` (the judge's end) a reader that stops reading cannot hold the writer: past
    `deadline`, or STALL_SECONDS without progress when there is none, it raises Deadline.
    """
    header = dict(header, _b=[len(b) for b in buffers])
    js = json.dumps(header, allow_nan=True, separators=(",", ":")).encode()
    body = [struct.pack("<QI", 4 + len(js) + sum(len(b) for b in buffers), len(js)), js, *buffers]
    for part in body:
        view = memoryview(part).cast("B")
        while view:
            try:
                n = os.write(fd, view)
            except BlockingIOError:
                end = time.monotonic() + STALL_SECONDS if deadline is None else deadline
                wait = end - time.monotonic()
                if wait <= 0 or not select.select([], [fd], [], wait)[1]:
                    raise Deadline() from None
                continue
            view = view[n:]


def _read_exact(fd: int, n: int, deadline: float | None, alive: Callable[[], bool] | None) -> bytearray:
    out = bytearray()
    while len(out) < n:
        if deadline is not None or alive is not None:
            while True:
                wait = 0.2 if deadline is None else min(0.2, deadline - time.monotonic())
                if wait <= 0:
                    raise Deadline()
                ready, _, _ = select.select([fd], [], [], wait)
                if ready:
                    break
                if alive is not None and not alive():
                    # The process is gone; drain whatever it wrote before dying.
                    ready, _, _ = select.select([fd], [], [], 0)
                    if ready:
                        break
                    raise ChannelClosed("the process exited")
        chunk = os.read(fd, min(n - len(out), 1 << 20))
        if not chunk:
            raise ChannelClosed("the channel was closed")
        out += chunk
    return out


def recv(
    fd: int,
    *,
    limit: int = 1 << 30,
    deadline: float | None = None,
    alive: Callable[[], bool] | None = None,
) -> tuple[dict, memoryview, list[tuple[int, int]]]:
    """Read one frame; return (header, payload, buffer spans). Raises ProtocolError, Deadline."""
    (total,) = struct.unpack("<Q", _read_exact(fd, 8, deadline, alive))
    if total > limit or total < 4:
        raise ProtocolError(f"a message of {total} bytes is over the limit of {limit} bytes")
    body = memoryview(_read_exact(fd, total, deadline, alive))
    (jlen,) = struct.unpack("<I", body[:4])
    if jlen > total - 4:
        raise ProtocolError("a message's header is longer than the message")
    try:
        header = json.loads(bytes(body[4 : 4 + jlen]))
    except (ValueError, RecursionError) as e:
        raise ProtocolError(f"a message's header is not valid JSON: {e}") from None
    if not isinstance(header, dict) or not isinstance(header.get("_b"), list):
        raise ProtocolError("a message's header is not an object with buffer sizes")
    spans, pos = [], 4 + jlen
    for size in header.pop("_b"):
        if type(size) is not int or size < 0 or pos + size > total:
            raise ProtocolError("a message's buffer sizes do not add up")
        spans.append((pos, size))
        pos += size
    return header, body, spans


# Values -----------------------------------------------------------------------


def _is_device_array(x: Any) -> bool:
    """True for a Numba device array (real or simulated), judged by its type, not the instance."""
    kind = type(x)
    return hasattr(kind, "copy_to_host") and (
        hasattr(kind, "__cuda_array_interface__") or kind.__name__ == "FakeCUDAArray"
    )


_HOST_COPY: dict[type, Callable] = {}


def keep_host_copies() -> None:
    """Remember Numba device arrays' own copy_to_host, so the channel's copies bypass a check's counters.

    The first call counts (a judge forked from the judge server made it there, before any lab module)."""
    try:
        from cudalearn.runtime.counting import device_array_class

        cls = device_array_class()
    except ImportError:
        return
    _HOST_COPY.setdefault(cls, cls.copy_to_host)


def host_copy(x: Any) -> Any:
    """`x.copy_to_host()` through the method kept by keep_host_copies() when there is one."""
    for cls in type(x).__mro__:
        if cls in _HOST_COPY:
            return _HOST_COPY[cls](x)
    return x.copy_to_host()


def _torch_tensor_type() -> type | None:
    torch = sys.modules.get("torch")
    return getattr(torch, "Tensor", None) if torch is not None else None


class Encoder:
    """Turns a value into a JSON tree plus buffers; `to_ref(obj)` handles what is not data."""

    def __init__(self, to_ref: Callable[[Any], dict]):
        self.to_ref = to_ref
        self.buffers: list[bytes] = []
        self.items = 0

    def _array(self, tag: str, a: np.ndarray, **extra: Any) -> dict:
        a = np.asarray(a)  # tobytes() is C order; ascontiguousarray would make 0-d arrays 1-d
        if a.dtype.kind not in ARRAY_KINDS or a.dtype.fields is not None:
            raise TypeError(f"an array of dtype {a.dtype} cannot be passed (only numeric arrays can)")
        self.buffers.append(a.tobytes())
        return {"$": tag, "dt": a.dtype.str, "sh": list(a.shape), "i": len(self.buffers) - 1, **extra}

    def encode(self, x: Any, depth: int = 0) -> Any:
        self.items += 1
        if self.items > MAX_ITEMS:
            raise TypeError(f"a value with more than {MAX_ITEMS} items cannot be passed")
        if x is None or type(x) in (bool, str, int, float):
            return x
        if isinstance(x, bool):
            return bool(x)
        if isinstance(x, int) and not isinstance(x, np.generic):
            return int.__int__(x)
        if isinstance(x, float) and not isinstance(x, np.generic):
            return float.__float__(x)
        if isinstance(x, str):
            return str.__str__(x)
        if isinstance(x, complex) and not isinstance(x, np.generic):
            return {"$": "c", "re": x.real, "im": x.imag}
        if isinstance(x, (bytes, bytearray)):
            self.buffers.append(bytes(x))
            return {"$": "y", "i": len(self.buffers) - 1}
        if isinstance(x, np.generic) and np.dtype(type(x)).kind in ARRAY_KINDS:
            return self._array("s", np.asarray(x))
        if isinstance(x, np.ndarray):
            return self._array("a", np.asarray(x))
        if _is_device_array(x):
            host = host_copy(x)
            if isinstance(host, np.ndarray):
                return self._array("d", host)
        if isinstance(x, np.dtype):
            return {"$": "dt", "v": x.str}
        if isinstance(x, type) and issubclass(x, np.generic) and x is not np.generic:
            try:
                return {"$": "nt", "v": np.dtype(x).str}
            except TypeError:
                pass
        if isinstance(x, type) and BUILTIN_TYPES.get(x.__name__) is x:
            return {"$": "bt", "v": x.__name__}
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(x, getattr(torch, "dtype", ())):
            return {"$": "td", "v": str(x).removeprefix("torch.")}
        tensor = _torch_tensor_type()
        if tensor is not None and isinstance(x, tensor):
            name = str(x.dtype).removeprefix("torch.")
            t = x.detach().cpu()
            if name == "bfloat16":
                t = t.float()
            return self._array("T", t.numpy(), tdt=name, dev=str(x.device))
        if depth < MAX_DEPTH:
            if isinstance(x, (tuple, list)):
                return {
                    "$": "t" if isinstance(x, tuple) else "l",
                    "v": [self.encode(v, depth + 1) for v in x],
                }
            if isinstance(x, dict):
                return {
                    "$": "m",
                    "v": [[self.encode(k, depth + 1), self.encode(v, depth + 1)] for k, v in x.items()],
                }
        return self.to_ref(x)


class Decoder:
    """Turns a JSON tree plus buffers back into plain data; `from_ref(node)` builds handles."""

    def __init__(self, payload: memoryview, spans: list[tuple[int, int]], from_ref: Callable[[dict], Any]):
        self.payload, self.spans, self.from_ref = payload, spans, from_ref

    def _buffer(self, node: dict) -> memoryview:
        i = node.get("i")
        if type(i) is not int or not 0 <= i < len(self.spans):
            raise ProtocolError("a value refers to a buffer that is not in the message")
        start, size = self.spans[i]
        return self.payload[start : start + size]

    def _array(self, node: dict) -> np.ndarray:
        try:
            dt = np.dtype(str(node["dt"]))
        except (TypeError, ValueError, KeyError):
            raise ProtocolError("an array has no valid dtype") from None
        shape = node.get("sh")
        if (
            dt.kind not in ARRAY_KINDS
            or dt.fields is not None
            or dt.subdtype is not None
            or not isinstance(shape, list)
            or len(shape) > 32
            or any(type(s) is not int or s < 0 for s in shape)
        ):
            raise ProtocolError("an array has an unsupported dtype or shape")
        buf = self._buffer(node)
        if int(np.prod(shape, dtype=np.int64)) * dt.itemsize != len(buf):
            raise ProtocolError("an array's bytes do not match its shape and dtype")
        return np.frombuffer(buf, dtype=dt).reshape(shape).copy()

    def decode(self, node: Any, depth: int = 0) -> Any:
        if depth > MAX_DEPTH + 2:
            raise ProtocolError("a value is nested too deeply")
        if node is None or type(node) in (bool, int, float, str):
            return node
        if not isinstance(node, dict):
            raise ProtocolError(f"unexpected {type(node).__name__} in a value")
        tag = node.get("$")
        if tag in ("t", "l"):
            items = [self.decode(v, depth + 1) for v in node.get("v", ())]
            return tuple(items) if tag == "t" else items
        if tag == "m":
            try:
                return {self.decode(k, depth + 1): self.decode(v, depth + 1) for k, v in node.get("v", ())}
            except (TypeError, ValueError):
                raise ProtocolError("a dict in a value has an unhashable or malformed key") from None
        if tag == "c":
            try:
                return complex(float(node["re"]), float(node["im"]))
            except (KeyError, TypeError, ValueError):
                raise ProtocolError("a complex number is malformed") from None
        if tag == "y":
            return bytes(self._buffer(node))
        if tag == "a":
            return self._array(node)
        if tag == "s":
            return self._array(node)[()]
        if tag == "d":
            from numba import cuda

            return cuda.to_device(self._array(node))
        if tag == "T":
            return self._tensor(node)
        if tag in ("dt", "nt"):
            try:
                dt = np.dtype(str(node["v"]))
            except (TypeError, ValueError, KeyError):
                raise ProtocolError("a dtype is malformed") from None
            return dt if tag == "dt" else dt.type
        if tag == "bt" and node.get("v") in BUILTIN_TYPES:
            return BUILTIN_TYPES[node["v"]]
        if tag == "td":
            import torch

            dtype = getattr(torch, str(node.get("v")), None) if str(node.get("v")).isidentifier() else None
            if not isinstance(dtype, torch.dtype):
                raise ProtocolError("a torch dtype is malformed")
            return dtype
        if tag == "r":
            return self.from_ref(node)
        raise ProtocolError(f"unknown value tag {tag!r}")

    def _tensor(self, node: dict) -> Any:
        import torch

        name, dev = node.get("tdt"), node.get("dev")
        if name not in TORCH_DTYPES or not isinstance(dev, str) or not _DEVICE.match(dev):
            raise ProtocolError("a tensor has an unsupported dtype or device")
        return torch.from_numpy(self._array(node)).to(device=dev, dtype=getattr(torch, name))
