"""Hostile submissions graded beside honest ones: each gets its grade, and nothing leaks, changes or stays.

Issue 13's attack classes on intake (links, pipes, devices, huge files, the
solution itself, colliding names, copies) and on containment (setsid and
re-forking processes, /dev/shm, System V shared memory, shared mappings
and a process tree over the memory limit, a fork storm, an output flood,
root's files). Each case names the grade it must get; after grading, no
process of a submission may be running, no file it wrote may remain in
/tmp, /var/tmp or /dev/shm, and the honest controls keep their marks.
Cases that need root, cgroups or namespaces skip with the reason.
"""

import csv
import os
import stat
import sys
import time
import uuid
from pathlib import Path

import nbformat
import pytest

from cudalearn.grading import Limits, grade, process, sandbox
from cudalearn.grading.namespaces import probe_namespaces
from cudalearn.grading.report import feedback_names
from cudalearn.grading.submissions import find_submissions, read_submission

pytestmark = pytest.mark.grader

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "grading"))
import plants  # noqa: E402

LIMITS = Limits(timeout=120, cell_timeout=15, memory_mb=768)
ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
CGROUP = process.Cgroup.base() is not None
NAMESPACES = probe_namespaces()
TAG = f"hostile{uuid.uuid4().hex[:10]}"  # in every name and command line a case leaves: found if it stays
PASS = {"test_blocks_for": "passed", "test_scale": "passed"}
ZERO = {"test_blocks_for": "error", "test_scale": "error"}

needs_cgroup = pytest.mark.skipif(not CGROUP, reason="no writable cgroup (v2 memory+pids, or v1) here")
needs_root = pytest.mark.skipif(not ROOT, reason="the grader is not root: no other user to run as")


def _then_ok(code: str) -> str:
    """Exercise 1's cell: the hostile code at top level, then the right answer."""
    return code.replace("TAG", TAG) + "\n\n" + plants.EX1_OK


# Runtime cases: (exercise 1's cell, expected statuses, expected total) ---------------------------------

RUNTIME = {
    "setsid-daemon": (
        _then_ok(
            "import subprocess\n"
            "subprocess.Popen(['TAG-daemon', '600'], executable='/bin/sleep', start_new_session=True)"
        ),
        PASS,
        3,
    ),
    "reforking-orphan": (  # a process whose pid changes every 10 ms: one scan of /proc misses it
        _then_ok(
            "import ctypes\nimport os\nimport time\n\n"
            "if os.fork() == 0:\n"
            "    os.setsid()\n"
            "    ctypes.CDLL(None).prctl(15, b'TAG'[:15])  # PR_SET_NAME: its name in /proc/PID/comm\n"
            "    while True:\n"
            "        if os.fork():\n"
            "            os._exit(0)\n"
            "        time.sleep(0.01)"
        ),
        PASS,
        3,
    ),
    "dev-shm": (
        _then_ok(
            "import os\n\n"
            "for d in ('/dev/shm', '/tmp', '/var/tmp'):\n"
            "    try:\n"
            "        with open(os.path.join(d, 'TAG-file'), 'w') as f:\n"
            "            f.write('left behind')\n"
            "    except OSError:\n"
            "        pass"
        ),
        PASS,
        3,
    ),
    "sysv-shm": (
        _then_ok(
            "import ctypes\n\n"
            "ctypes.CDLL(None).shmget(0x7A11, 1 << 20, 0o1666)  # IPC_CREAT: it outlives its process"
        ),
        PASS,
        3,
    ),
    "output-flood": (  # a child in its own session that fills the judge's pipe, forever
        _then_ok(
            "import subprocess\n\n"
            "subprocess.Popen(['TAG-flood', 'TAG'], executable='/usr/bin/yes', start_new_session=True)"
        ),
        PASS,
        3,
    ),
    "shadow": (  # root's files: the sandbox runs as an unprivileged user
        "def blocks_for(n, threads):\n"
        "    try:\n"
        "        got = 'READ ' + open('/etc/shadow').read()[:20]\n"
        "    except OSError as e:\n"
        "        got = 'DENIED ' + type(e).__name__\n"
        "    raise AssertionError('SHADOW ' + got)",
        {"test_blocks_for": "failed", "test_scale": "passed"},
        2,
    ),
}
MEMORY = {
    "shared-mapping": (  # MAP_SHARED pages are not RLIMIT_DATA's: 1.5 GiB under a 768 MiB limit
        "import mmap\n\n\ndef blocks_for(n, threads):\n"
        "    m = mmap.mmap(-1, 1536 << 20, flags=mmap.MAP_SHARED)\n"
        "    for i in range(0, len(m), 4096):\n"
        "        m[i] = 1\n"
        "    return (n + threads - 1) // threads",
        {"test_blocks_for": "memory", "test_scale": "passed"},
        2,
    ),
    "tree-memory": (  # four processes of 400 MiB, each under the limit: right only if all four held theirs
        "import os\nimport select\nimport time\n\n\ndef blocks_for(n, threads):\n"
        "    r, w = os.pipe()\n"
        "    for _ in range(4):\n"
        "        if os.fork() == 0:\n"
        "            hog = bytearray(400 << 20)\n"
        "            for i in range(0, len(hog), 4096):\n"
        "                hog[i] = 1\n"
        "            os.write(w, b'x')\n"
        "            time.sleep(600)\n"
        "    held, end = 0, time.monotonic() + 8\n"
        "    while held < 4 and select.select([r], [], [], max(0, end - time.monotonic()))[0]:\n"
        "        held += len(os.read(r, 4))\n"
        "    return (n + threads - 1) // threads if held == 4 else 0",
        None,  # 1.6 GiB never holds under 768 MiB: a wrong answer, or the process killed (memory)
        2,
    ),
    "fork-storm": (  # thousands of processes: the process limit stops it, and the cell fails
        "import subprocess\n\n"
        "for _ in range(4000):\n"
        "    subprocess.Popen(['TAG-storm', '600'], executable='/bin/sleep')\n\n\n" + plants.EX1_OK,
        None,
        2,
    ),
}
for _name, (_code, _want, _total) in list(MEMORY.items()):
    MEMORY[_name] = (_code.replace("TAG", TAG), _want, _total)


