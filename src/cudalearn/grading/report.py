"""The grade table OUT/LAB.csv and one feedback file per student, names that cannot collide (instructors)."""

from __future__ import annotations

import csv
import re
from pathlib import Path

from cudalearn.grading import lab as lab_mod
from cudalearn.grading.results import Result


def _cell(text: str) -> str:
    """A CSV cell that a spreadsheet will not read as a formula."""
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text


def safe_name(name: str) -> str:
    """A file name for a student (letters, digits, '.', '-', '_'; at most 100 characters)."""
    return re.sub(r"[^\w.-]+", "_", name).strip("._")[:100] or "student"


def feedback_names(students: list[str]) -> dict[str, str]:
    """A distinct, safe feedback file stem per student: names that map to one file get -2, -3, ...

    Distinct regardless of case too, so that no two files collide on a case-insensitive disk.
    """
    taken: set[str] = set()
    names = {}
    for student in sorted(set(students)):
        stem, n = safe_name(student), 1
        while (candidate := stem if n == 1 else f"{stem}-{n}").lower() in taken:
            n += 1
        taken.add(candidate.lower())
        names[student] = candidate
    return names


def write(lab: lab_mod.Lab, results: list[Result], out: Path) -> None:
    """Write the grade table OUT/LAB.csv and one feedback file per student."""
    out.mkdir(parents=True, exist_ok=True)
    files = feedback_names([r.student for r in results])
    with open(out / f"{lab.name}.csv", "w", newline="") as f:
        w = csv.writer(f)
        head = ["student", "lab"]
        for t in lab.tests:
            head += [f"{t.test_id} points", f"{t.test_id} status"]
        w.writerow(head + ["total", "max", "notebook", "identical to", "feedback"])
        for r in results:
            row = [_cell(r.student), r.lab]
            for t in r.tests:
                row += [f"{t.points:g}", t.status]
            same = _cell(" ".join(r.same_as))
            row += [f"{r.total:g}", f"{r.max_total:g}", _cell(str(r.path)), same, f"{files[r.student]}.md"]
            w.writerow(row)
    fb = out / "feedback" / lab.name
    fb.mkdir(parents=True, exist_ok=True)
    for r in results:
        (fb / f"{files[r.student]}.md").write_text(feedback(r))


def feedback(r: Result) -> str:
    """The feedback a student reads: each test, passed or why not, in the checks' own words."""
    lines = [f"# {r.lab}: feedback for {r.student}", "", f"Total: {r.total:g} of {r.max_total:g} points.", ""]
    for t in r.tests:
        pts = f"{t.points:g}/{t.max_points:g} point{'s' if t.max_points != 1 else ''}"
        lines.append(f"## {t.test_id} (exercise {t.exercise}): {t.status}, {pts}")
        if t.message:
            lines += ["", t.message]
        if t.output:
            lines += [
                "",
                "The last lines your code printed before its process died:",
                "",
                "```",
                t.output,
                "```",
            ]
        lines.append("")
    if r.notes:
        lines += ["## Notes", ""] + [f"- {n}" for n in r.notes] + [""]
    return "\n".join(lines)
