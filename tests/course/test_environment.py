"""The pinned set: constraints.txt, environment.yml and pyproject.toml agree."""

import re
import tomllib
from pathlib import Path

from cudalearn.course import book

ROOT = Path(__file__).resolve().parents[2]


def _name(req: str) -> str:
    return re.split(r"[\[<>=!~ ;@]", req.strip(), maxsplit=1)[0].lower().replace("_", "-")


def constraints() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, _, ver = line.partition("==")
            assert ver, f"constraints.txt line {line!r} is not an exact pin"
            pins[_name(name)] = ver
    return pins


def environment_pins() -> dict[str, str]:
    text = (ROOT / "environment.yml").read_text()
    pins = {}
    for m in re.finditer(r"^\s*-\s+([A-Za-z0-9_.\-\[\]]+)==([^\s#]+)", text, re.M):
        pins[_name(m.group(1))] = m.group(2)
    return pins


def cu13_constraints() -> dict[str, str]:
    """constraints.txt with constraints-cu13.txt's pins in place of its CUDA 12 ones (run.py, driver 580+)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("cudalearn_run_py_pins", ROOT / "run.py")
    run = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run)
    cu13 = dict(line.split("==") for line in (ROOT / "constraints-cu13.txt").read_text().split())
    return {n: v for n, v in constraints().items() if not n.startswith(run.CUDA_PINS)} | cu13


def test_environment_yml_pins_equal_constraints():
    """environment.yml is the set for a local GPU with driver 580+: the registry's (CUDA 13) torch."""
    pins, env = cu13_constraints(), environment_pins()
    assert "numba-cuda[cu13]==" in (ROOT / "environment.yml").read_text()
    assert env, "environment.yml pins nothing"
    for name, ver in env.items():
        assert pins.get(name) == ver, (
            f"environment.yml pins {name}=={ver}, constraints.txt has {pins.get(name)}"
        )


def _extra(project: dict, name: str) -> set[str]:
    return {_name(r) for r in project["optional-dependencies"][name]}


def test_every_direct_dependency_is_pinned_and_environment_yml_is_a_students():
    """constraints.txt pins every direct dependency; environment.yml holds a student's set, nothing else."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    student = {_name(r) for r in project["dependencies"]} | _extra(project, "course")
    ci_only = (_extra(project, "test") | _extra(project, "site")) - student
    pins, env = constraints(), environment_pins()
    for name in sorted(student | ci_only):
        assert name in pins, f"{name} is a dependency but constraints.txt does not pin it"
    assert set(env) == student, f"environment.yml: {sorted(set(env) ^ student)} (a student's set only)"
    assert ci_only >= {"pytest", "nbval", "ruff", "nbgrader", "playwright", "sphinx"}, ci_only


def test_run_py_course_installs_a_students_set_and_test_adds_ci_tools():
    """`run.py course` installs the `course` extra only; `run.py test` adds `test` and `site`."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("cudalearn_run_py_env", ROOT / "run.py")
    run = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run)
    extras = {cmd: {e for _, extra in steps for e in extra.split(",")} for cmd, steps in run.STEPS.items()}
    assert extras == {"course": {"course"}, "test": {"course", "test", "site"}}  # + cu12 or cu13: run.plan()


def test_numpy_is_below_25_everywhere():
    assert tuple(int(x) for x in constraints()["numpy"].split(".")[:2]) < (2, 5)
    project = (ROOT / "pyproject.toml").read_text()
    assert '"numpy>=1.26,<2.5"' in project


def test_ci_runs_exactly_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "python3 run.py test" in readme and "python3 run.py course" in readme
    assert "exec python3 run.py test" in ci


def test_readme_chapter_table_has_one_row_per_book_chapter_in_order():
    """The README's table is the one hand-written line of a new chapter (CONTRIBUTING.md): it must not lag."""
    readme = (ROOT / "README.md").read_text()
    row = r"^\| (\d+) \| .+ \| \[book\]\((book/[^)]+\.ipynb)\) \| \[lab\]\((labs/[^)]+\.ipynb)\) \|$"
    rows = re.findall(row, readme, re.M)
    cores = [p.relative_to(ROOT).as_posix() for p in book.chapters(ROOT)]  # deep dives: linked from cores
    assert [core for _, core, _ in rows] == cores, "README.md: a row per chapter, in order"
    for number, core, lab in rows:
        assert int(number) == book.part(core).number, f"README.md: chapter {number} links {core}"
        assert lab == core.replace("book/", "labs/", 1) and (ROOT / lab).is_file(), f"README.md: {lab}"


def test_every_installed_pin_supports_the_oldest_python_pyproject_allows():
    """A pin whose Requires-Python excludes a Python that pyproject.toml accepts breaks `run.py course` there:
    soupsieve 4.1.3 (>=3.11.5) made pip 23.0.1 on Debian 12's Python 3.11.2 backtrack into torch's CUDA
    build and fail. Checked for every pinned distribution installed here (CI's .venv holds all extras)."""
    from importlib import metadata

    from packaging.specifiers import SpecifierSet

    floor = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    oldest = floor.removeprefix(">=") + ".0"
    assert floor.startswith(">=") and oldest.count(".") == 2, f"requires-python {floor!r}: update this test"
    checked, bad = 0, []
    for dist in metadata.distributions():
        name = _name(dist.metadata["Name"])
        pin = constraints().get(name)
        if pin is None or dist.version.split("+")[0] != pin.split("+")[0]:
            continue
        checked += 1
        needs = dist.metadata.get("Requires-Python")
        if needs and not SpecifierSet(needs).contains(oldest, prereleases=True):
            bad.append(f"{name}=={pin} requires Python {needs}")
    assert checked >= 50, f"only {checked} pinned distributions are installed here"
    assert not bad, f"constraints.txt pins what Python {oldest} (pyproject: {floor}) cannot install: {bad}"