def _write(folder: Path, name: str, ex1: str | None = None, ex2: str | None = None) -> Path:
    nb = plants.lab_notebook()
    plants._set(nb, "ex1", ex1 or plants.EX1_OK)
    plants._set(nb, "ex2", ex2 or plants.EX2_OK)
    (folder / name).mkdir(parents=True, exist_ok=True)
    path = folder / name / "00-fixture.ipynb"
    nbformat.write(nb, path)
    return path


def _leftovers() -> dict:
    """Processes whose command line holds TAG, and files named with it in the shared scratch folders."""
    procs = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes() + Path(f"/proc/{entry}/comm").read_bytes()
            except OSError:
                continue
            if TAG.encode()[:15] in cmd:
                procs.append((int(entry), cmd.replace(b"\0", b" ").decode(errors="replace")))
    files = [
        str(p) for d in ("/tmp", "/var/tmp", "/dev/shm") if os.path.isdir(d) for p in Path(d).glob(f"{TAG}*")
    ]
    shm = [line for line in _read("/proc/sysvipc/shm").splitlines() if line.split()[:1] == [str(0x7A11)]]
    return {"processes": procs, "files": files, "sysv": shm}


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


@pytest.fixture(scope="module")
def runtime(tmp_path_factory):
    """The runtime cases and two controls, graded in one run with -j 2."""
    root = tmp_path_factory.mktemp("hostile")
    subs, out = root / "submissions", root / "grades"
    _write(subs, "honest")
    _write(subs, "wrong", ex2=plants.EX2_UNGUARDED)
    cases = dict(RUNTIME)
    if CGROUP:
        cases.update(MEMORY)
    for name, (ex1, _, _) in cases.items():
        _write(subs, name, ex1=ex1)
    scratch = root / "scratch"  # the judges' and sandboxes' folders: this run's only
    scratch.mkdir()
    saved = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = str(scratch)
    try:
        start = time.monotonic()
        results = grade(plants.SOLUTION, [subs], out=out, limits=LIMITS, jobs=2)
        elapsed = time.monotonic() - start
    finally:
        if saved is None:
            os.environ.pop("TMPDIR")
        else:
            os.environ["TMPDIR"] = saved
    time.sleep(1)  # a process the kill missed would show up by now
    return {r.student: r for r in results}, out, _leftovers(), os.listdir(scratch), elapsed


@pytest.mark.parametrize("name", [*RUNTIME, *MEMORY])
def test_a_hostile_submission_gets_its_grade(runtime, name):
    results, *_ = runtime
    if name in MEMORY and not CGROUP:
        pytest.skip("the memory of a process tree is bounded by a cgroup only, and there is none here")
    if name == "shadow" and not ROOT:
        pytest.skip("the grader is not root: /etc/shadow is closed to it as well")
    r = results[name]
    _, want, total = {**RUNTIME, **MEMORY}[name]
    got = {t.test_id: t.status for t in r.tests}
    messages = "\n".join(t.message for t in r.tests)
    if want is None:
        assert got["test_blocks_for"] != "passed" and got["test_scale"] == "passed", (got, messages)
    else:
        assert got == want, f"{name}: {got}\n{messages}"
    assert r.total == total, messages


