"""Sentences about stored GPU figures, printed from them and checked against them (every chapter).

A sentence typed in Markdown that quotes a measured number goes stale when a GPU rerun changes the
number: nothing reads it again. So the book never types such a number. A compared code cell
(`# NBVAL_CHECK_OUTPUT`) prints the sentence from the figures instead, with the run it comes from,
and checks the shape the prose around it states (an ordering, a ratio's side of 1):

    launch, where = reference.figures("ch0.launch_costs", launch_costs)
    stated.say(
        launch, where,
        lambda f: f"after a pause {f['paused_us']:.0f} us, in a row {f['queued_us']:.0f} us",
        holds=lambda f: f["paused_us"] > f["queued_us"],
        states="a launch after a pause costs the host more than one in a row",
    )

After a rerun, a changed number changes the printed sentence, so nbval fails in that cell (its
committed output differs); a changed ordering raises `StaleProse` there, naming the sentence of the
prose to reread. On a GPU the figures are the ones just measured, so the same check runs on them.
`CUDALEARN_REFERENCE=FOLDER` reads another folder's stored runs: a rerun can be checked against the
book before it is adopted. Markdown keeps the words that hold whatever the rerun says (the why).
"""

from __future__ import annotations

import os
import re
import textwrap
from collections.abc import Callable
from typing import Any

from cudalearn.measure import reference

STRICT = "CUDALEARN_STRICT_PROSE"  # set by the course's GPU runs: a stale sentence raises there
WIDTH = 100  # the book's widest output line (cudalearn.course.book.MAX_OUTPUT_COLUMNS)


class StaleProse(AssertionError):
    """The prose states a shape (an ordering, a ratio) that the figures it reads no longer show."""


def wrap(text: str) -> str:
    """`text` wrapped to the book's output width, each paragraph on its own (all chapters)."""
    return "\n".join(textwrap.fill(p, WIDTH, break_on_hyphens=False) for p in text.split("\n"))


def stored(key: str) -> tuple[dict[str, Any] | None, str]:
    """(the stored figures of `key` or None, the run they come from: device, date, numba-cuda)."""
    figures, data = reference.lookup(key)
    return figures, reference.label(
        data, key
    ) if figures is not None else "no reference GPU run is stored for this figure yet"


def one_run(*keys: str) -> bool:
    """Whether the figures of `keys` come from one run: measured now on a GPU, or stored in one file.

    A ratio between two figures means something only then: two stored files may come from two
    machines of one model on one day (Chapter 5's shallow network shows how far apart they can be).
    """
    from cudalearn.runtime import device

    if device.mode() == "gpu":
        return True
    files = set()
    for key in keys:
        figures, data = reference.lookup(key)
        if figures is None:
            return False
        files.add(data.get("created", data.get("date")))
    return len(files) == 1


def live() -> str:
    """Where figures computed in the notebook itself come from: this GPU, or the CPU (Chapter 7a)."""
    from cudalearn.runtime import device

    return reference.measured_now() if device.mode() == "gpu" else "this run, on the CPU"


def check(figures: dict[str, Any], where: str, holds: Callable[[dict[str, Any]], Any], states: str) -> None:
    """Raise StaleProse when `holds(figures)` is false: the prose's `states` no longer matches `where`.

    On a student's GPU it is said, not raised: figures measured there are that machine's own (a shape
    the prose reads in the course's stored run may not hold there, a result, not an error), and a
    stored figure reads the same without a GPU, where the course's CI runs the checks its CPU path
    reaches and raises. A timing table's label names the GPU alone, so `where` does not have to say
    "measured now" for this. The note says which: a stored run's label carries its date. Without a
    GPU, and in the course's own GPU runs (`scripts/gpu_run.py` sets CUDALEARN_STRICT_PROSE=1), it
    raises.
    """
    from cudalearn.runtime import device

    if holds(figures):
        return
    measured = where.startswith(reference.MEASURED_NOW)
    if (measured or device.mode() == "gpu") and not os.environ.get(STRICT):
        if measured or not re.search(rf"\b{reference.DATE}\b", where):  # this GPU's figures
            why = "Your machine differs here (its GPU or its host CPU): a result, not an error in your code."
        else:  # a stored run's (its label carries a date): the course's prose is out of date
            why = "The course's text is out of date here, not your code: please tell the course's authors."
        print(
            wrap(
                f"Note: the text says {states!r}, from the course's stored run; the figures of {where} "
                f"do not show it. {why}"
            )
        )
        return
    raise StaleProse(
        f"the text says {states!r}, and the figures of {where} do not show it: a rerun changed them. "
        "Reread the prose around this cell against the figures printed above, then fix the sentence "
        "(or the code this check reads)."
    )


def check_each(figures: dict[str, Any], where: str, said: dict[str, Any]) -> None:
    """`check` for each {claim of the prose: whether `figures` show it}, in order (chapters 7-9)."""
    for states, holds in said.items():
        check(figures, where, lambda _figures, holds=holds: holds, states)


def say(
    figures: dict[str, Any] | None,
    where: str,
    sentence: Callable[[dict[str, Any]], str],
    *,
    holds: Callable[[dict[str, Any]], Any] | None = None,
    states: str = "",
) -> None:
    """Print `sentence(figures)` and where they come from, after checking `holds` (see the module's text).

    `figures, where` are what `reference.figures` or `stored` return; with figures None (no run stored
    yet) it says so and checks nothing. `states` is the prose's claim in words, for the error."""
    if figures is None:
        print(wrap(f"Not measured yet: {where}."))
        return
    if holds is not None:
        check(figures, where, holds, states or "what the prose around this cell says")
    print(wrap(f"{sentence(figures)}\n({where})"))
