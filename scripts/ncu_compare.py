"""Compare cudalearn.trace's counts with Nsight Compute's hardware counters (Chapter 4).

    python scripts/ncu_compare.py tracer --out tracer.json   # any machine; the simulator is fine
    python scripts/ncu_compare.py gpu --out ncu.json         # a GPU with ncu: tracer + ncu, as a stored run
    python scripts/ncu_compare.py compare ncu.json           # table: tracer vs ncu, differences flagged
    python scripts/ncu_compare.py compare src/cudalearn/data/reference/h200-ncu-compare.json
    python scripts/ncu_compare.py launch [NAME ...]          # used by `gpu`: run patterns on the GPU

The patterns are the access-pattern catalogue `cudalearn.chapters.ch04.patterns` (the one the tracer's
tests use), plus the course's own kernels of Chapters 2-4 under names of their own; the comparison
is `cudalearn.chapters.ch04.ncu`, the ncu run `compile.toolchain.profile`. `gpu` runs ONE ncu process
over `launch`, which runs every pattern once, and writes FILE.json plus ncu's raw CSV beside it
(FILE.ncu.csv). With numba-cuda 0.30 the GPU side needs numpy < 2.5 (see `cudalearn doctor`).
"""

import argparse
import json
import sys
from pathlib import Path

from cudalearn.chapters.ch04 import ncu
from cudalearn.compile import toolchain
from cudalearn.measure import reference

KEY = "ch4.ncu_compare"  # the stored run's figures key, which Chapter 4 reads


def write(path, result, stored=False):
    """Write the result as JSON to path (as a stored reference run if `stored`), or print it."""
    result = toolchain.no_nan(result)
    if stored:
        text = reference.dumps(reference.from_ncu(result, KEY, "scripts/ncu_compare.py"), sort_figures=False)
    else:
        text = json.dumps(result, indent=1)
    if path:
        Path(path).write_text(text.rstrip("\n") + "\n")
        print(f"wrote {path}")
    else:
        print(text)


def main(argv=None):
    """Command line: tracer | gpu | compare | launch."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="mode", required=True)
    for mode in ("tracer", "gpu"):
        sub.add_parser(mode).add_argument("--out", help="JSON file to write (default: print)")
    sub.add_parser("compare").add_argument("file")
    launch = sub.add_parser("launch")
    launch.add_argument("names", nargs="*")
    launch.add_argument("--meta")
    args = parser.parse_args(argv)
    if args.mode == "tracer":
        write(args.out, ncu.tracer_result())
    elif args.mode == "gpu":
        result, error = ncu.gpu_result(__file__, args.out)
        write(args.out, result, stored=not error)
        sys.exit(1 if error else 0)
    elif args.mode == "compare":
        data = json.loads(Path(args.file).read_text())
        if "figures" in data:  # a stored reference run: the profile is its figures
            data = {**data, **data["figures"][KEY]}
        print("\n".join(ncu.compare_lines(data)))
    else:
        meta = ncu.launch_patterns(args.names)
        if args.meta:
            Path(args.meta).write_text(json.dumps(meta, indent=1))


if __name__ == "__main__":
    main()
