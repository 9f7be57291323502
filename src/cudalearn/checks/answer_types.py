"""How the checks' messages name the type of a student's answer: 'a float', 'a numpy.int64' (all labs)."""

from __future__ import annotations

import sys
from typing import Any

#: modules whose types go by their bare name: Python's, and the student's own (a notebook's `__main__`;
#: `student`, the module of the stand-ins `cudalearn grade` names after the student's types)
BARE = ("builtins", "__main__", "student")


def type_name(x: Any) -> str:
    """'float', 'numpy.int64', 'torch.nn.Parameter', 'MyBlock': the type of x as a check's message names it.

    A type of a `BARE` module goes by its bare name; any other by the first package of its module that
    exports it (torch.nn.Parameter, defined in torch.nn.parameter), else by its module's full name.
    """
    t = type(x)
    module = str(t.__module__)
    if module in BARE:
        return t.__name__
    parts = module.split(".")
    for package in (".".join(parts[:i]) for i in range(1, len(parts))):
        if getattr(sys.modules.get(package), "__dict__", {}).get(t.__name__) is t:
            return f"{package}.{t.__name__}"
    return f"{module}.{t.__name__}"
