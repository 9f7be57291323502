"""The judge's handles on the student's objects: calls go to the sandbox, only data comes back (grading).

Each name an exercise asks for is bound in the judge to a `Remote`: calling
it, indexing it (`kernel[grid, block]`) or reading an attribute sends a
request, and arrays a kernel wrote are copied back into the judge's own
(`write_back`). A Remote's type is named after the student's object's type,
so a check's message says 'got a list'.
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np

from cudalearn.grading import wire


class Remote:
    """A handle on an object in the student's process: calls and reads go there, only data comes back."""

    def __init__(self, judge: Any, generation: int, meta: dict) -> None:
        d = self.__dict__
        d["_cl_judge"], d["_cl_gen"], d["_cl_id"] = judge, generation, meta.get("id")
        name = meta.get("name")
        if isinstance(name, str) and name.isidentifier():
            d["__name__"] = d["__qualname__"] = name
        d["__signature__"] = _signature(meta.get("sig"))

    def _cl_op(self, op: str, **fields: Any) -> Any:
        return self._cl_judge.request(op, self, fields)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__") or name.startswith("_cl_"):
            raise AttributeError(name)
        if name in ("py_func", "fn") and self.__dict__.get("_cl_trace"):
            return self._cl_judge.rebuilt(self.__dict__["_cl_trace"])  # for the tracer, never the student's
        return self._cl_op("getattr", name=name)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("the grader does not set attributes on the student's objects")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._cl_judge.call(self, args, kwargs)

    def _cl_sources(self) -> list[str]:
        """`checks.student_sources`: the answer cells the judge holds for this name, never asked of it."""
        name = self.__dict__.get("_cl_trace")
        return self._cl_judge.sources_of(name) if name else []

    def _cl_experiment(self, experiment: Any, args: tuple, kwargs: dict) -> Any:
        """`checks.student_side`: experiment(this object, *args) run in the student's process; data back."""
        return self._cl_judge.experiment(self, experiment, args, kwargs)

    def __getitem__(self, key: Any) -> Any:
        return self._cl_op("getitem", key=key)

    def __len__(self) -> int:
        return int(self._cl_op("len"))

    def __iter__(self):
        return iter(self._cl_op("list"))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = np.asarray(self._cl_op("array"))
        return a.astype(dtype) if dtype is not None else a

    def __bool__(self) -> bool:
        return bool(self._cl_op("bool"))

    def __float__(self) -> float:
        return float(self._cl_op("num", kind="float"))

    def __int__(self) -> int:
        return int(self._cl_op("num", kind="int"))

    __index__ = __int__

    def __repr__(self) -> str:
        try:
            return str(self._cl_op("repr"))
        except Exception:
            return f"<{type(self).__name__} from the student's notebook>"


_REMOTE_TYPES: dict[str, type] = {}


def remote_type(name: Any) -> type:
    """A Remote subclass named after the student's type, so checks' messages say 'got a list'."""
    name = name if isinstance(name, str) and name.isidentifier() else "object"
    if name not in _REMOTE_TYPES:
        _REMOTE_TYPES[name] = type(name, (Remote,), {"__module__": "student"})
    return _REMOTE_TYPES[name]


def _signature(sig: Any) -> inspect.Signature | None:
    if not isinstance(sig, list):
        return None
    try:
        params = [
            inspect.Parameter(name, inspect._ParameterKind(kind))
            for name, kind in sig
            if isinstance(name, str) and name.isidentifier() and type(kind) is int
        ]
        return inspect.Signature(params)
    except (ValueError, TypeError):
        return None


def write_back(orig: Any, new: Any) -> None:
    """Copy an array the student's code wrote into the judge's own array, in place."""
    if not isinstance(new, np.ndarray):
        return
    if isinstance(orig, np.ndarray):
        if orig.shape == new.shape and orig.flags.writeable:
            np.copyto(orig, new, casting="unsafe")
    elif wire._is_device_array(orig):
        if tuple(orig.shape) == new.shape:
            orig.copy_to_device(np.ascontiguousarray(new, dtype=orig.dtype))
    else:
        tensor = wire._torch_tensor_type()
        if tensor is not None and isinstance(orig, tensor) and tuple(orig.shape) == new.shape:
            import torch

            with torch.no_grad():
                orig.copy_(torch.from_numpy(new).to(orig.dtype))
