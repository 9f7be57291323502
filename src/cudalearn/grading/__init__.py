"""Instructor grading: `cudalearn grade LAB SUBMISSION...` (all labs).

    cudalearn grade 02 submissions/            # one subfolder (or one notebook) per student
    cudalearn grade solutions/02-first-kernels.ipynb alice.ipynb bob.ipynb --out grades
    cudalearn grade 02 --nbgrader-source course/   # the lab as an nbgrader source notebook

writes `grades/LAB.csv` (student, lab, each test's points and status,
total, the students whose answers are identical, the feedback file) and
`grades/feedback/LAB/STUDENT.md` (each test: passed, or the check's own
message saying why not). Run as root, student code runs as `nobody`
(`--user NAME` for another user, `--user root` to keep root with its
capabilities dropped).

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

The modules, by process:

- grader: `grader` (the run and `cudalearn grade`), `lab` (the solution
  notebook as a plan), `submissions` (the submitted files, read once),
  `match` (the answer cells in a submission), `limits` (the limits, the
  student's OS user, what this machine enforces), `watch` (each judge held
  to its deadline from outside), `results`, `report` (the grade table and
  feedback files, written as each grade arrives), `speed_report` (the
  speed columns, feedback and leaderboard), `bench` (`cudalearn bench`, the
  student's side of the speed harness);
- judge: `judge` (the cells and tests), `channel` (its end of the pipe),
  `remote` (handles on the student's objects), `errors`, `blame` (the other
  exercise a failing test may fail on account of), `speed` (speed points:
  the rebuilt kernel timed against the solution's), `rebuild` (a
  kernel rebuilt from its verified syntax tree, for the tracer), with
  `kernel_check` (the verifier of that tree), `kernel_subset` (the CUDA
  subset it allows) and `kernel_imports` (what an answer cell's imports
  bind: the judge's own modules);
- sandbox: `sandbox` (the entry point), `confinement`, `namespaces`,
  `landlock`, `server` (the requests);
- shared: `wire` (the data-only protocol), `process` (starting and ending
  the student's process, cgroups), `cells` (a cell run as in a notebook),
  `linux` (libc).

The judge never executes a line of student code. Each name an exercise
asks for is bound in the judge to a handle (`remote.Remote`) on the object
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
`cudalearn.runtime.counting` and device arrays get `cudalearn.checks.guard`'s zones, in a
notebook and in the sandbox alike.

Threat model: what is defended
------------------------------
A submission is hostile code. Whatever it does in its own process, by
design it cannot change a verdict:

- what is submitted: each notebook is read once, opened without following
  links or blocking, as a regular file of at most 64 MiB; a symbolic link
  (to the solution or a classmate's notebook), a named pipe, a device or a
  larger file gets a row of errors saying why, and every other student is
  graded all the same (any failure on one notebook is that student's
  row). Names map to distinct, safe feedback files; identical answers (or
  identical files, or the solution notebook itself) are listed per student;
- work in the grader, outside every limit: finding the answer cells
  (`match`) is done once per submission and costs time bounded by the
  notebook's size: a cell over 100,000 characters is found by its cell id
  only, at most 2,000,000 characters of code are searched by names and
  resemblance, and difflib's full comparison runs only for the 32 cells
  closest to a stub by its linear upper bound (a 900,000-character cell or
  a 64 MiB notebook costs seconds); the feedback names the cells not
  searched;
- the report: each student's row and feedback file are written as soon
  as their grade is known (the table is rewritten in order at the end), so
  a failure later loses nothing graded; a folder name with bytes that are
  not UTF-8 or a message with a lone surrogate is escaped (\\xNN,
  \\udNNN), and a CSV cell starting with =, +, -, @, TAB or CR gets a quote
  (`report._cell`, the one rule); the exit code is 1 only for the grader's
  own failures (a judge that crashed, a file it could not write);

- code in the judge: the judge never runs a line of student code except a
  kernel's syntax tree that `rebuild` verified (`kernel_check`: pure
  arithmetic on arrays; no attribute stores, no writes to globals, which
  reach it as read-only copies); the tracer instruments that tree itself and
  never re-reads source text a student controls (`inspect`'s scan for a
  `def` line can be steered); the judge's own work for one test stops at the
  notebook limit and costs only that test (its alarm, for Python code);
  hidden tests that read a student's code get the answer cells the judge
  holds (`checks.student_sources`), never the source of an object the
  student returns;
- deadlines, from outside the process they limit: the judge holds the
  student's process to each cell's and the notebook's limit and kills its
  tree when one passes; the grader holds each judge to the notebook's
  limit (`watch`: from the judge's clock line, plus 10 s), so a judge
  stuck in one call its alarm cannot stop (a C loop over a size a
  student's code returned, a regular expression that backtracks) is
  killed with its whole tree (session, cgroup, compile worker): the tests
  it had finished keep their points, the test it was running and the rest
  are timeouts that say so, and its temporary folders and its sandboxes'
  (one folder per notebook, made by the grader) are removed;
- monkeypatching the check functions, numpy, `cudalearn` or builtins, in an
  answer cell or inside a function the check calls: the patches land in the
  sandbox, and the checks run in the judge;
- returning an object that lies (an `__eq__` that is always True, an ndarray
  subclass): only plain data crosses, rebuilt as builtin types;
- forging results: the verdict is the judge's exception or its absence;
  the sandbox's output is never parsed; anything it writes on the channel
  is treated as data or as a protocol error that fails its own test;
- a kernel that shows the tracer one path and runs another, or that the
  tracer or the compiler cannot check: the intrinsics a kernel can branch
  on compute a GPU's values (`runtime.intrinsics`, numba-cuda's typing and
  lowering: `cuda.popc`, `clz`, `brev`, `ffs`, `fma`, `cbrt`, `selp`, the
  atomics' old values and NaN rules, `max`/`min` of two floats (fmaxf
  drops a NaN), int32 `threadIdx`, `blockIdx`, `blockDim`, `gridDim`,
  `laneid`, `warpsize`) in the tracer and in the simulator of every
  process (`runtime.simintrinsics`, the sandbox's included), whose local
  arrays start as the tracer's (NaN, 0); a slice store is traced element
  by element; a race check the tracer cannot run (a call it does not
  model, a kernel the judge cannot rebuild: a `def` inside a block, a name
  bound twice, a decorator it does not know) and a compile check that
  cannot compile (no rebuilt function, a compile worker that times out or
  dies, a compiler crash: `compile.ptx.require`) fail their test saying
  what could not be checked and why, in sim and gpu mode alike. Not
  matched, where Python's arithmetic differs from Numba's typed code (the
  tracer and the simulator agree with each other, not with a GPU): NumPy's
  scalar promotion (int32 * int32 stays int32; float32 times a Python
  float stays float32, which the float32-only compile check refuses
  anyway), Python ints that never wrap at 64 bits, which zero `max`/`min`
  return (unmodelled), `int()` of a NaN (Python raises) or past int64 (a GPU
  saturates), `a * b + c` that the GPU's compiler fuses into one fma,
  `math.*` of a float32 in float64 and from the CPU's libm (Numba:
  float32, libdevice), an uninitialized local array (garbage on a GPU).
  Under the simulator none of these can show the race check another path
  than the one that ran; graded on a GPU, a kernel built to branch on one
  can;
- endless loops, crashes (`os._exit`, `kill -9` on itself, a segfault),
  huge allocations: a per-cell and a per-notebook wall-clock limit, a
  CPU-time limit, RLIMIT_DATA for memory and RLIMIT_FSIZE for files; the
  test that was running gets 0 with a message saying which limit, the
  judge restarts the sandbox, replays the context and the answers that
  did not crash, and grades the remaining tests;
- one student slowing another: where the kernel has a cpu controller
  (cgroup v2's, or v1's cpu hierarchy), each notebook's group (its judge,
  compile worker and every student process) may use at most cores / `-j`
  cores (at least one: cpu.max, or v1's CFS quota) and has the same
  weight as the others; student processes run at nice 10, below the
  judges. A thread the student's code leaves running when any request
  returns (a cell, a call, a `__repr__`) cannot be ended alone, so its
  process ends: the request fails saying so, and the next one starts a
  fresh process (Python threads always; every OS thread under the
  simulator); processes it leaves are killed after every request. The
  judge's own work (a compile, a trace, starting and replaying a fresh
  process) counts against the notebook's limit, never a cell's;
- a failing test on another exercise's account: when an answer uses a
  name (directly or through helpers) that the cell of an exercise already
  found broken defines (its cell raised, a test of it failed), the test's
  feedback names that exercise and the name (`blame`);
- limits for the whole process tree: where the grader can make cgroups
  (v2, or v1's memory, pids and freezer: as root on most Linux machines)
  each judge and its sandboxes share a group, and each sandbox has its own
  memory limit (every process together, shared mappings and tmpfs files
  included; no swap) and 2048 processes and threads; the group is emptied
  when the judge ends, and the judge has a memory limit of its own (at
  least 4 GiB) besides RLIMIT_DATA and the grader's deadline; replies on
  the channel are at most 256 MiB;
- processes it leaves: where the kernel allows namespaces (as root, or
  through a user namespace), the sandbox lives in its own PID, mount and
  IPC namespaces: when its process ends, the namespace's init ends and the
  kernel kills every process in it (setsid, double forks, re-forking
  orphans); System V shared memory vanishes with it; /proc shows only its
  own processes;
- writing files: the sandbox runs in an empty temporary folder (its HOME
  too), deleted afterwards; with namespaces that folder, /tmp, /var/tmp and
  /dev/shm are fresh tmpfs mounts of bounded size that vanish with it;
  with Landlock it cannot write anywhere else;
- reading the hidden tests or solutions: the sandbox receives only the
  lab's visible cells and the student's own code; its command line,
  environment and folder hold no path to them. The judge and the grader
  are made non-dumpable (no ptrace or /proc/PID/mem by the same user).
  As an unprivileged user (the default when grading as root) it cannot
  read root's files (/etc/shadow); a Python under a folder that user
  cannot enter (a pyenv in /root) is shown to it alone, through a tmpfs
  laid over that folder in its mount namespace.
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

- speed points (`# SPEED:`, `speed`): the student's process never holds the
  timer. After a test with speed points passes, the judge ends the student's
  process (none of its GPU work overlaps the clock), rebuilds the kernel from
  its verified tree (`rebuild`), compiles and launches it itself on its own
  stream between CUDA events, behind a gate kernel so the host's launch time
  is not counted (`measure.bench`). Every run gets fresh random inputs and a
  fresh random output between guard zones, after an L2 flush (a write twice
  the L2's size) and a reset of persisting L2 lines; every run's output,
  inputs and guard zones are checked, and one more run after the loop. A
  time below what the bytes and FLOPs allow at the GPU's peaks is refused,
  and so is a launch past 2 s. Timing holds one lock file per grade run, so
  with `-j` notebooks are timed one at a time; the solution's kernel is
  timed before and after each student's, and a drift over 15 % (twice)
  gives no verdict rather than a wrong one. A kernel past the limit keeps
  the lock until its judge ends, which it does at once: the rest of that
  notebook's tests are reported as not run, and the driver ends the kernel
  with the judge's context, so the next notebook is timed within seconds.
  A state kept between calls, an output left from a warm-up, work skipped at
  the timed size, stores outside the output or into the inputs all fail a
  timed run's check: zero speed points, the cause in the feedback. The
  timed sizes leave threads past the output's last element or row in the
  last block, so a store past it at that size reaches a guard zone.
  Other streams and sleeps are out of reach: the host code is not timed
  and the sandbox is ended first. A thread left launching kernels to slow
  the reference is ended with its process when its cell returns (above:
  the cell fails, so that exercise's test and its speed points do too);
  any GPU work the student's process still has queued ends with that
  process, which the judge ends before it times anything.

Limits: what is not defended
----------------------------
- Speed: with `-j`, other notebooks' correctness tests (in their sandboxes)
  share the GPU while one notebook is timed; the reference's drift check
  shows such a disturbance and then no verdict is given, but a disturbance
  that slows the reference and the student's kernel alike goes unseen. A
  judge waits for the timing lock up to 30 s before its own deadline, then
  says "not timed" (too many notebooks at once for the time limit).
  Without cuda-bindings the persisting-L2 reset is skipped (the feedback
  says so).
- Without Landlock (another OS, an old kernel, `--no-landlock`), the student
  process can read any file its user can: as a non-root grader that is the
  grader's user, the solutions included. Then grade as root (student code
  runs as `nobody`) or in a container that holds only the submissions.
- Without cgroups (a non-root grader, most containers) memory is limited
  per process (RLIMIT_DATA, which does not count shared mappings) and the
  process count is not limited; without namespaces, processes are ended by
  process group and as orphans re-parented to the judge (a process that
  escapes both survives, and so does one whose judge was killed from
  outside), /dev/shm is closed to it, and the files it writes are limited
  per file, not in total. Without a cpu controller, CPU is shared per
  process: each student process has a CPU-time limit (RLIMIT_CPU) and nice
  10, but a notebook with many busy processes (up to its process limit,
  while one of its cells runs) takes more of the machine than its
  neighbours. The grader warns and says so in each student's feedback
  notes.
- On a GPU, where the CUDA driver starts threads of its own, only Python
  threads are looked for between requests: a thread started in C (through
  ctypes) without Python survives until the process ends (before any
  timing, so it cannot slow a timed kernel).
- A judge killed from outside at the notebook's deadline does not run the
  tests after the one it was running: they are timeouts.
- Resemblance is the last way to find an answer: with more than 32 cells
  about as close to a stub, the closest by difflib's upper bound are
  compared, not every one.
- The course's own package is importable in the sandbox: a student can call
  the reference kernels in `cudalearn.chapters` instead of writing theirs.
  That is an honesty question, not an isolation one.
- Checks that watch *how* the student's code works rather than what it
  returns get stand-ins: the memory tracer (labs 3-5) gets the kernel
  rebuilt in the judge from the answer cell's source, only after a check
  that it stays in the CUDA subset (`rebuild`, `kernel_check`; otherwise the
  test fails and says why); launch and host-copy counters (labs 0 and 5) see the
  launches and copies the student's process reports, replayed in the judge.
  A student who deliberately tampers with their own process (rebinding the
  exercise's name to another kernel at run time, patching the sandbox's
  counters) can make these *how* checks see something other than what ran.
  Checks of values cannot be fooled that way. An experiment runs the
  course's code in the student's process, so a student who patches that code
  there can make it report other data; the data must still agree with the
  judge's own reference computation.
- Values cross by copy: a hidden test cannot rely on object identity or on
  an autograd graph of a tensor the student's code returned (an experiment
  does that part where the graph lives).
- Student code can use the network over UDP, and over TCP without Landlock
  ABI 4 (no network namespace: a lab may need the loopback).
- Identical answers are found by exact content only; a copy with renamed
  variables is not flagged.
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

_WHERE = {  # the module of each name above (the rest: grader)
    "load": "lab",
    "nbgrader_source": "lab",
    "LabError": "lab",
    "Limits": "limits",
    "Result": "results",
    "TestResult": "results",
}


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
    p.add_argument(
        "--user",
        help="run student code as this OS user (the grader must run as root; default as root: nobody; "
        "'root' keeps root with its capabilities dropped)",
    )
    p.add_argument(
        "--leaderboard",
        action="store_true",
        help="also keep OUT/LAB-leaderboard.csv: each student's best speed ratio per speed-graded test",
    )
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
    # It dies with the process that started it (PR_SET_PDEATHSIG): a grader killed mid-class leaves no judge.
    die = "sys.platform.startswith('linux') and __import__('ctypes').CDLL(None).prctl(1, 9, 0, 0, 0)"
    boot = (
        f"import sys; {die}; sys.path[:0] = {paths!r}; import runpy; "
        f"runpy.run_module({module!r}, run_name='__main__', alter_sys=True)"
    )
    return [sys.executable, "-I", "-B", "-c", boot, *args]


def __getattr__(name: str):
    """Import on first use: the judge and sandbox processes import this package and must start fast."""
    if name not in __all__ or name == "add_arguments":
        raise AttributeError(f"module 'cudalearn.grading' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"cudalearn.grading.{_WHERE.get(name, 'grader')}"), name)
