"""`cudalearn bench LAB` and `bench(kernel)`: your kernel against the reference, as graded (labs 2-10).

The same harness and the same rule as `cudalearn grade`'s speed points
(`measure.bench`, `course.speed_rules`), run on your GPU (Colab's T4
included): fresh inputs every run, the L2 flushed, every run checked. The
reference is the solution notebook's kernel, so this needs the course's
folder (its solutions/), as a clone of the course has it.

    cudalearn bench 02                      # every speed-graded kernel of labs/02-*.ipynb
    cudalearn bench 03 --exercise 2 --notebook my-lab3.ipynb

In a notebook, after the kernel's cell: `cudalearn.bench(matmul_tiled, "03")`. Under the simulator
nothing is timed: speed needs a GPU.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from cudalearn.grading import lab as lab_mod
from cudalearn.grading import speed
from cudalearn.grading.cells import notebook_namespace

SIMULATED = (
    "speed needs a GPU: this process runs the simulator, so nothing is timed (the simulator's time says "
    "nothing about a GPU). Run this on a GPU (Colab's T4 will do) to see your kernel against the reference."
)


def _lab(lab: str, root: str | Path) -> lab_mod.Lab:
    """The solution notebook of `lab` under the course folder `root`, read as a plan."""
    from cudalearn.grading.grader import resolve_lab

    if not Path(root, "solutions").is_dir():
        raise lab_mod.LabError(
            f"{root} has no solutions/ folder: the reference kernels are the solution notebooks' own, so "
            "run this in a clone of the course (or give its folder: --root, or root=)"
        )
    return lab_mod.load(resolve_lab(lab, root))


def _reference(plan: lab_mod.Lab, exercise: int, kernel: str, consts: tuple[str, ...]) -> tuple[Any, dict]:
    """The solution's kernel of `exercise` and its constants: the lab's context and answers run here."""
    ns, transform = notebook_namespace()
    ns = dict(ns)
    for cell in plan.cells:
        if cell.role == "context" or (cell.role == "answer" and cell.exercise <= exercise):
            exec(compile(transform(cell.source), f"<solution cell {cell.index}>", "exec"), ns)
    return ns[kernel], {name: ns[name] for name in consts}


def bench(kernel: Any, lab: str, root: str | Path | None = None, consts: dict | None = None) -> str:
    """Time `kernel` (your @cuda.jit kernel) against the solution's as the grader does; print and return it.

    `consts`: the launch constants (TILE, BLOCK...), read from your kernel's globals by default.
    """
    from cudalearn.course.speed_cases import case
    from cudalearn.runtime import device

    root = Path(root) if root is not None else Path(__file__).resolve().parents[3]
    plan = _lab(lab, root)
    name = getattr(getattr(kernel, "py_func", kernel), "__name__", str(kernel))
    found = [(t, s) for t, s in speed.declarations(plan).items() if s.kernel == name]
    if not found:
        raise ValueError(f"{plan.name} has no speed-graded kernel named {name!r}")
    test_id, spec = found[0]
    if device.mode() != "gpu":
        text = f"{name}: {SIMULATED}"
        print(text)
        return text
    names = case(spec.case).consts
    if consts is None:
        scope = getattr(getattr(kernel, "py_func", kernel), "__globals__", {})
        consts = {n: scope[n] for n in names}
    exercise = next(t.exercise for t in plan.tests if t.test_id == test_id)
    reference, ref_consts = _reference(plan, exercise, name, names)
    verdict = speed.time_pair(kernel, consts, reference, ref_consts, spec)
    text = f"{name}: {verdict['status']}: {verdict['message']}"
    if "device" in verdict:
        text += f" (on {verdict['device']})"
    print(text)
    return text


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The `cudalearn bench` options."""
    p.add_argument("lab", help="the lab: its number or name (e.g. 02)")
    p.add_argument("--exercise", type=int, help="only this exercise (its number in the lab, from 1)")
    p.add_argument("--notebook", type=Path, help="your lab notebook (default: labs/LAB-*.ipynb)")
    p.add_argument("--root", default=".", help="the course's folder, with solutions/ (default: here)")


def command(args: argparse.Namespace) -> int:
    """Run `cudalearn bench`: run your notebook's answers here, then time each speed-graded kernel."""
    import nbformat

    from cudalearn.grading.match import find_answers
    from cudalearn.runtime import device

    try:
        plan = _lab(args.lab, args.root)
        decls = speed.declarations(plan)
    except (lab_mod.LabError, OSError) as e:
        print(f"cudalearn bench: {e}")
        return 2
    tests = [t for t in plan.tests if t.test_id in decls and args.exercise in (None, t.exercise)]
    if not tests:
        print(
            f"cudalearn bench: {plan.name} has no speed-graded kernel"
            + (" in that exercise" * bool(args.exercise))
        )
        return 2
    if device.mode() != "gpu":
        for t in tests:
            print(f"{decls[t.test_id].kernel}: {SIMULATED}")
        return 0
    path = args.notebook or Path(args.root, "labs", plan.path.name)
    answers = {a.exercise: a.code for a in find_answers(plan, nbformat.read(path, as_version=4))}
    ns, transform = notebook_namespace()
    for cell in plan.cells:  # your notebook's code, on your machine, as the notebook runs it
        if cell.role == "context":
            exec(compile(transform(cell.student_source), f"<cell {cell.index}>", "exec"), ns)
        elif cell.role == "answer" and answers.get(cell.exercise):
            exec(compile(transform(answers[cell.exercise]), f"<exercise {cell.exercise}>", "exec"), ns)
    for t in tests:
        kernel = decls[t.test_id].kernel
        if kernel not in ns:
            print(f"{kernel}: not defined by your notebook {path}")
            continue
        bench(ns[kernel], args.lab, args.root)
    return 0