def test_nothing_a_submission_started_or_wrote_survives_its_grading(runtime):
    results, _, left, new_dirs, _ = runtime
    assert left == {"processes": [], "files": [], "sysv": []}, left
    assert not new_dirs, new_dirs  # sandbox and judge folders were removed
    assert results["honest"].total == 3 and results["wrong"].total == 1  # the controls kept their marks


def test_the_memory_limit_holds_for_the_whole_tree_and_says_so(runtime):
    results, *_ = runtime
    if not CGROUP:
        pytest.skip("no cgroup here: the fallback is RLIMIT_DATA per process (stated in the feedback)")
    message = results["shared-mapping"].tests[0].message
    assert "out of memory" in message and "768 MiB" in message, message


@needs_root
def test_root_s_files_stay_closed_to_a_submission(runtime):
    results, *_ = runtime
    message = results["shadow"].tests[0].message
    assert "SHADOW DENIED PermissionError" in message, message
    assert results["shadow"].isolation.get("capabilities_dropped") is True


def test_an_output_flood_does_not_hold_the_judge_past_the_notebook_limit(tmp_path):
    """A child in its own session that writes forever, and a cell that loops: ended within the limit."""
    limits = Limits(timeout=20, cell_timeout=20, memory_mb=768)
    flood = (
        "import subprocess\n"
        "subprocess.Popen(['TAG-flood2', 'TAG'], executable='/usr/bin/yes', start_new_session=True)\n"
        "while True:\n    pass"
    ).replace("TAG", TAG)
    path = _write(tmp_path, "flood", ex1=flood + "\n\n" + plants.EX1_OK)
    start = time.monotonic()
    [r] = grade(plants.SOLUTION, [path], out=None, limits=limits)
    elapsed = time.monotonic() - start
    assert [t.status for t in r.tests] == ["timeout", "timeout"], r.tests
    assert elapsed < limits.timeout + 60, (
        f"graded in {elapsed:.0f} s with a 20 s limit"
    )  # start-up on a slow CI
    assert not _leftovers()["processes"]


# Intake: what is read, and what is refused before any process starts ---------------------------------


@pytest.fixture(scope="module")
def intake(tmp_path_factory):
    """Links, pipes, devices, a huge file, the solution, colliding names and copies, graded in one run."""
    root = tmp_path_factory.mktemp("intake")
    subs = root / "submissions"
    honest = _write(subs, "honest")
    _write(subs, "copycat")  # the same answers as honest, by content
    for name, target in [("link-solution", plants.SOLUTION.resolve()), ("link-other", honest)]:
        (subs / name).mkdir()
        (subs / name / "00-fixture.ipynb").symlink_to(target)
    (subs / "link-folder").symlink_to(subs / "honest", target_is_directory=True)
    (subs / "zero").mkdir()
    (subs / "zero" / "00-fixture.ipynb").symlink_to("/dev/zero")
    (subs / "pipe").mkdir()
    os.mkfifo(subs / "pipe" / "00-fixture.ipynb")
    (subs / "huge").mkdir()
    with open(subs / "huge" / "00-fixture.ipynb", "wb") as f:
        f.truncate(1 << 30)  # sparse: 1 GiB that costs no disk
    (subs / "solution-copy").mkdir()
    (subs / "solution-copy" / "00-fixture.ipynb").write_bytes(plants.SOLUTION.read_bytes())
    if ROOT:
        (subs / "device").mkdir()
        os.mknod(subs / "device" / "00-fixture.ipynb", 0o644 | stat.S_IFCHR, os.makedev(1, 5))  # /dev/zero
    for name in ("a b", "a_b", "Bob", "bob"):  # one feedback file name for two students, today
        nb = plants.lab_notebook()
        plants._set(nb, "ex1", plants.EX1_FLOOR)  # wrong answers, unlike honest's
        (subs / name).mkdir()
        nbformat.write(nb, subs / name / f"{name}.ipynb")
    out = root / "grades"
    start = time.monotonic()
    results = grade(plants.SOLUTION, [subs], out=out, limits=LIMITS, jobs=2)
    return {r.student: r for r in results}, out, time.monotonic() - start


