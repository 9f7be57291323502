"""A solution notebook read as a grading plan: exercises, tests and their points (instructors).

The solution notebook is the one source. In it:

- an *exercise* is a code cell with `### BEGIN SOLUTION` / `### END SOLUTION`;
  the names its top-level code binds (functions, kernels, classes,
  variables) are what the exercise asks for;
- a *test* is a code cell with `### BEGIN HIDDEN TESTS` / `### END HIDDEN TESTS`
  and a line `# POINTS: n` (its points, declared once, in cell text); it
  tests the exercise above it;
- every other code cell is *context* (the setup cell, imports, helpers).

`nbgrader_source()` turns the same notebook into an nbgrader source
notebook: nbgrader's cell metadata is generated from these text markers,
never maintained by hand.
"""

from __future__ import annotations

import ast
import copy
import re
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from cudalearn.course import labs

POINTS = re.compile(r"^[ \t]*#[ \t]*POINTS:[ \t]*(\d+(?:\.\d+)?)[ \t]*$", re.M)


class LabError(ValueError):
    """A solution notebook cannot be graded as it is: what to fix is in the message (instructors)."""


@dataclass(frozen=True)
class Cell:
    """One cell of the solution notebook and its role in grading."""

    index: int
    cell_type: str
    role: str  # "context" | "answer" | "test" | "markdown"
    source: str  # the instructor's text (with solutions and hidden tests)
    student_source: str  # the lab's text (what a student starts from)
    cell_id: str | None = None
    exercise: int | None = None
    test_id: str | None = None
    points: float = 0.0


@dataclass(frozen=True)
class Exercise:
    """An exercise: its number (from 1), the names it must define, its cell and the lab's stub."""

    number: int
    names: tuple[str, ...]
    cell: Cell


@dataclass(frozen=True)
class Test:
    """A test cell: its id, the exercise it tests and its points."""

    test_id: str
    exercise: int
    points: float
    cell: Cell


@dataclass
class Lab:
    """A solution notebook read as a grading plan."""

    path: Path
    name: str
    cells: list[Cell]
    exercises: list[Exercise] = field(default_factory=list)
    tests: list[Test] = field(default_factory=list)

    @property
    def max_points(self) -> float:
        """The total of the tests' points."""
        return sum(t.points for t in self.tests)


def bound_names(source: str) -> list[str]:
    """The names a cell's top-level code binds, in order: defs, classes, assignments (not imports)."""
    tree = ast.parse(source)
    names: list[str] = []

    def targets(node: ast.AST) -> None:
        if isinstance(node, ast.Name):
            names.append(node.id)
        elif isinstance(node, (ast.Tuple, ast.List)):
            for elt in node.elts:
                targets(elt)
        elif isinstance(node, ast.Starred):
            targets(node.value)

    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(stmt.name)
        elif isinstance(stmt, ast.Assign):
            for t in stmt.targets:
                targets(t)
        elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
            targets(stmt.target)
    return list(dict.fromkeys(names))


def _function_names(source: str) -> list[str]:
    """The functions and classes a cell defines at top level (what a test id is named after)."""
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return [s.name for s in ast.parse(source).body if isinstance(s, kinds)]


def load(path: Path | str) -> Lab:
    """Read a solution notebook as a grading plan; raise LabError with the fix when it is not gradable."""
    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    if not labs.has_markers(nb):
        raise LabError(f"{path}: no '{labs.BEGIN_SOLUTION}' marker: this is not a solution notebook")
    lab = Lab(path=path, name=path.stem, cells=[])
    used_ids: dict[str, int] = {}
    for i, c in enumerate(nb.cells):
        where = f"{path.name} cell {i}"
        cid = c.get("id")
        if c.cell_type != "code":
            student = labs.strip_markdown(c.source) if c.cell_type == "markdown" else c.source
            lab.cells.append(Cell(i, c.cell_type, "markdown", c.source, student, cid))
            continue
        has_solution = labs.BEGIN_SOLUTION in c.source
        has_hidden = labs.BEGIN_HIDDEN in c.source
        student = labs.strip_code(c.source, where)
        if has_solution and has_hidden:
            raise LabError(
                f"{where}: a cell has both a solution and hidden tests; put the test in the next cell"
            )
        if has_solution:
            try:
                names = tuple(bound_names(c.source))
            except SyntaxError as e:
                raise LabError(f"{where}: the solution does not parse: {e}") from None
            if not names:
                raise LabError(f"{where}: the exercise cell defines no name the tests could use")
            cell = Cell(i, "code", "answer", c.source, student, cid, exercise=len(lab.exercises) + 1)
            lab.exercises.append(Exercise(cell.exercise, names, cell))
            lab.cells.append(cell)
        elif has_hidden:
            found = POINTS.findall(c.source)
            if len(found) != 1:
                raise LabError(
                    f"{where}: a test cell must declare its points once, in a line `# POINTS: 2` "
                    f"(found {len(found)})"
                )
            if not lab.exercises:
                raise LabError(f"{where}: hidden tests come before any exercise cell")
            ex = lab.exercises[-1]
            base = "test_" + "_".join(_function_names(ex.cell.source) or ex.names)[:60]
            used_ids[base] = used_ids.get(base, 0) + 1
            test_id = base if used_ids[base] == 1 else f"{base}_{used_ids[base]}"
            cell = Cell(i, "code", "test", c.source, student, cid, ex.number, test_id, float(found[0]))
            lab.tests.append(Test(test_id, ex.number, cell.points, cell))
            lab.cells.append(cell)
        else:
            lab.cells.append(Cell(i, "code", "context", c.source, student, cid))
    if not lab.tests:
        raise LabError(f"{path}: no test cell with '{labs.BEGIN_HIDDEN}': nothing to grade")
    return lab


def nbgrader_source(path: Path | str) -> nbformat.NotebookNode:
    """The solution notebook with nbgrader metadata generated from its text markers (instructors).

    Exercise cells become solution cells, test cells autograded test cells
    with their `# POINTS:` and every other cell read-only, so that
    `nbgrader generate_assignment` and `nbgrader autograde` treat the lab as
    `cudalearn grade` does.
    """
    lab = load(path)
    nb = nbformat.read(lab.path, as_version=4)
    labs.clean(nb)
    for cell, plan in zip(nb.cells, lab.cells, strict=True):
        meta = {"schema_version": 3, "grade": False, "locked": False, "solution": False, "task": False}
        if plan.role == "answer":
            names = _function_names(plan.source) or lab.exercises[plan.exercise - 1].names
            meta.update(solution=True, grade_id="answer_" + "_".join(names)[:60])
        elif plan.role == "test":
            meta.update(grade=True, locked=True, grade_id=plan.test_id, points=plan.points)
        elif plan.role == "markdown" and labs.BEGIN_SOLUTION in plan.source:
            meta.update(solution=True, grade_id=f"answer_text_{plan.index}")
        else:
            meta.update(locked=True, grade_id=f"cell_{plan.index}")
        cell.metadata["nbgrader"] = copy.deepcopy(meta)
    return nb
