"""Speed points of an exercise: the `# SPEED:` line of its test cell, its tiers and points (labs 2-10).

A test cell of a solution notebook declares speed points once, beside `# POINTS:`:

    # POINTS: 2
    # SPEED: points=2 case=vector_add tiers=0.5,0.8

`case` names the timing case (`speed_cases.CASES`: inputs, launch, bytes and
FLOPs); the kernel timed is the case's kernel name (`kernel=` to name another).
The reference is the solution notebook's own kernel of that exercise, timed
in the same run on the same GPU. The ratio is reference time / student time
(1: as fast as the reference); reaching tier i of n gives i/n of the points,
and between two tiers the points grow linearly, so partial points sit between
thresholds. One rule (`points_for`) for the grader and `cudalearn bench`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SPEED = re.compile(r"^[ \t]*#[ \t]*SPEED:(.*)$", re.M)


class SpeedDeclarationError(ValueError):
    """A `# SPEED:` line that cannot be graded: what to fix is in the message (instructors)."""


@dataclass(frozen=True)
class Speed:
    """A test's speed points: the timing case, the kernel's name, the points and the ratio thresholds."""

    case: str
    kernel: str
    points: float
    tiers: tuple[float, ...]

    def as_dict(self) -> dict:
        return {"case": self.case, "kernel": self.kernel, "points": self.points, "tiers": list(self.tiers)}


def parse(source: str, where: str = "the test cell") -> Speed | None:
    """The `# SPEED:` declaration in a test cell's text (None: none); SpeedDeclarationError if wrong."""
    from cudalearn.course.speed_cases import CASES

    found = SPEED.findall(source)
    if not found:
        return None
    if len(found) > 1:
        raise SpeedDeclarationError(
            f"{where}: declare speed points once (found {len(found)} `# SPEED:` lines)"
        )
    fields: dict[str, str] = {}
    for token in found[0].split():
        key, eq, value = token.partition("=")
        if not eq or key not in ("points", "case", "tiers", "kernel") or key in fields:
            raise SpeedDeclarationError(
                f"{where}: `{token}` in `# SPEED:{found[0]}`: write key=value for points, case, tiers, kernel"
            )
        fields[key] = value
    missing = [k for k in ("points", "case", "tiers") if k not in fields]
    if missing:
        raise SpeedDeclarationError(
            f"{where}: `# SPEED:` needs {', '.join(missing)} (e.g. points=2 case=vector_add tiers=0.5,0.8)"
        )
    if fields["case"] not in CASES:
        raise SpeedDeclarationError(
            f"{where}: no timing case {fields['case']!r} (known: {', '.join(sorted(CASES))})"
        )
    try:
        points = float(fields["points"])
        tiers = tuple(float(t) for t in fields["tiers"].split(","))
    except ValueError:
        raise SpeedDeclarationError(f"{where}: points and tiers are numbers (tiers=0.5,0.8)") from None
    if points <= 0 or not tiers or any(t <= 0 for t in tiers) or list(tiers) != sorted(set(tiers)):
        raise SpeedDeclarationError(f"{where}: points > 0 and tiers increasing and positive, got {fields}")
    return Speed(fields["case"], fields.get("kernel", fields["case"]), points, tiers)


def points_for(ratio: float, speed: Speed) -> tuple[float, int]:
    """(points, tiers reached) for `ratio` = reference time / student time; linear between tiers."""
    tiers, n = speed.tiers, len(speed.tiers)
    if not ratio > 0 or ratio < tiers[0]:
        return 0.0, 0
    if ratio >= tiers[-1]:
        return speed.points, n
    reached = max(i for i, t in enumerate(tiers) if ratio >= t) + 1
    lo, hi = tiers[reached - 1], tiers[reached]
    return round(speed.points * (reached + (ratio - lo) / (hi - lo)) / n, 2), reached


def describe(ratio: float, student_ms: float, reference_ms: float, speed: Speed) -> str:
    """The feedback line: the times, the ratio, the tier reached and the next one, in words."""
    pts, reached = points_for(ratio, speed)
    text = (
        f"your kernel: {student_ms:.4g} ms, the reference: {reference_ms:.4g} ms (ratio {ratio:.3g}: "
        f"reference time / yours); {pts:g} of {speed.points:g} speed points. "
    )
    if reached:
        text += f"Tier {reached} of {len(speed.tiers)} reached (ratio >= {speed.tiers[reached - 1]:g})"
    else:
        text += f"No tier reached (the first is ratio {speed.tiers[0]:g})"
    if reached < len(speed.tiers):
        nxt = speed.tiers[reached]
        text += f"; the next at ratio {nxt:g}, i.e. {reference_ms / nxt:.4g} ms or less."
    else:
        text += ": full speed points."
    return text