@pytest.mark.parametrize(
    "name, reason",
    [
        ("link-solution", "symbolic link"),
        ("link-other", "symbolic link"),
        ("link-folder", "symbolic link"),
        ("zero", "symbolic link"),
        ("pipe", "named pipe"),
        ("huge", "over the 64 MiB limit"),
        ("device", "a device"),
    ],
)
def test_a_submission_that_is_not_a_notebook_file_gets_an_error_row(intake, name, reason):
    results, out, _ = intake
    if name == "device" and not ROOT:
        pytest.skip("only root can make a device file")
    r = results[name]
    got = {t.test_id: t.status for t in r.tests}
    assert (got, r.total) == (ZERO, 0), (got, r.tests)
    assert reason in r.tests[0].message, r.tests[0].message
    assert not r.grader_error  # the student's doing, not the grader's


def test_one_bad_submission_never_stops_the_others(intake):
    results, _, elapsed = intake
    assert results["honest"].total == 3 and results["copycat"].total == 3
    assert elapsed < 600  # the pipe did not hang the grader


def test_names_map_to_distinct_safe_feedback_files(intake):
    results, out, _ = intake
    files = sorted(p.name for p in (out / "feedback" / "00-fixture").iterdir())
    students = list(results)
    assert len(files) == len(students) == len(set(students))
    assert {"a_b.md", "a_b-2.md", "Bob.md", "bob-2.md"} <= set(files), files
    for f in files:
        assert "/" not in f and not f.startswith(".")
    names = feedback_names(["x/../../etc", "x_.._.._etc"])
    assert names == {"x/../../etc": "x_.._.._etc", "x_.._.._etc": "x_.._.._etc-2"}


def test_a_copy_of_the_solution_notebook_is_graded_and_flagged(intake):
    results, out, _ = intake
    r = results["solution-copy"]
    assert r.total == 3 and r.same_as == ["(the solution notebook)"]
    assert "the course's solution notebook itself" in " ".join(r.notes)


def test_identical_submissions_are_flagged_in_the_grade_table(intake):
    results, out, _ = intake
    assert results["honest"].same_as == ["copycat"] and results["copycat"].same_as == ["honest"]
    rows = {row["student"]: row for row in csv.DictReader(open(out / "00-fixture.csv"))}
    assert rows["honest"]["identical to"] == "copycat" and rows["copycat"]["identical to"] == "honest"
    assert rows["link-other"]["identical to"] == ""  # refused, never compared
    assert "identical to those of 1 other" in " ".join(results["copycat"].notes)


def test_a_submission_is_read_once_as_a_regular_file(tmp_path):
    good = _write(tmp_path, "x")
    assert read_submission(good) == good.read_bytes()
    os.mkfifo(tmp_path / "p.ipynb")
    with pytest.raises(ValueError, match="named pipe"):
        read_submission(tmp_path / "p.ipynb")  # returns at once: opened without blocking
    (tmp_path / "l.ipynb").symlink_to(good)
    with pytest.raises(ValueError, match="symbolic link"):
        read_submission(tmp_path / "l.ipynb")
    (tmp_path / "class").mkdir()
    (tmp_path / "class" / "eve.ipynb").symlink_to(good)
    assert find_submissions([tmp_path / "class"]) == [("eve", tmp_path / "class" / "eve.ipynb")]


def test_the_judge_reads_replies_of_bounded_size():
    assert process.MESSAGE_LIMIT <= 256 << 20 and sandbox.MESSAGE_LIMIT <= 256 << 20


def test_what_this_machine_cannot_enforce_is_said_in_the_feedback():
    from cudalearn.grading.limits import containment_notes

    notes = " ".join(containment_notes(LIMITS, cgroup=False))
    assert "no cgroup" in notes and "shared memory was not counted" in notes
    if NAMESPACES:
        assert "namespace" not in notes
    else:
        assert "no PID or mount namespace" in notes


def test_processes_a_cell_leaves_running_end_with_it():
    """The sandbox's sweep after a cell: a child and its grandchild (a storm's sleepers) end, reaped."""
    import subprocess

    grandchild = (
        f"import subprocess, time; subprocess.Popen(['{TAG}-left', '600'], executable='/bin/sleep'); "
        "time.sleep(600)"
    )
    child = subprocess.Popen([sys.executable, "-c", grandchild, f"{TAG}-left"])
    end = time.monotonic() + 20
    while len(_leftovers()["processes"]) < 2 and time.monotonic() < end:
        time.sleep(0.05)
    assert len(_leftovers()["processes"]) == 2, "the test could not start its child and grandchild"
    assert sandbox.end_leftovers(in_namespace=False) >= 2
    assert child.poll() is not None, "the sweep left the cell's child running"
    assert not _leftovers()["processes"], "the sweep left a grandchild running"
