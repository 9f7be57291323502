"""Instructor grading: `cudalearn grade LAB SUBMISSION...` (all labs).

    cudalearn grade 02 submissions/            # one subfolder (or one notebook) per student
    cudalearn grade solutions/02-first-kernels.ipynb alice.ipynb bob.ipynb --out grades
    cudalearn grade 02 --nbgrader-source course/   # the lab as an nbgrader source notebook

writes `grades/LAB.csv` (student, lab, each test's points and status,
total) and `grades/feedback/LAB/STUDENT.md` (each test: passed, or the
check's own message saying why not).

How a submission is graded
--------------------------
The solution notebook is the only source (`lab`): exercise cells hold the
solution between `### BEGIN SOLUTION` / `### END SOLUTION`; test cells hold
the visible check, `# POINTS: n`, and hidden tests between
`### BEGIN HIDDEN TESTS` / `### END HIDDEN TESTS`. From a submission the
grader takes only the code of the student's answer cells (`match`), found
by cell id, by the names the exercise defines, or by resemblance; setup,
context, checks and hidden tests always come from the solution notebook.
So deleted, moved or duplicated cells, a renamed notebook, edited check
cells, forged outputs and printed "all tests passed" change nothing.

Three processes per submission:

    grader (instructor's process) ── job on a pipe ──> judge ── data-only pipe ──> sandbox
    parses the notebook as JSON,        runs the instructor's      runs the student's answer
    never runs student code             cells and hidden tests     cells, confined

The judge never executes a line of student code. Each name an exercise
asks for is bound in the judge to a handle (`judge.Remote`) on the object
in the sandbox: calling it, indexing it (`kernel[grid, block]`) or reading
an attribute sends a request, and only data comes back (`wire`: numbers,
strings, containers, numeric numpy arrays, device arrays and tensors as
copies; arrays a kernel wrote are copied back into the judge's arrays).
The checks, numpy and `cudalearn` that compute the verdict are the
judge's own, imported before any request and untouched by the student.

What the instructor's cells build (a network's config, a Conv2d) crosses
the other way, judge to sandbox, pickled, and is rebuilt there; nothing the
sandbox sends is ever unpickled. A check that needs the student's objects
live (a class to instantiate, a module to differentiate through) runs that
part as an *experiment* (`checks.student_side`): a function of the course's
package, run in the student's process, returning only data, from which the
judge computes the verdict. Kernel launches and host copies are counted by
`cudalearn.counting` and device arrays get `cudalearn.guard`'s zones, in a
notebook and in the sandbox alike.

Threat model: what is defended
------------------------------
A submission is hostile code. Whatever it does in its own process, by
design it cannot change a verdict:

- monkeypatching the check functions, numpy, `cudalearn` or builtins, in an
  answer cell or inside a function the check calls: the patches land in the
  sandbox, and the checks run in the judge;
- returning an object that lies (an `__eq__` that is always True, an ndarray
  subclass): only plain data crosses, rebuilt as builtin types;
- forging results: the verdict is the judge's exception or its absence;
  the sandbox's output is never parsed; anything it writes on the channel
  is treated as data or as a protocol error that fails its own test;
- endless loops, crashes (`os._exit`, `kill -9` on itself, a segfault),
  huge allocations: a per-cell and a per-notebook wall-clock limit, a
  CPU-time limit, RLIMIT_DATA for memory and RLIMIT_FSIZE for files; the
  test that was running gets 0 with a message saying which limit, the
  judge restarts the sandbox, replays the context and the answers that
  did not crash, and grades the remaining tests;
- writing files: the sandbox runs in an empty temporary folder (its HOME
  too), deleted afterwards; with Landlock it cannot write anywhere else;
- reading the hidden tests or solutions: the sandbox receives only the
  lab's visible cells and the student's own code; its command line,
  environment and folder hold no path to them. The judge and the grader
  are made non-dumpable (no ptrace or /proc/PID/mem by the same user).
  With Landlock (Linux 5.13+, used when the kernel has it) the sandbox can
  read only the Python installation, the imported packages and system
  folders (and /proc, where Landlock still denies other processes' memory
  and environment), write only its folder and its own /proc entries,
  cannot ptrace or (ABI 6+) signal processes outside it, and cannot open
  TCP connections (ABI 4+). As root it also drops every capability, so it
  cannot lift its limits or write kernel settings.
- on a GPU, out-of-bounds writes: a kernel's device-array arguments sit
  between guard zones of random bytes in the sandbox, as `checks.run_kernel`
  does in a notebook, so a missing bounds guard fails there too.

Limits: what is not defended
----------------------------
- Without Landlock (another OS, an old kernel, `--no-landlock`), the student
  process runs as the grader's user and can read any file that user can,
  the solutions included, and signal the grader. Then run the grader as
  root with `--user NAME` (student code runs as NAME) or in a container
  that holds only the submissions.
- The course's own package is importable in the sandbox: a student can call
  the reference kernels in `cudalearn.kernels` instead of writing theirs.
  That is an honesty question, not an isolation one.
- Checks that watch *how* the student's code works rather than what it
  returns get stand-ins: the memory tracer (labs 3-5) gets the kernel
  rebuilt in the judge from the answer cell's source, only after a check
  that it stays in the CUDA subset (`rebuild`; otherwise the test fails and
  says why); launch and host-copy counters (lab 5) see the launches and
  copies the student's process reports, replayed in the judge. A student
  who deliberately tampers with their own process (rebinding the
  exercise's name to another kernel at run time, patching the sandbox's
  counters) can make these *how* checks see something other than what ran.
  Checks of values cannot be fooled that way. An experiment runs the
  course's code in the student's process, so a student who patches that
  code there can make it report other data; the data must still agree with
  the judge's own reference computation.
- Values cross by copy: a hidden test cannot rely on object identity or on
  an autograd graph of a tensor the student's code returned (an experiment
  does that part where the graph lives).
- Student code can use the network over UDP, and over TCP without Landlock
  ABI 4. It can start processes; they are killed with the sandbox's
  process group, and orphans are reaped by the judge (a subreaper).
"""

