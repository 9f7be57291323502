"""Speed points in the judge: the student's kernel timed against the solution's on one GPU (instructors).

A test cell's `# SPEED:` line (`course.speed_rules`) gives its exercise speed
points. After that test passes, the judge (never the student's process)
times the kernel itself with the one harness (`measure.bench`): the
student's kernel is the one `rebuild` made from its verified syntax tree,
compiled here, and launched by the judge on its own stream; the reference
is the solution's kernel of the same exercise, run from the solution's
cells here. The student's process is ended first, so none of its GPU work
overlaps the clock. Timing holds a lock file that every judge of the grade
run shares (`LOCK_ENV`), so with `-j` the notebooks are timed one at a
time; the reference is timed before and after the student's kernel, and a
drift between the two beyond DRIFT (another process on the GPU) means a
second try, then no verdict. Under the simulator nothing is timed: speed
"needs a GPU". The result of each test is a dict, `test["speed"]`.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from cudalearn.course import speed_rules
from cudalearn.course.speed_cases import case as speed_case
from cudalearn.grading import lab as lab_mod

LOCK_ENV = "CUDALEARN_TIMING_LOCK"  # the grade run's lock file, made by the grader in a folder of its own
DRIFT = 0.15  # the most the reference's median may move between before and after a submission
LIMIT_MS = 2000.0  # the longest one launch may take
NEEDS_GPU = "needs a GPU"  # the status, under the simulator: speed is never reported as a time there
STATUSES = ("timed", "refused", "not timed", "drifted", NEEDS_GPU)


def declarations(lab: lab_mod.Lab) -> dict[str, speed_rules.Speed]:
    """test id -> its speed declaration, for every test cell of `lab` with a `# SPEED:` line."""
    found = {}
    for t in lab.tests:
        try:
            speed = speed_rules.parse(t.cell.source, f"{lab.path.name} cell {t.cell.index}")
        except speed_rules.SpeedDeclarationError as e:
            raise lab_mod.LabError(str(e)) from None
        if speed is not None:
            found[t.test_id] = speed
    return found


def job_entry(lab: lab_mod.Lab, cell: lab_mod.Cell) -> dict:
    """What the judge needs to time a test's kernel: the declaration and the solution's answer cells."""
    speed = declarations(lab).get(cell.test_id)
    if speed is None:
        return {}
    reference = [e.cell.source for e in lab.exercises if e.number <= cell.exercise]
    return {"speed": {**speed.as_dict(), "reference": reference}}


def _speed(spec: dict) -> speed_rules.Speed:
    return speed_rules.Speed(spec["case"], spec["kernel"], float(spec["points"]), tuple(spec["tiers"]))


_HELD: dict = {}  # "stuck": a kernel of this judge's student overran the limit; "fd": the lock kept for good


def stuck() -> bool:
    """Whether a kernel this judge timed overran the limit (and may still be running on the GPU).

    Then the judge runs no more cells (any of its own CUDA calls would wait for that kernel), reports
    the tests left as not run (`STUCK`), and ends at once: the driver ends the kernel with its context,
    and the timing lock goes with the process, so the next notebook is timed within seconds.
    """
    return bool(_HELD.get("stuck"))


STUCK = (
    "not run: your kernel ran past the speed timing's limit ({limit:g} ms a launch) and still held the "
    "GPU, so the grader ended your notebook's checks there."
)


@contextlib.contextmanager
def timing_lock(deadline: float | None = None):
    """Hold the grade run's timing lock (exclusive): one notebook's kernels on the GPU's clock at a time.

    Waits until `deadline` (monotonic) at most, then raises TimeoutError: a judge whose notebook time
    runs out waiting says so instead of losing its other tests. When a kernel overran the limit
    (`_HELD["stuck"]`, set inside) the lock is kept until this judge ends: its CUDA context, and the
    kernel still running in it, end with the process, and only then may another notebook be timed.
    """
    import fcntl
    import time

    path = os.environ.get(LOCK_ENV)
    if not path:
        yield
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released when the judge ends, however
                break
            except BlockingIOError:
                if deadline is not None and time.monotonic() > deadline:
                    raise TimeoutError("the GPU's clock was held by another notebook's timing") from None
                time.sleep(0.05)
        yield
    finally:
        if _HELD.get("stuck"):
            _HELD["fd"] = fd  # never closed: the lock goes with the process
        else:
            os.close(fd)


def judge_speed(judge: Any, cell: dict, passed: bool) -> dict | None:
    """The speed result of test `cell` in `judge` (None: the test has no speed points)."""
    spec = cell.get("speed")
    if not spec:
        return None
    try:
        return _judge_speed(judge, spec, passed)
    except Exception as e:  # the grader's failure (a reference that would not run), never the student's
        return {
            "max": float(spec["points"]),
            "points": 0.0,
            "status": "not timed",
            "message": f"the grader could not time this kernel ({type(e).__name__}: {e}); ask your "
            "instructor",
        }


def _judge_speed(judge: Any, spec: dict, passed: bool) -> dict:
    speed = _speed(spec)
    result = {"max": speed.points, "points": 0.0, "tiers": list(speed.tiers), "kernel": speed.kernel}
    if not passed:
        return {
            **result,
            "status": "not timed",
            "message": "the test above failed, so the kernel was not timed.",
        }
    from cudalearn.runtime import device

    if device.mode() != "gpu":
        return {
            **result,
            "status": NEEDS_GPU,
            "message": "speed is graded on a GPU only; this grade ran under the simulator, so nothing was "
            "timed (run `cudalearn bench` on a GPU to see your kernel against the reference).",
        }
    if _HELD.get("stuck") or _HELD.get("broken"):
        why = (
            "ran past the time limit and may still be running on the GPU"
            if _HELD.get("stuck")
            else f"broke the grader's CUDA context ({_HELD['broken']})"
        )
        return {
            **result,
            "status": "not timed",
            "message": f"not timed: a kernel of an earlier exercise {why}.",
        }
    try:
        fn, student, consts = _student_kernel(judge, speed)
    except _Refused as e:
        return {**result, "status": "refused", "message": str(e)}
    reference, ref_consts = _reference_kernel(judge, speed, spec["reference"])
    if judge.sandbox is not None:
        judge.sandbox.kill()  # none of the student's GPU work runs while the clock does
        judge.sandbox = None  # started afresh (and replayed) by the next request: not a crash of theirs
    try:
        verdict = {
            **result,
            **time_pair(student, consts, reference, ref_consts, speed, deadline=judge.deadline - 30),
        }
    except _Refused as e:
        return {**result, "status": "refused", "message": str(e)}
    except TimeoutError as e:
        return {
            **result,
            "status": "not timed",
            "message": f"not timed: {e} until this notebook's time ran out; "
            "ask your instructor to grade it again (with fewer notebooks at once, -j).",
        }
    if verdict["status"] == "timed" and verdict["reached"] < len(speed.tiers):
        try:
            verdict["hint"] = hint(fn, reference, speed, consts, ref_consts)
        except Exception:  # the hint is a courtesy: a kernel the tracer cannot run gets none
            verdict["hint"] = ""
    return verdict


class _Refused(Exception):
    """The student's kernel cannot be timed: why, in words for the student."""


