"""`python tests/mutations NN [NAME ...] [--grade]`: what a student reads for each entry of lab NN."""

import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("CUDALEARN_MODE", "sim")
os.environ.setdefault("MPLBACKEND", "Agg")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, where conftest puts it

from mutations import runner  # noqa: E402


def main(argv: list[str]) -> int:
    grade = "--grade" in argv
    args = [a for a in argv if a != "--grade"]
    lab, names = args[0], set(args[1:])
    entries = [m for m in runner.corpus(lab) if not names or m.name in names]
    bad = 0
    run = runner.VisibleRun(lab)
    for m in entries:
        t0 = time.time()
        out = run.run(m)
        v = runner.visible_verdict(m, out)
        bad += v is not None
        tag = "OK  " if v is None else "BAD "
        print(f"{tag}{m.name} [{'valid' if m.is_valid else 'wrong'}] ({time.time() - t0:.1f} s): {m.why}")
        print("     " + (v or (out.error or "passed")).replace("\n", "\n     ")[:1500])
    if grade:
        plan = run.plan
        with tempfile.TemporaryDirectory() as d:
            t0 = time.time()
            results = runner.grade_all(lab, entries, Path(d))
            print(f"graded {len(results)} submissions in {time.time() - t0:.0f} s")
            sol = results["solution"]
            print(f"solution: {sol.total}/{sol.max_total}", [(t.test_id, t.status) for t in sol.tests])
            bad += sol.total != sol.max_total
            for m in entries:
                v = runner.verdict(plan, m, results[m.name])
                bad += v is not None
                print(
                    ("OK   " if v is None else "BAD  ") + f"graded {m.name}: " + (v or "as expected")[:1500]
                )
    print(f"{bad} problem(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
