"""The sandbox's request server: runs the judge's requests on the student's objects, in data (grading).

One namespace, like a notebook kernel's. A request runs a cell, reads a
name, or calls, indexes or reads an object the student's code made; the
reply is a value that is data (see `wire`) or a numbered handle on an object
that stays here. On a GPU a kernel's device-array arguments sit between
guard zones (`checks.guard`), so a missing bounds guard fails here too.
"""

from __future__ import annotations

import base64
import importlib
import inspect
import itertools
import linecache
import os
import pickle
import traceback
from typing import Any

from cudalearn.grading import wire
from cudalearn.grading.cells import notebook_namespace
from cudalearn.runtime import counting


def _safe_str(e: BaseException) -> str:
    try:
        text = str(e)
    except BaseException:  # a student-defined __str__ that raises
        text = f"<{type(e).__name__} whose message cannot be printed>"
    return text[:4000]


def describe(e: BaseException) -> dict:
    """A student's exception as data: type, message and where in the student's cells it was raised."""
    where = ""
    if isinstance(e, SyntaxError):
        where = f"{(e.filename or 'cell').strip('<>')}, line {e.lineno}: {(e.text or '').strip()[:200]}"
        message = str(e.msg)
    else:
        message = _safe_str(e)
        frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename.startswith("<")]
        if frames:
            f = frames[-1]
            where = f"{f.filename.strip('<>')}, line {f.lineno}" + (
                f": {f.line.strip()[:200]}" if f.line else ""
            )
    last = traceback.extract_tb(e.__traceback__)[-3:]  # where it was raised, student's cell or not
    return {
        "type": type(e).__name__[:100],
        "module": str(type(e).__module__)[:100],
        "message": message,
        "where": where,
        "at": " <- ".join(f"{os.path.basename(f.filename)}:{f.lineno} {f.name}" for f in reversed(last))[
            :600
        ],
    }


def _signature(obj: Any) -> list | None:
    try:
        sig = inspect.signature(obj)
    except BaseException:
        return None
    return [[str(p.name)[:100], int(p.kind)] for p in list(sig.parameters.values())[:64]]


def _host(x: Any) -> Any:
    """A host numpy copy of an array argument after a call, or None if `x` is not an array."""
    import numpy as np

    if isinstance(x, np.ndarray):
        return x
    if wire._is_device_array(x):
        return x.copy_to_host()
    tensor = wire._torch_tensor_type()
    if tensor is not None and isinstance(x, tensor):
        return (
            x.detach().cpu().float().numpy() if str(x.dtype) == "torch.bfloat16" else x.detach().cpu().numpy()
        )
    return None


def _guard(a: Any) -> tuple[Any, Any]:
    """A copy of device array `a` inside the course's guard zones (`checks.guard`): (view, guard)."""
    from cudalearn.checks.guard import Guarded

    g = Guarded(a.copy_to_host())
    return g.view, g


def _check_guard(label: str, shape: tuple, guard: Any) -> None:
    """Raise IndexError if a kernel wrote into the guard zones around an argument (a GPU does not raise)."""
    before, after = guard.overwritten()
    if before or after:
        where = "past the end" if after else "before the start"
        raise IndexError(
            f"your kernel wrote {where} of {label} (shape {shape}): an index is out of bounds for the array"
        )


def _parameter_names(obj: Any) -> list[str]:
    """The parameter names of a kernel launch (`kernel[grid, block]`) or function, if they can be found."""
    fn = getattr(getattr(obj, "dispatcher", obj), "py_func", None) or obj
    try:
        return list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return []


def _guard_arguments(obj: Any, args: list, kwargs: dict) -> list:
    """On a GPU, give the kernel guarded copies of its device-array arguments; return what to check."""
    from cudalearn.runtime import device

    if device.mode() != "gpu":
        return []  # the simulator raises IndexError itself
    names = _parameter_names(obj)
    checks = []
    for key in [*range(len(args)), *kwargs]:
        holder = args if isinstance(key, int) else kwargs
        a = holder[key]
        if wire._is_device_array(a) and getattr(a, "size", 0):
            holder[key], guard = _guard(a)
            if isinstance(key, int):
                label = f"`{names[key]}`" if key < len(names) else f"argument {key + 1}"
            else:
                label = f"`{key}`"
            checks.append((label, tuple(a.shape), guard))
    return checks


