"""The grade table OUT/LAB.csv and one feedback file per student, written as each grade arrives (instructors).

A student's row and feedback file are written the moment their grade is
known, so a failure later in the run loses nothing already graded; at the
end the table is rewritten in the students' order. Every text goes through
`printable` (a folder name with bytes that are not UTF-8, an exception
message with a lone surrogate) and every CSV cell through `_cell`, so the
writer cannot fail on what a submission put in a name or a message.
"""

from __future__ import annotations

import csv
import os
import re
import threading
from pathlib import Path

from cudalearn.grading import lab as lab_mod
from cudalearn.grading.results import Result
from cudalearn.grading.speed_report import leaderboard_rows, speed_cells, speed_feedback, speed_tests

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")  # what a spreadsheet may read as the start of a formula


def printable(text: str) -> str:
    """`text` as UTF-8 holds it: a name's undecodable bytes as \\xNN, other lone surrogates as \\udNNN."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _cell(value: object) -> str:
    """A CSV cell: printable, and quoted with ' where a spreadsheet would read a formula (the one rule)."""
    text = printable(str(value))
    return "'" + text if text.startswith(FORMULA_START) else text


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


class Report:
    """OUT/LAB.csv and OUT/feedback/LAB/, written row by row as grades arrive (`add`), in order at `close`.

    `failed` lists what could not be written (a full disk): the run's exit code says so.
    """

    def __init__(self, lab: lab_mod.Lab, students: list[str], out: Path) -> None:
        self.lab, self.order = lab, list(dict.fromkeys(students))
        self.files = feedback_names(self.order)
        self.speed = speed_tests(lab)
        self.csv = out / f"{lab.name}.csv"
        self.feedback_dir = out / "feedback" / lab.name
        self.feedback_dir.mkdir(parents=True, exist_ok=True)
        self.rows: dict[str, list[str]] = {}
        self.failed: list[str] = []
        self._lock = threading.Lock()
        self._file = open(self.csv, "w", newline="", encoding="utf-8")
        self._writer = csv.writer(self._file)
        self._writer.writerow(self._head())
        self._file.flush()

    def _head(self) -> list[str]:
        head = ["student", "lab"]
        for t in self.lab.tests:
            head += [f"{t.test_id} points", f"{t.test_id} status"]
            if t.test_id in self.speed:
                head += [f"{t.test_id} speed ratio", f"{t.test_id} speed points", f"{t.test_id} speed status"]
        return [_cell(h) for h in head + ["total", "max", "notebook", "identical to", "feedback"]]

    def _row(self, r: Result) -> list[str]:
        row: list[object] = [r.student, r.lab]
        for t in r.tests:
            row += [f"{t.points:g}", t.status]
            if t.test_id in self.speed:
                row += speed_cells(t.speed)
        if r.student not in self.files:  # a student not announced: a name no other file has
            taken, n = {v.lower() for v in self.files.values()}, 2
            while f"{safe_name(r.student)}-{n}".lower() in taken:
                n += 1
            self.files[r.student] = f"{safe_name(r.student)}-{n}"
        same, name = " ".join(r.same_as), f"{self.files[r.student]}.md"
        row += [f"{r.total:g}", f"{r.max_total:g}", r.path, same, name]
        return [_cell(v) for v in row]

    def add(self, r: Result) -> None:
        """Write one student's feedback file and row now (flushed): nothing graded is lost later."""
        with self._lock:
            row = self._row(r)
            self.rows[r.student] = row
            try:
                (self.feedback_dir / f"{self.files[r.student]}.md").write_text(feedback(r), encoding="utf-8")
                self._writer.writerow(row)
                self._file.flush()
            except OSError as e:
                self.failed.append(f"{printable(r.student)}: {e}")

    def close(self) -> None:
        """Rewrite the table in the students' order (the rows so far stay if this fails)."""
        with self._lock:
            self._file.close()
            order = [s for s in self.order if s in self.rows] + [s for s in self.rows if s not in self.order]
            part = self.csv.with_name(self.csv.name + ".part")
            try:
                with open(part, "w", newline="", encoding="utf-8") as f:
                    w = csv.writer(f)
                    w.writerow(self._head())
                    w.writerows(self.rows[s] for s in order)
                os.replace(part, self.csv)
            except OSError as e:
                self.failed.append(f"{self.csv}: {e}")


def write(lab: lab_mod.Lab, results: list[Result], out: Path) -> list[str]:
    """Write the grade table OUT/LAB.csv and one feedback file per student; what could not be written."""
    report = Report(lab, [r.student for r in results], out)
    for r in results:
        report.add(r)
    report.close()
    return report.failed


def write_leaderboard(path: Path, results: list[Result]) -> None:
    """Merge `results` into the opt-in leaderboard CSV at `path` (`cudalearn grade --leaderboard`)."""
    part = path.with_name(path.name + ".part")
    with open(part, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([_cell(v) for v in row] for row in leaderboard_rows(path, results))
    os.replace(part, path)


def feedback(r: Result) -> str:
    """The feedback a student reads: each test, passed or why not, in the checks' own words."""
    lines = [f"# {r.lab}: feedback for {r.student}", "", f"Total: {r.total:g} of {r.max_total:g} points.", ""]
    for t in r.tests:
        pts = f"{t.points:g}/{t.max_points:g} point{'s' if t.max_points != 1 else ''}"
        lines.append(f"## {t.test_id} (exercise {t.exercise}): {t.status}, {pts}")
        if t.message:
            lines += ["", t.message]
        if t.speed:
            lines += ["", speed_feedback(t.speed)]
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
    return printable("\n".join(lines))
