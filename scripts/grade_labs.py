#!/usr/bin/env python3
"""Grade every lab's own solution and its mutation corpus with `cudalearn grade`; store the outcome.

    CUDALEARN_MODE=gpu python3 scripts/grade_labs.py --out grading.json [LAB ...]

For each lab (default: all), the solution and every entry of
tests/chapters/chNN/corpus.py are graded as one student each, as the CI test
each tests/chapters/chNN/test_corpus_labNN.py does under the simulator. The JSON file gets the
device, date and versions (`reference.run_header`), and per lab: the
solution's grade, how many wrong answers kept points, how many valid ones
lost points, and each entry's verdict. Exits non-zero when a solution
misses a point or an entry misbehaves.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from mutations import runner  # noqa: E402

from cudalearn.grading import lab as lab_mod  # noqa: E402
from cudalearn.measure import reference  # noqa: E402

#: how `runner.verdict` words each way an entry can misbehave
KINDS = (
    ("wrong_kept_points", "a wrong answer kept points"),
    ("cause_not_named", "graded message does not match"),
    ("valid_lost_points", "a valid answer lost points"),
    ("other_exercises_lost_points", "other exercises lost points"),
)


def grade_lab(lab: str, jobs: int) -> dict:
    """The solution's grade and each corpus entry's verdict for one lab."""
    entries = runner.corpus(lab)
    plan = lab_mod.load(runner.solution_path(lab))
    t0 = time.time()
    with tempfile.TemporaryDirectory() as d:
        results = runner.grade_all(lab, entries, Path(d), jobs=jobs)
    sol = results["solution"]
    verdicts = {m.name: runner.verdict(plan, m, results[m.name]) for m in entries}
    return {
        "solution": f"{sol.total:g}/{sol.max_total:g}",
        "solution_tests": {t.test_id: [t.status, t.message[:500]] for t in sol.tests},
        "wrong": sum(not m.is_valid for m in entries),
        "valid": sum(m.is_valid for m in entries),
        **{
            kind: sorted(n for n, v in verdicts.items() if v and v.startswith(start)) for kind, start in KINDS
        },
        "problems": {n: v for n, v in verdicts.items() if v},
        "seconds": round(time.time() - t0, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write")
    parser.add_argument("--jobs", type=int, default=4, help="notebooks graded at once")
    parser.add_argument("labs", nargs="*", help="lab numbers (default: all)")
    args = parser.parse_args()
    data = {**reference.run_header(), "source": "scripts/grade_labs.py", "labs": {}}
    bad = 0
    for lab in args.labs or runner.labs_with_corpus():
        print(f"== lab {lab}", flush=True)
        r = data["labs"][lab] = grade_lab(lab, args.jobs)
        bad += (r["solution"].split("/")[0] != r["solution"].split("/")[1]) + len(r["problems"])
        print(
            f"   solution {r['solution']}; {r['wrong']} wrong answers, {len(r['wrong_kept_points'])} kept "
            f"points, {len(r['cause_not_named'])} with a message not naming the cause; {r['valid']} valid, "
            f"{len(r['valid_lost_points'])} lost points; "
            f"{len(r['other_exercises_lost_points'])} cost another exercise's points; {r['seconds']} s",
            flush=True,
        )
        for name, problem in r["problems"].items():
            print(f"   {name}: {problem[:400]}", flush=True)
        args.out.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
