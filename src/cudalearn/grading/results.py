"""One submission's grade: each test's points, status and message, the student's row (instructors)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from cudalearn.grading import lab as lab_mod

STATUSES = ("passed", "failed", "error", "timeout", "crashed", "memory")


@dataclass
class TestResult:
    """One test's outcome for one student: points, status and the check's own message."""

    test_id: str
    exercise: int
    points: float
    max_points: float
    status: str
    message: str = ""
    output: str = ""
    speed: dict | None = None  # the speed verdict of a test with `# SPEED:` points (grading.speed)


@dataclass
class Result:
    """One submission's grade: the tests, notes on how it was read, and how it was isolated."""

    student: str
    lab: str
    path: Path
    tests: list[TestResult]
    notes: list[str] = field(default_factory=list)
    isolation: dict = field(default_factory=dict)
    grader_error: str = ""
    same_as: list[str] = field(default_factory=list)  # students whose answers are identical

    @property
    def total(self) -> float:
        return sum(t.points + (t.speed or {}).get("points", 0.0) for t in self.tests)

    @property
    def max_total(self) -> float:
        """The tests' points and their speed points, but those that needed a GPU this run did not have."""
        speed = [t.speed for t in self.tests if t.speed and t.speed.get("status") != "needs a GPU"]
        return sum(t.max_points for t in self.tests) + sum(s["max"] for s in speed)


def from_judge(t: dict) -> TestResult:
    """A test's result as the judge sent it (a `{"test": ...}` line or its final result)."""
    return TestResult(
        t["id"],
        t["exercise"],
        float(t["points"]),
        float(t["max"]),
        t["status"],
        t["message"],
        t.get("output", ""),
        t.get("speed") if isinstance(t.get("speed"), dict) else None,
    )


def all_errors(lab: lab_mod.Lab, student: str, path: Path, message: str, **fields) -> Result:
    """A row where every test of `lab` is an error with `message` (an unreadable notebook, a grader bug)."""
    tests = [TestResult(t.test_id, t.exercise, 0.0, t.points, "error", message) for t in lab.tests]
    return Result(student, lab.name, path, tests, **fields)
