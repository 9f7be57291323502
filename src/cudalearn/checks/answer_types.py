"""What an answer's type is called in messages, and the course's one rule for an int answer (all labs)."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

#: modules whose types go by their bare name: Python's, and the student's own (a notebook's `__main__`;
#: `student`, the module of the stand-ins `cudalearn grade` names after the student's types)
BARE = ("builtins", "__main__", "student")

#: the rule, as the exercise texts and the checks' messages say it
INT_RULE = (
    "an int answer may be a Python int or a NumPy integer (np.int64, ...); a float (even 3.0), a bool "
    "or anything else is refused"
)


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


def is_int(x: Any) -> bool:
    """The course's one rule for an int answer: a Python int or a NumPy integer, never a bool (all labs).

    Both are exact integers that a Numba launch, range() and integer arithmetic accept; a float is
    refused even when it holds a whole number (a `/` on the way rounds large values), and so is a bool.
    """
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def int_problem(x: Any) -> str | None:
    """Why x is not an int answer under `is_int`, as 'is 3.0, a float, where an int is asked for', or None."""
    if is_int(x):
        return None
    return f"is {x!r}, a {type_name(x)}, where an int is asked for"


#: the hint of a check that refuses a non-int answer
INT_FIX = (
    "integer arithmetic (+, *, //) on ints gives an int; `/`, math.floor of a float and np.ceil give floats "
    "(compute with // so nothing is rounded; int(...) of a float hides a rounding, it does not undo it)."
)
