"""Speed points: declarations, tiers, the harness on a fake clock, planted cheats, the table and feedback."""

import csv
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from numba import cuda, float32

import cudalearn
from cudalearn.checks.guard import GUARD
from cudalearn.course import speed_rules
from cudalearn.course.speed_cases import CASES, case
from cudalearn.grading import lab as lab_mod
from cudalearn.grading import results, speed
from cudalearn.grading.report import write, write_leaderboard
from cudalearn.measure import bench

sys.path.insert(0, str(Path(__file__).resolve().parent / "speed_cheats"))
import cheats  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SPEED = speed_rules.Speed("vector_add", "vector_add", 2.0, (0.2, 0.5, 0.9))


class FakeDevice(bench.GpuDevice):
    """The harness's device under the simulator: guarded simulator arrays, a fake clock (ms per kernel)."""

    def __init__(self, clock, peaks=(1000.0, 1000.0)):
        self.cuda, self.name, self.clock, self._peaks, self.l2_reset = cuda, "fake GPU", clock, peaks, "reset"
        self.flushes = 0

    def flush_l2(self):
        self.flushes += 1

    def launch_timed(self, kernel, grid, block, args, limit_ms):
        kernel[grid, block](*args)
        ms = self.clock(kernel)
        if ms > limit_ms:
            raise bench.OverLimit
        return ms