def _arguments(dec: wire.Decoder, req: dict, what: str) -> tuple[list, dict]:
    """The args and kwargs of a call-like request, decoded; ProtocolError unless a list and a dict."""
    args = dec.decode(req.get("args"))
    kwargs = dec.decode(req.get("kwargs"))
    if not isinstance(args, list) or not isinstance(kwargs, dict):
        raise wire.ProtocolError(f"malformed {what}")
    return args, kwargs


class Server:
    """Runs the judge's requests in one namespace, like a notebook kernel."""

    def __init__(self) -> None:
        self.objects: dict[int, Any] = {}
        self.ids = itertools.count(1)
        self.ns, self.transform = notebook_namespace()

    def to_ref(self, obj: Any) -> dict:
        rid = next(self.ids)
        self.objects[rid] = obj
        try:
            name = str(getattr(obj, "__name__", ""))[:100]
        except BaseException:
            name = ""
        return {
            "$": "r",
            "id": rid,
            "type": type(obj).__name__[:100],
            "name": name,
            "call": callable(obj),
            "sig": _signature(obj) if callable(obj) else None,
        }

    def from_ref(self, node: dict) -> Any:
        if isinstance(node.get("pickle"), str):  # an object the instructor's cells built in the judge
            return pickle.loads(base64.b64decode(node["pickle"]))
        try:
            return self.objects[node["id"]]
        except (KeyError, TypeError):
            raise wire.ProtocolError("unknown handle") from None

    def encode(self, value: Any, extra: dict | None = None) -> tuple[dict, list[bytes]]:
        enc = wire.Encoder(self.to_ref)
        reply = {"value": enc.encode(value)}
        for key, v in (extra or {}).items():
            reply[key] = enc.encode(v)
        return reply, enc.buffers

    def handle(self, req: dict, payload: memoryview, spans: list) -> tuple[dict, list[bytes]]:
        op = req.get("op")
        dec = wire.Decoder(payload, spans, self.from_ref)
        if op == "exec":
            name = str(req["name"])[:60]
            code = self.transform(str(req["code"]))
            filename = f"<{name}>"
            linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
            exec(compile(code, filename, "exec"), self.ns)
            return {"value": None}, []
        if op == "get":
            name = str(req["name"])
            if name not in self.ns:
                raise NameError(f"name {name!r} is not defined")
            return self.encode(self.ns[name])
        if op == "ping":
            return {"value": None}, []
        obj = self.from_ref({"id": req.get("id")})
        if op == "call":
            args, kwargs = _arguments(dec, req, "call")
            guards = _guard_arguments(obj, args, kwargs)
            with counting.observe() as seen:
                result = obj(*args, **kwargs)
            for label, shape, guard in guards:
                _check_guard(label, shape, guard)
            back = [[i, h] for i, a in enumerate(args) if (h := _host(a)) is not None]
            back += [[k, h] for k, a in kwargs.items() if (h := _host(a)) is not None]
            return self.encode(result, {"back": back, "events": [seen.launches[:1000], seen.copies]})
        if op == "experiment":  # checks.student_side: the package's function, run on the student's object
            module = str(req.get("module"))
            if not module.startswith("cudalearn."):
                raise wire.ProtocolError("an experiment must be a cudalearn function")
            experiment = getattr(importlib.import_module(module), str(req.get("function")))
            args, kwargs = _arguments(dec, req, "experiment")
            with counting.observe() as seen:
                result = experiment(obj, *args, **kwargs)
            return self.encode(result, {"events": [seen.launches[:1000], seen.copies]})
        if op == "getattr":
            return self.encode(getattr(obj, str(req["name"])))
        if op == "getitem":
            return self.encode(obj[dec.decode(req.get("key"))])
        if op == "len":
            return self.encode(len(obj))
        if op == "list":
            return self.encode(list(itertools.islice(iter(obj), wire.MAX_ITEMS)))
        if op == "array":
            import numpy as np

            return self.encode(np.asarray(obj))
        if op == "repr":
            return self.encode(repr(obj)[:1000])
        if op == "bool":
            return self.encode(bool(obj))
        if op == "num":
            return self.encode(float(obj) if req.get("kind") == "float" else int(obj))
        raise wire.ProtocolError(f"unknown request {op!r}")