def _student_kernel(judge: Any, speed: speed_rules.Speed) -> tuple[Any, Any, dict]:
    """The student's kernel rebuilt from its verified tree and compiled here, and its launch constants."""
    from cudalearn.runtime.numba_backend import cuda

    try:
        fn = judge.rebuilt(speed.kernel)
    except AttributeError:
        why = judge.untraceable.get(speed.kernel, "it could not be rebuilt")
        raise _Refused(f"your kernel `{speed.kernel}` was not timed: {why}") from None
    consts = {}
    for name in speed_case(speed.case).consts:
        try:
            value = judge.request("get", None, {"name": name})
        except Exception as e:  # not defined, or the process failed: the student's to fix
            why = f"your kernel was not timed: `{name}` could not be read from your notebook ({e})"
            raise _Refused(why) from None
        if type(value) is not int or not 1 <= value <= 1024:
            raise _Refused(
                f"`{name}` is {value!r} in your notebook: a launch constant is an int from 1 to 1024"
            )
        consts[name] = value
    return fn, cuda.jit(fn), consts


def _reference_kernel(judge: Any, speed: speed_rules.Speed, sources: list[str]) -> tuple[Any, dict]:
    """The solution's kernel, from its answer cells run here (instructor code), and its constants."""
    ns = dict(judge.ns)
    for i, source in enumerate(sources):
        exec(compile(judge.transform(source), f"<solution cell {i}>", "exec"), ns)
    return ns[speed.kernel], {name: ns[name] for name in speed_case(speed.case).consts}