@cuda.jit
def add_ok(a, b, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = a[i] + b[i]


def test_declarations_parse_and_errors_name_the_fix():
    got = speed_rules.parse("# POINTS: 2\n# SPEED: points=2 case=vector_add tiers=0.2,0.5,0.9\n")
    assert got == SPEED
    assert speed_rules.parse("# POINTS: 2\n") is None
    for bad, says in [
        ("# SPEED: points=2 case=nope tiers=0.5", "no timing case 'nope'"),
        ("# SPEED: points=2 case=vector_add tiers=0.9,0.5", "increasing"),
        ("# SPEED: points=2 case=vector_add", "needs tiers"),
        ("# SPEED: points=2 case=vector_add tiers=0.5 fast", "key=value"),
        ("# SPEED: points=1 case=vector_add tiers=1\n# SPEED: points=1 case=vector_add tiers=1", "once"),
    ]:
        with pytest.raises(speed_rules.SpeedDeclarationError, match=re.escape(says)):
            speed_rules.parse(bad)


def test_every_kernel_of_the_lesson_has_speed_points():
    kernels = set()
    for lab in cheats.SOLUTIONS.values():
        plan = lab_mod.load(ROOT / "solutions" / f"{lab}.ipynb")
        decls = speed.declarations(plan)
        for test_id, s in decls.items():
            ex = next(t.exercise for t in plan.tests if t.test_id == test_id)
            assert s.kernel in plan.exercises[ex - 1].names, (lab, s)
        kernels |= {s.kernel for s in decls.values()}
    assert kernels == set(CASES)


@pytest.mark.parametrize(
    "ratio, points, reached",
    [(0.1, 0, 0), (0.2, 0.67, 1), (0.35, 1.0, 1), (0.5, 1.33, 2), (0.7, 1.67, 2), (0.9, 2, 3), (3.0, 2, 3)],
)
def test_tiers_give_partial_points_between_thresholds(ratio, points, reached):
    assert speed_rules.points_for(ratio, SPEED) == (pytest.approx(points, abs=0.01), reached)


def test_feedback_names_the_times_the_tier_and_the_next():
    text = speed_rules.describe(0.6, 2.0, 1.2, SPEED)
    assert "your kernel: 2 ms, the reference: 1.2 ms" in text
    assert "Tier 2 of 3 reached (ratio >= 0.5)" in text
    assert "the next at ratio 0.9, i.e. 1.333 ms or less" in text
    assert "full speed points" in speed_rules.describe(1.0, 1.0, 1.0, SPEED)


def _time(kernel, clock=lambda k: 1.0, **kw):
    return bench.time_kernel(
        kernel, case("vector_add", small=True), {}, FakeDevice(clock, **kw), runs=3, seed=1
    )


def test_an_honest_kernel_is_timed_every_run_checked_and_flushed():
    dev = FakeDevice(lambda k: 1.0)
    timed = bench.time_kernel(add_ok, case("vector_add", small=True), {}, dev, runs=3, seed=1)
    assert timed.cause == "" and timed.times_ms == [1.0, 1.0, 1.0] and timed.spread == 0
    assert dev.flushes == 5  # warm-up, three timed runs, the check after the loop


def test_a_time_below_the_bytes_and_flops_is_refused():
    timed = _time(add_ok, clock=lambda k: 1e-9)
    assert "not a possible time" in timed.cause


def test_a_launch_past_the_limit_is_refused():
    assert "past the time limit" in _time(add_ok, clock=lambda k: 1e9).cause


def test_writes_into_the_guard_zone_are_refused():
    class Overrun:
        def __getitem__(self, config):
            def run(a, b, out):
                add_ok[config](a, b, out)
                dev.last["out"].buffer[-1] = 7.0  # past the end, in the guard zone

            return run

    dev = FakeDevice(lambda k: 1.0)
    dev.last = {}
    upload = dev.upload
    dev.upload = lambda host: dev.last.__setitem__("out", upload(host)) or dev.last["out"]
    timed = bench.time_kernel(Overrun(), case("vector_add", small=True), {}, dev, runs=2, seed=1)
    assert "outside `out` were written" in timed.cause


SIM_CHEATS = ["first-call-only", "zeroes-input", "skips-written-output"]


@pytest.mark.parametrize("name", SIM_CHEATS)
def test_planted_cheats_get_no_speed_time(name):
    """The cheats whose trick shows under the simulator's small sizes fail the harness with their cause."""
    plant = next(p for p in cheats.CHEATS if p.name == name)
    ns = {"cuda": cuda, "float32": float32, "np": np}
    exec(plant.code, ns)
    assert re.search(plant.cause, _time(ns["vector_add"]).cause)


def test_time_pair_times_the_reference_around_the_student_and_reports_drift():
    fast = {"n": 0}

    def drifting(k):
        fast["n"] += 1
        return 1.0 if k is add_ok else 1.0 + fast["n"]  # the reference slows down every run

    @cuda.jit
    def ref(a, b, out):
        i = cuda.grid(1)
        if i < out.shape[0]:
            out[i] = a[i] + b[i]

    got = speed.time_pair(add_ok, {}, ref, {}, SPEED, device=FakeDevice(drifting), small=True)
    assert got["status"] == "drifted" and "ask your instructor" in got["message"]
    got = speed.time_pair(
        add_ok, {}, ref, {}, SPEED, device=FakeDevice(lambda k: 2.0 if k is add_ok else 1.0), small=True
    )
    assert got["status"] == "timed" and got["ratio"] == 0.5 and got["points"] == pytest.approx(1.33)
    assert "Tier 2 of 3" in got["message"]


def test_under_the_simulator_speed_needs_a_gpu_and_a_failed_test_is_not_timed():
    cell = {"speed": {**SPEED.as_dict(), "reference": []}}
    got = speed.judge_speed(object(), cell, passed=True)
    assert got["status"] == speed.NEEDS_GPU and "nothing was timed" in got["message"] and "ms" not in got
    assert speed.judge_speed(object(), cell, passed=False)["status"] == "not timed"
    assert speed.judge_speed(object(), {}, passed=True) is None


def _result(student, status, **extra):
    s = {"max": 2.0, "points": 0.0, "status": status, "message": "m", **extra}
    tests = [results.TestResult("test_vector_add", 1, 2.0, 2.0, "passed", "", "", s)]
    tests += [
        results.TestResult(t, e, 1.0, 1.0, "passed")
        for t, e in [("test_grid_2d", 2), ("test_matmul_naive", 3)]
    ]
    return results.Result(student, "02-first-kernels", Path(f"{student}.ipynb"), tests)


def test_the_table_has_ratio_points_and_status_and_the_simulator_is_marked(tmp_path):
    plan = lab_mod.load(ROOT / "solutions" / "02-first-kernels.ipynb")
    timed = dict(ratio=0.75, ms=2.0, reference_ms=1.5, device="H100", spread=0.02)
    rows = [_result("ann", "timed", **{**timed, "points": 1.67}), _result("bob", speed.NEEDS_GPU)]
    rows.append(_result("cy", "refused", message="no speed points: timed run 1: the output `out` is wrong"))
    assert rows[0].total == 5.67 and rows[0].max_total == 6 and rows[1].max_total == 4
    assert write(plan, rows, tmp_path) == []
    table = list(csv.DictReader(open(tmp_path / "02-first-kernels.csv")))
    assert [r["test_vector_add speed ratio"] for r in table] == ["0.75", "", ""]
    assert [r["test_vector_add speed points"] for r in table] == ["1.67", "", "0"]
    assert [r["test_vector_add speed status"] for r in table] == ["timed", speed.NEEDS_GPU, "refused"]
    assert "test_matmul_naive speed status" in table[0]  # declared: a column even with no verdict here
    feedback = (tmp_path / "feedback" / "02-first-kernels" / "cy.md").read_text()
    assert "Speed: 0/2 points (refused): no speed points: timed run 1: the output `out` is wrong" in feedback
    assert (
        "Speed (needs a GPU, up to 2 points)"
        in (tmp_path / "feedback" / "02-first-kernels" / "bob.md").read_text()
    )


def test_the_leaderboard_keeps_each_students_best_ratio(tmp_path):
    path = tmp_path / "lb.csv"
    timed = dict(ms=2.0, reference_ms=1.5, device="H100", points=1.0)
    write_leaderboard(path, [_result("ann", "timed", ratio=0.5, **timed)])
    write_leaderboard(
        path, [_result("ann", "timed", ratio=0.4, **timed), _result("bob", "timed", ratio=0.9, **timed)]
    )
    rows = list(csv.DictReader(open(path)))
    assert [(r["student"], r["ratio"]) for r in rows] == [("bob", "0.9"), ("ann", "0.5")]


def test_the_planted_submissions_build(tmp_path):
    plants = cheats.build(tmp_path)
    assert len([p for p in plants if p.kind == "cheat"]) >= 10
    assert {p.lab for p in plants if p.kind == "solution"} == set(cheats.SOLUTIONS)
    for p in plants:
        assert (tmp_path / p.lab / p.name / f"{p.name}.ipynb").exists()


class FakeJudge:
    """What `speed.judge_speed` uses of a judge: the rebuilt kernel, the constants, the namespace."""

    def __init__(self, code, consts=None):
        from cudalearn.grading import rebuild

        self.ns = {"cuda": cuda, "float32": float32, "np": np}
        self.transform, self.sandbox, self.deadline, self.untraceable = (lambda s: s), None, 1e12, {}
        self.consts = consts or {}
        self.builder = rebuild.Rebuilder({1: code}, self.ns, self.consts.__getitem__, type("Remote", (), {}))

    def rebuilt(self, name):
        from cudalearn.grading import rebuild

        try:
            return self.builder.function(name)
        except rebuild.Unsafe as e:
            self.untraceable[name] = str(e)
            raise AttributeError("py_func") from None

    def request(self, op, remote, fields):
        return self.consts[fields["name"]]


@pytest.fixture
def on_a_fake_gpu(monkeypatch):
    """The judge's GPU path with the simulator's kernels, small cases and a fake clock (1 ms every launch)."""
    from cudalearn.runtime import device

    monkeypatch.setattr(device, "mode", lambda: "gpu")
    monkeypatch.setattr(bench, "GpuDevice", lambda: FakeDevice(lambda k: 1.0))
    monkeypatch.setattr(speed, "speed_case", lambda name, small=False: case(name, small=True))


def _judged(plant_code):
    solution = "".join(cheats._cell(cheats._notebook("02"), "s02-04")["source"])
    cell = {"speed": {**SPEED.as_dict(), "reference": [solution]}}
    return speed.judge_speed(FakeJudge(plant_code), cell, passed=True)


def test_the_judge_times_the_rebuilt_kernel_against_the_solutions(on_a_fake_gpu):
    got = _judged(cheats.VA_HEAD + "    if i < out.shape[0]:\n        out[i] = a[i] + b[i]\n")
    assert got["status"] == "timed" and got["points"] == 2.0 and got["ratio"] == 1.0, got
    assert got["reference_before_ms"] == got["reference_after_ms"] == 1.0


@pytest.mark.parametrize("name", ["skips-written-output", "other-stream", "sleeps"])
def test_the_judge_gives_a_planted_cheat_no_speed_points(on_a_fake_gpu, name):
    plant = next(p for p in cheats.CHEATS if p.name == name)
    got = _judged(plant.code)
    assert got["points"] == 0 and got["status"] == "refused", got
    assert re.search(plant.cause, got["message"]), got["message"]


def test_the_gpu_device_path_runs_under_the_simulator(monkeypatch):
    """GpuDevice's own code (gate, flush, guarded arrays, events) under the simulator, its events faked."""
    import itertools

    import numba.cuda.simulator.api as simapi

    order = itertools.count()

    class Event(simapi.Event):
        def __init__(self, *args, **kwargs):
            self.is_end = next(order) % 2 == 1  # created in pairs: start, end

        def query(self):
            return self.is_end

        def elapsed_time(self, other):
            return 0.5

    small = cuda.device_array
    monkeypatch.setattr(cuda, "event", Event)
    monkeypatch.setattr(cuda, "device_array", lambda n, dtype=None: small(min(n, 1000), dtype=dtype))
    dev = bench.GpuDevice()
    dev._peaks = (1.0, 1.0)
    timed = bench.time_kernel(add_ok, case("vector_add", small=True), {}, dev, runs=2, seed=2)
    assert timed.cause == "" and timed.times_ms == [0.5, 0.5]


def test_cudalearn_bench_says_speed_needs_a_gpu_under_the_simulator(capsys):
    from cudalearn.cli import main
    from cudalearn.grading.bench import SIMULATED, bench

    assert main(["bench", "02", "--root", str(ROOT)]) == 0
    out = capsys.readouterr().out
    assert f"vector_add: {SIMULATED}" in out and f"matmul_naive: {SIMULATED}" in out
    assert "ms" not in out.replace("nothing", "")

    def vector_add(a, b, out):  # the notebook call takes the kernel: its name says which exercise
        pass

    assert bench(vector_add, "02", ROOT).endswith(SIMULATED)
    assert cudalearn.bench(vector_add, "02", ROOT).endswith(SIMULATED)  # the notebook's face
    with pytest.raises(lab_mod.LabError, match="no solutions/ folder"):
        bench(vector_add, "02", ROOT / "tests")
    assert main(["bench", "01", "--root", str(ROOT)]) == 2  # no speed-graded kernel there


def test_the_device_runs_checker_reads_the_tables(tmp_path, capsys):
    """check.py (speed.sh's verdict) passes a table where each plant got what cheats.py expects."""
    import check

    plan = lab_mod.load(ROOT / "solutions" / "02-first-kernels.ipynb")
    timed = dict(ms=1.0, reference_ms=1.0, device="H100", spread=0.01)

    def row(student, vector_add, matmul=None):
        full = {"status": "timed", "ratio": 1.0, "points": 1.0, "max": 1.0, "message": "full", **timed}
        tests = [
            results.TestResult("test_vector_add", 1, 2.0, 2.0, "passed", "", "", {"max": 2.0, **vector_add}),
            results.TestResult("test_grid_2d", 2, 1.0, 1.0, "passed"),
            results.TestResult("test_matmul_naive", 3, 2.0, 2.0, "passed", "", "", matmul or full),
        ]
        return results.Result(student, plan.name, Path(f"{student}.ipynb"), tests)

    rows = [
        row(f"solution-{i}", {"status": "timed", "ratio": 1.02, "points": 2.0, **timed}) for i in (1, 2, 3)
    ]
    rows.append(row("naive-strided", {"status": "timed", "ratio": 0.19, "points": 0.5, **timed}))
    for plant in (p for p in cheats.CHEATS if p.lab == "02"):
        cause = {"over-the-limit": "warm-up run: the kernel ran past the time limit (2000 ms a launch)"}
        message = cause.get(plant.name, "the test above failed, so the kernel was not timed.")
        if plant.name in ("skips-written-output", "less-work-when-large"):
            message = "no speed points: timed run 1: the output `out` is wrong (3 wrong elements)"
        if plant.name == "writes-outside":
            message = "no speed points: warm-up run: 64 elements outside `out` were written"
        rows.append(row(plant.name, {"status": "refused", "points": 0.0, "message": message}))
    write(plan, rows, tmp_path)
    assert check.check(tmp_path, ["02"]) == 0, capsys.readouterr().out
    rows[0].tests[0].speed["points"] = 1.0  # a solution short of full speed points
    write(plan, rows, tmp_path)
    assert check.check(tmp_path, ["02"]) == 1
    assert "FAIL 02 solution-1 test_vector_add" in capsys.readouterr().out


@cuda.jit
def add_strided(a, b, out):
    i = cuda.blockIdx.x + cuda.threadIdx.x * cuda.gridDim.x  # a warp's lanes a grid apart
    if i < out.shape[0]:
        out[i] = a[i] + b[i]


def test_the_hint_names_the_sectors_the_tracer_counts():
    text = speed.hint(add_strided, add_ok, SPEED, {}, {})
    assert re.search(r"touches \d+ 32-byte sectors of global memory where the reference touches \d+", text)
    assert speed.hint(add_ok, add_ok, SPEED, {}, {}) == ""


def test_a_kernel_past_the_limit_stops_its_judge_and_holds_the_clock(monkeypatch):
    monkeypatch.setattr(speed, "_HELD", {})
    got = speed.time_pair(
        add_ok,
        {},
        add_strided,
        {},
        SPEED,
        device=FakeDevice(lambda k: 1e9 if k is add_ok else 1.0),
        small=True,
    )
    assert got["status"] == "refused" and "past the time limit (2000 ms a launch)" in got["message"]
    assert speed.stuck()
    assert "not run" in speed.STUCK.format(limit=speed.LIMIT_MS)


def _threads_past(name: str, consts: dict) -> bool:
    """Whether the GPU-size launch of case `name` has threads past its output's last element (or row)."""
    c = case(name)
    grid, block = c.launch(consts)
    shape = c.outputs(c.inputs(np.random.default_rng(0)))
    out = next(iter(shape.values()))[0]
    if name == "softmax_rows":  # a warp per row
        return grid[0] * block[0] > 32 * out[0]
    if name == "warp_sums":  # a thread per input element, 32 per output
        return grid[0] * block[0] > 32 * out[0] - 31
    if name == "transpose_no_conflict":  # a thread per element of src, the output's transpose
        out = out[::-1]
    if name == "matmul_regblock":
        return blocks_past(out, (consts["BM"], consts["BN"]), grid)
    if len(out) == 1:
        return grid[0] * block[0] > out[0]
    return grid[0] * block[0] > out[1] and grid[1] * block[1] > out[0]


def blocks_past(out: tuple, tile: tuple, grid: tuple) -> bool:
    """Whether a grid of (cols, rows) blocks of `tile` (rows, cols) elements reaches past `out` both ways."""
    return grid[0] * tile[1] > out[1] and grid[1] * tile[0] > out[0]


@pytest.mark.parametrize("tile", [16, 32, 64])
def test_gpu_sizes_leave_threads_past_the_output_so_stray_stores_hit_the_guard_zones(tile):
    consts = {"TILE": tile, "BLOCK": 256, "BM": tile, "BN": tile, "TM": 4, "TN": 4}
    guarded = [n for n in CASES if n != "array_sum"]  # array_sum's one output is out[0]
    assert [n for n in guarded if not _threads_past(n, consts)] == []


def test_a_store_past_out_only_at_the_timed_size_is_caught():
    """writes-outside (cheats.py) stores 64 elements past `out` only when n > 2**20: at the timed size."""
    timed_case = case("vector_add")
    zones = {}

    class Device(FakeDevice):
        def upload(self, host):
            g = super().upload(host)
            zones[id(g.view)] = g
            return g

    class PlantedOverrun:
        """The plant's kernel, thread by thread in numpy over its launch (the simulator is too slow)."""

        def __getitem__(self, config):
            (grid,), (block,) = config[0], config[1]

            def run(a, b, out):
                n = out.shape[0]
                out.copy_to_device(a.copy_to_host() + b.copy_to_host())  # threads i < n
                stop = min(grid * block, n + 64)  # threads n <= i < n + 64 exist only past the data
                if n > (1 << 20) and stop > n:
                    g = zones[id(out)]
                    flat = g.buffer.copy_to_host()
                    flat[GUARD + n : GUARD + stop] = 0.0  # the guard zone after the array
                    g.buffer.copy_to_device(flat)

            return run

    timed = bench.time_kernel(
        PlantedOverrun(), timed_case, {}, Device(lambda k: 1.0), runs=1, warmup=0, seed=3
    )
    assert "elements outside `out` were written" in timed.cause, timed.cause
