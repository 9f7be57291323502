"""The `cudalearn` command: doctor, labs, clean, outputs, grade, bench, progress, reference, site (all)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _labs(args: argparse.Namespace) -> int:
    from cudalearn.course import labs

    if args.action == "build":
        for lab in labs.build(args.root):
            print(f"wrote {lab}")
        return 0
    bad = [s for s in labs.check(args.root) if not s.up_to_date]
    for s in bad:
        print(f"{s.lab}: {s.reason}; run `cudalearn labs build`", file=sys.stderr)
    if not bad:
        print("labs/ is up to date with solutions/")
    return 1 if bad else 0


def _clean(args: argparse.Namespace) -> int:
    import nbformat

    from cudalearn.course.labs import committed_text, marker_problems

    changed = 0
    misplaced = 0
    for folder in ("book", "solutions", "labs"):
        for path in sorted(Path(args.root, folder).glob("*.ipynb")):
            before = path.read_text()
            nb = nbformat.reads(before, as_version=4)
            for problem in marker_problems(nb):
                misplaced += 1
                print(f"{path}: {problem}", file=sys.stderr)
            after = committed_text(nb)
            if after != before:
                changed += 1
                if not args.check:
                    path.write_text(after)
                print(f"{'would clean' if args.check else 'cleaned'} {path}")
    return 1 if misplaced or (args.check and changed) else 0


def _outputs(args: argparse.Namespace) -> int:
    from cudalearn.course.labs import fill_outputs

    failed = 0
    for path in args.notebooks:
        if path.parent.name == "labs":
            print(
                f"{path}: labs/ is generated and carries no outputs; fill solutions/{path.name}",
                file=sys.stderr,
            )
            failed += 1
            continue
        try:
            status = fill_outputs(path, timeout=args.timeout)
        except RuntimeError as e:
            print(e, file=sys.stderr)
            failed += 1
            continue
        if not status:
            print(f"{path}: no cell starts with '# NBVAL_CHECK_OUTPUT'; nothing to fill")
        for n, word in status:
            print(f"{path}::Cell {n}: {word}")
    return 1 if failed else 0


def _reference(args: argparse.Namespace) -> int:
    import json

    from cudalearn.measure import reference

    if args.action == "adopt":
        stored = reference.STORED
        try:
            moved = reference.adopt(args.file, stored, replace_device=args.replace_device)
        except reference.StoredFiguresError as e:
            print(f"not adopted: {e}", file=sys.stderr)
            return 1
        for name, keys in moved.items():
            print(f"{name}: {len(keys)} figure(s) replaced by {args.file.name}: {', '.join(keys)}")
        print(f"stored {args.file.name} in {stored}")
        return 0
    if args.action == "merge":
        try:
            data = reference.merge_files(args.files, args.out, what=args.what or ())
        except reference.StoredFiguresError as e:
            print(f"not merged: {e}", file=sys.stderr)
            return 1
        names = ", ".join(str(p) for p in args.files)
        print(f"wrote {args.out}: {len(data['figures'])} figures from {names}")
        stored = reference.STORED
        if any(
            Path(p).resolve().parent == stored and Path(p).resolve() != args.out.resolve() for p in args.files
        ):
            print("now delete the merged inputs from src/cudalearn/data/reference: a key stored twice fails")
        return 0
    try:
        runs = reference.index()
    except reference.StoredFiguresError as e:
        print(f"a stored file is not in the reference format: {e}", file=sys.stderr)
        return 1
    for run in runs:
        gpus = f", {run.gpus} GPUs" if run.gpus > 1 else ""
        merged = f", merged from {run.merged} runs" if run.merged else ""
        print(f"{run.name}: {run.label}{gpus}{merged}")
        print(f"  by {run.source}")
        print("  versions: " + ", ".join(f"{k} {v}" for k, v in sorted(run.versions.items())))
        if args.verbose:
            print(json.dumps(reference.load(run.name)["figures"], indent=1))
        else:
            for key in run.keys:
                print(f"  {key}")
    twice = reference.duplicate_keys(runs)
    for key, names in sorted(twice.items()):
        print(f"{key} is stored in {' and '.join(names)}: keep it in one file", file=sys.stderr)
    print(f"{sum(len(r.keys) for r in runs)} figures in {len(runs)} files")
    return 1 if twice else 0


def _site(args: argparse.Namespace) -> int:
    from cudalearn.course import site

    try:
        site.build(args.root, args.dir, jobs=args.jobs)
    except site.SiteBuildError as e:
        print(f"site build failed: {e}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `cudalearn` console command."""
    from cudalearn.course import iri_grammar

    iri_grammar.skip()  # before nbformat is imported: 5 s of every command, for a checker nothing here uses
    from cudalearn import grading
    from cudalearn.course import progress
    from cudalearn.grading.bench import add_arguments as bench_arguments

    parser = argparse.ArgumentParser(prog="cudalearn", description="cudalearn course tools")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("doctor", help="report the environment and diagnose known breakages")
    p = sub.add_parser("labs", help="generate labs/ from solutions/, or check it is up to date")
    p.add_argument("action", choices=("build", "check"))
    p.add_argument("--root", default=".", help="the course's root folder (default: here)")
    p = sub.add_parser("clean", help="strip outputs and metadata from the notebooks, but the compared cells'")
    p.add_argument("--check", action="store_true", help="only report; exit 1 if a notebook is not clean")
    p.add_argument("--root", default=".")
    p = sub.add_parser(
        "outputs", help="run notebooks under the simulator as CI's nbval does; write their compared outputs"
    )
    p.add_argument("notebooks", nargs="+", type=Path, help="book/ or solutions/ notebooks")
    p.add_argument("--timeout", type=float, default=600, help="seconds per cell (default: 600, as CI)")
    p = sub.add_parser("grade", help="grade submitted notebooks of a lab; write grades/LAB.csv and feedback")
    grading.add_arguments(p)
    p = sub.add_parser("bench", help="time your lab's speed-graded kernels against the reference, as graded")
    bench_arguments(p)
    p = sub.add_parser("progress", help="run your lab notebooks' checks and say which exercises pass")
    progress.add_arguments(p)
    p = sub.add_parser("reference", help="list the stored GPU figures, or merge runs of one machine")
    p.add_argument("-v", "--verbose", action="store_true", help="print every figure, not only its key")
    ref = p.add_subparsers(dest="action")
    ref.add_parser("list", help="every stored file with its device, date, versions and keys (the default)")
    m = ref.add_parser("merge", help="merge stored runs of one machine into one file; writes merged_from")
    m.add_argument("files", nargs="+", type=Path, help="two or more stored runs (JSON)")
    m.add_argument("-o", "--out", type=Path, required=True, help="the file to write (may be one of the runs)")
    m.add_argument("--what", action="append", help="what run i is, for merged_from (once per file, in order)")
    a = ref.add_parser("adopt", help="store a rerun: its keys leave the older files, noting where they went")
    a.add_argument("file", type=Path, help="the new run (JSON, as scripts/gpu_run.py writes it)")
    a.add_argument(
        "--replace-device",
        action="store_true",
        help="also replace figures stored from another GPU (a chapter rerun on another device)",
    )
    p = sub.add_parser("site", help="render the book and the labs index as a static HTML site (offline)")
    p.add_argument("action", choices=("build",))
    p.add_argument("dir", type=Path, help="the folder to write the site into (emptied if it holds a site)")
    p.add_argument("--root", default=".", help="the course's root folder (default: here)")
    p.add_argument("--jobs", type=int, default=2, help="notebooks executed at a time (default: 2)")
    args = parser.parse_args(argv)
    if args.command == "doctor":
        from cudalearn.course.doctor import main as doctor_main

        return doctor_main()
    commands = {"labs": _labs, "clean": _clean, "outputs": _outputs, "reference": _reference}
    commands["site"] = _site
    commands.update(grade=grading.command, progress=progress.command)
    if args.command == "bench":
        from cudalearn.grading.bench import command as bench_command

        return bench_command(args)
    return commands[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