import argparse
import os

__all__ = [
    "grade",
    "grade_one",
    "load",
    "nbgrader_source",
    "Limits",
    "Result",
    "TestResult",
    "LabError",
    "add_arguments",
    "command",
]

_WHERE = {"load": "lab", "nbgrader_source": "lab", "LabError": "lab"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The `cudalearn grade` options."""
    p.add_argument("lab", help="the lab: solutions/NN-name.ipynb, or its name or number (e.g. 02)")
    p.add_argument(
        "submissions", nargs="*", help="submitted notebooks, or folders of them (one subfolder per student)"
    )
    p.add_argument("--out", default="grades", help="where to write LAB.csv and feedback/ (default: grades)")
    p.add_argument("--timeout", type=float, default=600, help="seconds per notebook (default 600)")
    p.add_argument("--cell-timeout", type=float, default=120, help="seconds per cell or test (default 120)")
    p.add_argument("--memory", type=int, default=2048, help="MiB of memory per notebook (default 2048)")
    p.add_argument(
        "-j", "--jobs", type=int, default=max(1, (os.cpu_count() or 2) // 2), help="notebooks at once"
    )
    p.add_argument("--user", help="run student code as this OS user (the grader must run as root)")
    p.add_argument("--no-landlock", action="store_true", help="do not confine student code with Landlock")
    p.add_argument("--root", default=".", help="the course's root folder (default: here)")
    p.add_argument(
        "--nbgrader-source",
        metavar="COURSE",
        help="write the lab as an nbgrader source notebook under COURSE/source/",
    )


def python_command(module: str, *args: str) -> list[str]:
    """`python -I -B` running `module` from the very `cudalearn` this process imported (judge, sandbox).

    `-I` ignores PYTHONPATH and the current folder (a submission's folder must not shadow a module), so
    the folder holding the package and the grader's PYTHONPATH entries are put on sys.path explicitly:
    the judge and the sandbox find the course and its packages the way the grader did, installed or not.
    """
    import os
    import sys
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[2])
    extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if os.path.isabs(p)]
    paths = list(dict.fromkeys([root, *extra]))
    boot = (
        f"import sys; sys.path[:0] = {paths!r}; import runpy; "
        f"runpy.run_module({module!r}, run_name='__main__', alter_sys=True)"
    )
    return [sys.executable, "-I", "-B", "-c", boot, *args]


def __getattr__(name: str):
    """Import on first use: the judge and sandbox processes import this package and must start fast."""
    if name not in __all__ or name == "add_arguments":
        raise AttributeError(f"module 'cudalearn.grading' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"cudalearn.grading.{_WHERE.get(name, 'grader')}"), name)
