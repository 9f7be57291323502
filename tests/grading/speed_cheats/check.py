"""Compare a GPU grade run of the planted speed submissions with what cheats.py says each must get.

    python tests/grading/speed_cheats/check.py GRADES   # the --out folder of `cudalearn grade`

Prints one line per planted submission and speed-graded test (PASS or FAIL, the status, ratio, points
and the speed message), then a summary; exits 1 if any expectation fails. Used by
data/gpu-runs/2026-12-06-h100-round2/speed.sh.
"""

from __future__ import annotations

import csv
import re
import sys
from pathlib import Path

from cheats import CHEATS, NAIVE, SOLUTIONS

from cudalearn.course import speed_rules
from cudalearn.grading import lab as lab_mod
from cudalearn.grading import speed

ROOT = Path(__file__).resolve().parents[3]
TARGET = {"s02-04": "test_vector_add", "s03-07": "test_matmul_tiled"}  # the test of each replaced cell


def _speed_line(feedback: str, test_id: str) -> str:
    """The 'Speed...' paragraph of `test_id` in a feedback file ('' when absent)."""
    part = feedback.split(f"## {test_id} ", 1)[-1].split("\n## ", 1)[0]
    return next((line for line in part.splitlines() if line.startswith("Speed")), "")


def check(grades: Path, labs: list[str] | None = None) -> int:
    """Print PASS/FAIL per expectation for the tables in `grades` (`labs`: these only); 1 if any fails."""
    failures, lines = 0, []
    plants = {p.name: p for p in CHEATS + NAIVE}
    for lab, name in SOLUTIONS.items():
        if labs is not None and lab not in labs:
            continue
        table = grades / f"{name}.csv"
        if not table.exists():
            lines.append(f"FAIL {lab}: no grade table {table}")
            failures += 1
            continue
        decls = speed.declarations(lab_mod.load(ROOT / "solutions" / f"{name}.ipynb"))
        tiers: dict[str, set] = {}
        for row in csv.DictReader(open(table, encoding="utf-8")):
            student = row["student"].lstrip("'")
            feedback = (grades / "feedback" / name / row["feedback"]).read_text(encoding="utf-8")
            plant = plants.get(student)
            for test_id, decl in decls.items():
                status = row[f"{test_id} speed status"]
                ratio = row[f"{test_id} speed ratio"]
                points = float(row[f"{test_id} speed points"] or 0)
                message = _speed_line(feedback, test_id)
                reached = speed_rules.points_for(float(ratio), decl)[1] if ratio else 0
                if plant is None:  # a solution: every speed point
                    ok = status == "timed" and points == decl.points
                    tiers.setdefault(test_id, set()).add(reached)
                elif test_id != TARGET[plant.cell]:
                    continue  # the cheat's other tests are the solution's
                elif plant.kind == "naive":
                    ok = status == "timed" and 1 <= reached < len(decl.tiers)
                else:
                    ok = points == 0 and bool(re.search(plant.cause, message))
                failures += not ok
                lines.append(
                    f"{'PASS' if ok else 'FAIL'} {lab} {student} {test_id}: {status}, ratio {ratio or '-'}, "
                    f"tier {reached}/{len(decl.tiers)}, {points:g}/{decl.points:g} speed points | {message}"
                )
        for test_id, seen in tiers.items():
            ok = len(seen) == 1
            failures += not ok
            verdict = "PASS" if ok else "FAIL"
            lines.append(f"{verdict} {lab} {test_id}: the solution's tiers over its copies {sorted(seen)}")
    print("\n".join(lines))
    print(f"{len(lines) - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(check(Path(sys.argv[1])))
