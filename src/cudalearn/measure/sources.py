"""A chapter's claims from its sources, each beside our measurement and a verdict (every chapter's Sources).

    from cudalearn.measure.sources import Claim, claims
    claims([
        Claim(
            "Padding the tile by one column removes the 32-way conflict",
            "NVIDIA, CUDA C++ Best Practices Guide, sec. 9.2.3.3",
            key="ch4.transpose",  # a stored GPU figure (measure.reference), or value={...} computed here
            show=lambda f: f"{f['speedup']:.2f}x faster",
            holds=lambda f: f["speedup"] > 1,
        ),
    ])

The table is rendered from data, never typed: a stored figure carries its
device and date (`reference.label`); a value the notebook computed (a
tracer count, a parameter count) says "this notebook", and a value computed
from stored figures names their run with `on=` (never "this notebook"). A claim whose
figure no reference run stored reads "not measured", and its verdict
"untested", so a missing run is visible rather than papered over.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cudalearn.measure import reference


@dataclass(frozen=True)
class Claim:
    """One quoted claim: what the source says (in our words), where, and how our figure judges it."""

    claim: str
    source: str
    show: Callable[[dict[str, Any]], str]
    holds: Callable[[dict[str, Any]], bool | None] | None = None
    key: str | None = None
    value: dict[str, Any] | None = None
    note: str = ""
    on: str = ""  # with value=: the run a value derived from stored figures comes from (`stated.stored`)

    def __post_init__(self) -> None:
        if (self.key is None) == (self.value is None):
            raise ValueError(f"Claim {self.claim!r}: give exactly one of key= (a stored figure) or value=")
        if self.on and self.value is None:
            raise ValueError(f"Claim {self.claim!r}: on= names the run of a value=; a key= names its own")
        if self.holds is None and not self.note:
            raise ValueError(f"Claim {self.claim!r}: without holds=, note= must say why there is no verdict")


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def row(c: Claim) -> tuple[str, str, str, str, str]:
    """(claim, source, measured, on, verdict) as text for one claim."""
    if c.value is not None:
        figures, on = c.value, c.on or "this notebook"
    else:
        figures, data = reference.lookup(c.key)  # type: ignore[arg-type]
        on = reference.label(data, c.key) if figures is not None else "no stored run"
    if figures is None:
        return c.claim, c.source, "not measured", on, "untested"
    verdict = None if c.holds is None else c.holds(figures)
    verdict = None if verdict is None else bool(verdict)  # numpy's bool_, a count: a truth value
    word = {True: "holds", False: "does not hold", None: "see note"}[verdict]
    if c.note:
        word = f"{word}: {c.note}"
    return c.claim, c.source, c.show(figures), on, word


def markdown(items: list[Claim]) -> str:
    """The claims as one Markdown table."""
    lines = ["| Claim | Source | Our measurement | On | Verdict |", "|---|---|---|---|---|"]
    lines += ["| " + " | ".join(_cell(t) for t in row(c)) + " |" for c in items]
    return "\n".join(lines)


def claims(items: list[Claim]) -> Any:
    """Display the claims table in a notebook (Markdown), or return its text outside IPython."""
    text = markdown(items)
    try:
        from IPython.display import Markdown
    except ImportError:  # pragma: no cover - the course always has IPython
        return text
    return Markdown(text)