def time_pair(
    student: Any,
    consts: dict,
    reference: Any,
    ref_consts: dict,
    speed,
    device=None,
    tries: int = 2,
    deadline=None,
    small=False,
) -> dict:
    """Reference, student, reference, under the timing lock; the verdict dict (status, points, message...).

    `device`: the GPU by default (a fake one in the tests, with `small` cases).
    """
    from cudalearn.measure import bench

    case = speed_case(speed.case, small=small)
    with timing_lock(deadline):
        device = device or bench.GpuDevice()
        for _ in range(tries):
            before = bench.time_kernel(reference, case, ref_consts, device, limit_ms=LIMIT_MS)
            try:
                mine = bench.time_kernel(student, case, consts, device, limit_ms=LIMIT_MS)
            except Exception as e:  # a compile error, a launch the driver refused: the student's kernel
                if type(e).__name__ in ("CudaAPIError", "CudaDriverError"):
                    _HELD["broken"] = f"{type(e).__name__}: {e}"  # the context is lost: no more timing here
                raise _Refused(
                    f"no speed points: your kernel failed when the grader launched it ({e})."
                ) from e
            if before.cause:
                raise RuntimeError(f"the reference kernel failed the harness: {before.cause}")
            if mine.cause:  # returned before anything else touches the GPU: the kernel may still run
                if "time limit" in mine.cause:
                    _HELD["stuck"] = True  # no other notebook is timed beside it; this judge ends soon
                return {
                    "status": "refused",
                    "message": f"no speed points: {mine.cause}.",
                    "device": device.name,
                }
            after = bench.time_kernel(reference, case, ref_consts, device, limit_ms=LIMIT_MS)
            if after.cause:
                raise RuntimeError(f"the reference kernel failed the harness: {after.cause}")
            drift = abs(after.median_ms - before.median_ms) / before.median_ms
            if drift <= DRIFT:
                break
        verdict = {
            "device": device.name,
            "ms": mine.median_ms,
            "spread": mine.spread,
            "reference_ms": (before.median_ms + after.median_ms) / 2,
            "reference_before_ms": before.median_ms,
            "reference_after_ms": after.median_ms,
            "drift": drift,
            "l2": getattr(device, "l2_reset", ""),
        }
    if drift > DRIFT:
        return {
            **verdict,
            "status": "drifted",
            "message": f"not graded: the reference's time moved by {100 * drift:.0f} % around your kernel's "
            f"(another process on the GPU?), twice; ask your instructor to grade this notebook again.",
        }
    ratio = verdict["reference_ms"] / mine.median_ms
    points, reached = speed_rules.points_for(ratio, speed)
    message = speed_rules.describe(ratio, mine.median_ms, verdict["reference_ms"], speed)
    return {
        **verdict,
        "status": "timed",
        "ratio": ratio,
        "points": points,
        "reached": reached,
        "message": message,
    }


def hint(student_fn: Any, reference_fn: Any, speed: speed_rules.Speed, consts: dict, ref_consts: dict) -> str:
    """One hint from the tracer's counts on a small launch, where sectors or bank conflicts explain a gap."""
    from cudalearn.measure import bench
    from cudalearn.trace.execute import trace

    small = speed_case(speed.case, small=True)
    import numpy as np

    counts = []
    for fn, c in ((student_fn, consts), (reference_fn, ref_consts)):
        host = small.inputs(np.random.default_rng(0))
        for name, (shape, dtype, fill) in small.outputs(host).items():
            host[name] = bench.initial(np.random.default_rng(1), shape, dtype, fill)
        grid, block = small.launch(c)
        rep = trace(fn, grid, block, *[host[n] for n in small.args])
        counts.append((rep.global_load_sectors + rep.global_store_sectors, rep.bank_conflicts))
    (sectors, conflicts), (ref_sectors, ref_conflicts) = counts
    if conflicts > ref_conflicts:
        return (
            f"Hint (the tracer, on a small launch): your kernel has {conflicts} shared-memory bank conflicts "
            f"where the reference has {ref_conflicts}: a warp's threads read one bank at different words."
        )
    if sectors > 1.5 * ref_sectors:
        return (
            f"Hint (the tracer, on a small launch): your kernel touches {sectors} 32-byte sectors of global "
            f"memory where the reference touches {ref_sectors}: neighbouring threads should read "
            f"neighbouring addresses (coalescing), and data read twice belongs in shared memory."
        )
    return ""
