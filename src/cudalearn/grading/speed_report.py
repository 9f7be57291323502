"""Speed verdicts in the grade table, the feedback files and the opt-in leaderboard (instructors, labs 2-10).

The table gets three columns per speed-graded test (ratio, points, status:
"timed", "refused", "not timed", "drifted" or "needs a GPU" under the
simulator, never a time there); the feedback says the times, the tier
reached and the next one, and the tracer's hint; `cudalearn grade
--leaderboard` keeps OUT/LAB-leaderboard.csv, each student's best ratio per
test over the runs written into it.
"""

from __future__ import annotations

import csv
from pathlib import Path

from cudalearn.grading import lab as lab_mod
from cudalearn.grading.results import Result
from cudalearn.grading.speed import NEEDS_GPU, declarations

LEADERBOARD_HEAD = ["student", "test", "ratio", "speed points", "ms", "reference ms", "device"]


def speed_tests(lab: lab_mod.Lab) -> set[str]:
    """The ids of the lab's tests that carry speed points."""
    return set(declarations(lab))


def speed_cells(speed: dict | None) -> list[str]:
    """The table's (ratio, points, status) of one test's speed verdict."""
    if not speed:
        return ["", "", "not timed"]
    ratio = f"{speed['ratio']:.3g}" if speed.get("status") == "timed" else ""
    points = "" if speed.get("status") == NEEDS_GPU else f"{speed.get('points', 0.0):g}"
    return [ratio, points, speed.get("status", "")]


def speed_feedback(speed: dict) -> str:
    """The feedback paragraph of one test's speed verdict."""
    status = speed.get("status", "")
    if status == NEEDS_GPU:
        head = f"Speed ({NEEDS_GPU}, up to {speed['max']:g} point{'s' if speed['max'] != 1 else ''})"
    else:
        head = f"Speed: {speed.get('points', 0.0):g}/{speed['max']:g} points ({status})"
    text = f"{head}: {speed.get('message', '')}"
    if speed.get("device"):
        text += f" Timed on {speed['device']}"
        if "spread" in speed:
            text += f", your fastest and slowest runs {100 * speed['spread']:.1f} % of the median apart"
        if "reference_before_ms" in speed:
            text += (
                f"; the reference took {speed['reference_before_ms']:.4g} ms before your kernel and "
                f"{speed['reference_after_ms']:.4g} ms after"
            )
        text += "."
    if str(speed.get("l2", "")).startswith("not reset"):
        text += f" Persisting L2 lines: {speed['l2']}."
    if speed.get("hint"):
        text += f" {speed['hint']}"
    return text


def leaderboard_rows(path: Path, results: list[Result]) -> list[list[str]]:
    """The leaderboard at `path` merged with `results`: each student's best ratio per test, best first."""
    best: dict[tuple[str, str], list[str]] = {}
    if path.exists():
        with open(path, newline="", encoding="utf-8") as f:
            for row in list(csv.reader(f))[1:]:
                if len(row) == len(LEADERBOARD_HEAD):
                    best[(row[0].removeprefix("'"), row[1])] = row
    for r in results:
        for t in r.tests:
            s = t.speed or {}
            if s.get("status") != "timed":
                continue
            row = [
                r.student,
                t.test_id,
                f"{s['ratio']:.4g}",
                f"{s['points']:g}",
                f"{s['ms']:.4g}",
                f"{s['reference_ms']:.4g}",
                s.get("device", ""),
            ]
            old = best.get((r.student, t.test_id))
            if old is None or float(old[2]) < s["ratio"]:
                best[(r.student, t.test_id)] = row
    return [LEADERBOARD_HEAD] + sorted(best.values(), key=lambda row: (row[1], -float(row[2]), row[0]))
