"""Compile every course kernel with numba-cuda-mlir to PTX for sm_75 (T4) and sm_90 (H100/H200), no GPU.

numba-cuda-mlir (NVIDIA's successor of numba-cuda, import name `numba_cuda_mlir`) does not provide
`numba.cuda`: its `cuda` module is `numba_cuda_mlir.cuda`, and it never imports numba. The course's
kernel modules take `cuda` and numba's scalar types from `cudalearn.runtime.numba_backend`, which gives
numba-cuda-mlir's in gpu mode when it is installed. This script forces that choice
(`CUDALEARN_NUMBA=numba-cuda-mlir`, in the 'compile' mode: no GPU needed) and compiles the course as
it is. Each kernel is compiled by the package its own `cuda` comes from (`numba_backend.cuda_of`):
numba-cuda-mlir for the modules on the bridge, numba-cuda for a module that imports `numba` itself
(the report names them; tests/runtime/test_numba_backend.py keeps that list empty).

(An earlier run redirected only `numba.cuda` and kept numba 0.68's `float32`: 11 of the 66 kernels
compiled, the others failed with "Untyped global name 'float32'", which is why the bridge gives the
scalar types too. A second section, `shim`, also gave the modules that imported `numba` themselves a
stand-in `numba` from numba-cuda-mlir; once every module took its names from the bridge it compiled
exactly what the course does and repeated its table, so it is gone.)

Each kernel module found by `cudalearn.chapters.kernel_modules()` is compiled in a child process (a
crash of the compiler costs one module, not the run), every kernel of its `SIGNATURES` with
`cuda.compile_ptx(kernel.py_func, sig, cc=cc)`, as `tests/compile/test_kernels.py` does with numba-cuda.
numba-cuda-mlir 0.6.0's compile_ptx asks the CUDA driver for the current GPU's capability even when
`cc` is given (`numba_cuda_mlir.tools.resolve_gpu_target`), so without a GPU the script presets its
cache (`numba_cuda_mlir.tools._cached_cc`) to the target; on a GPU nothing is preset. When a ptxas is
found (the nvidia-cuda-nvcc wheel, Triton's copy), each PTX is also assembled for its target
(`ptxas -arch=sm_XX`). Nothing here runs a kernel: `scripts/mlir_gpu_smoke.py` does, on a GPU.

Run it from the repository root with a Python that has numba-cuda-mlir beside numba-cuda:

    python3 -m venv /tmp/mlirvenv
    /tmp/mlirvenv/bin/pip install "numba-cuda-mlir[cu12]==0.6.0" "numba-cuda[cu12]==0.30.4" numpy==2.4.6
    PYTHONPATH=src /tmp/mlirvenv/bin/python scripts/check_numba_cuda_mlir.py \\
        --out data/numba-cuda-mlir/compile-report.md --log data/numba-cuda-mlir/compile-log.txt

It writes a Markdown report (the failures by cause, then kernel x target: ok, or the number of
its cause) and a raw log with the last traceback lines of each cause; it exits 0 whatever
compiles (the report is the result). `--modules` limits it to some kernel modules.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import traceback
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

TARGETS = ((7, 5), (9, 0))
ROOT = Path(__file__).resolve().parents[1]


def _version(dist):
    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def install_bridge():
    """Force cudalearn.runtime.numba_backend to numba-cuda-mlir, in compile mode."""
    from cudalearn.runtime.device import MODE_ENV
    from cudalearn.runtime.numba_backend import ENV, NUMBA_CUDA_MLIR

    os.environ[MODE_ENV], os.environ[ENV] = "compile", NUMBA_CUDA_MLIR
    import cudalearn

    cudalearn.setup("compile", quiet=True)


def _first_line(exc):
    """An exception's type and the first line of its message; for an MLIR verifier failure, its error line."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    errors = [line.split(":0: ", 1)[-1] for line in lines if line.startswith("error:")]
    first = lines[0] if lines else ""
    if first.startswith("Failed in") and len(lines) > 1:  # Numba's pipeline banner: the cause is next
        errors = errors or [lines[1]]
    return f"{type(exc).__name__}: {first} {errors[0] if errors else ''}".strip()[:400]


def _gpu_present():
    import ctypes

    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    count = ctypes.c_int(0)
    return lib.cuInit(0) == 0 and lib.cuDeviceGetCount(ctypes.byref(count)) == 0 and count.value > 0


def _ptxas(ptx, cc):
    """None when ptxas assembles `ptx` for sm_<cc> (or no ptxas is found: 'skipped'); else its error."""
    from cudalearn.compile.toolchain import find_tool

    ptxas = find_tool("ptxas")
    if not ptxas:
        return "skipped"
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "k.ptx"
        src.write_text(ptx)
        run = subprocess.run(
            [ptxas, f"-arch=sm_{cc[0]}{cc[1]}", str(src), "-o", str(Path(tmp) / "k.cubin")],
            capture_output=True,
            text=True,
        )
    return None if run.returncode == 0 else (run.stderr.strip().splitlines() or ["ptxas failed"])[0][:300]


def worker(module):
    """Compile one module's kernels for every target; print one JSON line {key: result}."""
    out = {}
    try:
        install_bridge()
        import numba_cuda_mlir.tools as tools

        gpu = _gpu_present()
        mod = importlib.import_module(module)
    except Exception as e:  # the module cannot even be imported with numba-cuda-mlir
        out[f"{module}.*"] = {"error": _first_line(e), "trace": traceback.format_exc()[-3000:]}
        print(json.dumps(out))
        return
    for name, sig in getattr(mod, "SIGNATURES", {}).items():
        compiler = _compiler(getattr(mod, name))
        for cc in TARGETS:
            key = f"{module}.{name}@sm_{cc[0]}{cc[1]}"
            if not gpu:  # numba-cuda-mlir 0.6.0 asks the driver for the host's capability: tell it
                tools._cached_cc = cc
            start = time.perf_counter()
            try:
                ptx = _compile(mod, name, sig, cc)
            except Exception as e:
                out[key] = {
                    "error": _first_line(e),
                    "trace": traceback.format_exc()[-3000:],
                    "compiler": compiler,
                }
                continue
            target = next((line.split()[1] for line in ptx.splitlines() if line.startswith(".target")), "?")
            out[key] = {
                "ok": True,
                "compiler": compiler,
                "seconds": round(time.perf_counter() - start, 2),
                "ptx_lines": len(ptx.splitlines()),
                "target": target,
                "ptxas": _ptxas(ptx, cc),
            }
    print(json.dumps(out))


def _compiler(kernel):
    """'numba-cuda-mlir' or 'numba-cuda': the package whose `cuda` compiled `kernel`."""
    from cudalearn.runtime import numba_backend

    name = numba_backend.cuda_of(kernel).__name__
    return numba_backend.NUMBA_CUDA_MLIR if name.startswith("numba_cuda_mlir") else numba_backend.NUMBA_CUDA


def _compile(mod, name, sig, cc):
    """The PTX of kernel `name` of `mod` for sm_<cc>, by the compile_ptx of the kernel's own package."""
    from cudalearn.runtime import numba_backend

    kernel = getattr(mod, name)
    cuda = numba_backend.cuda_of(kernel)
    return cuda.compile_ptx(getattr(kernel, "py_func", kernel), sig, cc=cc)[0]


def run_all(modules, timeout):
    """{key: result} for every module, each compiled by a child process of this script."""
    results = {}
    for module in modules:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", module]
        print(f"compiling {module} ...", flush=True)
        try:
            env = {**os.environ, "NUMBA_CUDA_MLIR_ICE_FULL_TB": "1"}  # the compiler's error, not a pointer
            run = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            results[f"{module}.*"] = {"error": f"timeout after {timeout} s", "trace": ""}
            continue
        lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
        if run.returncode or not lines:
            tail = run.stderr.strip().splitlines()[-1:] or [f"exit code {run.returncode}"]
            results[f"{module}.*"] = {"error": f"child died: {tail[0][:300]}", "trace": run.stderr[-3000:]}
            continue
        results.update(json.loads(lines[-1]))
    return results


#: The report's one section: what it compiled.
COMPILED = "the course's kernels as they are, `cudalearn.runtime.numba_backend` forced to numba-cuda-mlir"


def direct_importers(modules):
    """The kernel modules that import `numba` themselves, not through cudalearn.runtime.numba_backend."""
    import importlib.util
    import re

    found = []
    for module in modules:
        source = Path(importlib.util.find_spec(module).origin).read_text(encoding="utf-8")
        if re.search(r"^\s*(from numba(\.cuda)? import|import numba\b)", source, re.M):
            found.append(module)
    return found


def section(results, seconds, direct=()):
    """The report's results: counts, the failures grouped by cause, one row per kernel.

    `direct`: the modules that import numba themselves, named above the table.
    """
    rows, kernels = [], {}
    for key, res in results.items():
        kernel, _, sm = key.rpartition("@") if "@" in key else (key, "", "all")
        kernels.setdefault(kernel, {})[sm or "all"] = res
    ok = sum(1 for r in results.values() if r.get("ok"))
    assembled = sum(1 for r in results.values() if r.get("ok") and r.get("ptxas") is None)
    causes = {}  # error -> compiles that failed with it, the most frequent first
    for res in results.values():
        if not res.get("ok"):
            causes[res["error"]] = causes.get(res["error"], 0) + 1
    number = {cause: i for i, (cause, _) in enumerate(sorted(causes.items(), key=lambda c: -c[1]), 1)}

    def cell(res):
        if res is None:
            return "-"
        by = "" if res.get("compiler", "numba-cuda-mlir") == "numba-cuda-mlir" else ", by numba-cuda"
        if res.get("ok"):
            extra = "" if res.get("ptxas") in (None, "skipped") else f"; ptxas: {res['ptxas']}"
            return f"ok ({res['ptx_lines']} PTX lines{by}{extra})"
        return f"FAIL [{number[res['error']]}]{by.replace(', ', ' ')}"

    for kernel, by_sm in sorted(kernels.items()):
        if "all" in by_sm:
            rows.append(f"| `{kernel}` | {cell(by_sm['all'])} | (same) |")
        else:
            rows.append(f"| `{kernel}` | {cell(by_sm.get('sm_75'))} | {cell(by_sm.get('sm_90'))} |")
    by_mlir = sum(1 for r in results.values() if r.get("compiler") == "numba-cuda-mlir")
    ok_mlir = sum(1 for r in results.values() if r.get("ok") and r.get("compiler") == "numba-cuda-mlir")
    head = [
        f"## Compiled: {COMPILED}",
        "",
        f"**{ok} of {len(results)} compiles succeeded** ({len(kernels)} kernels x sm_75, sm_90, "
        f"{seconds:.0f} s); {assembled} of them assembled by ptxas for their target. "
        f"numba-cuda-mlir compiled {ok_mlir} of the {by_mlir} it was given"
        + (f"; numba-cuda the other {len(results) - by_mlir}." if by_mlir < len(results) else "."),
        "",
    ]
    if direct:
        names = ", ".join(f"`{m}`" for m in direct)
        head += [
            f"Modules that import `numba` themselves, not `cudalearn.runtime.numba_backend`: {names}. Their "
            "kernels are compiled by numba-cuda here, and any of them that calls a device function "
            "of a module on the bridge (now a numba-cuda-mlir function) fails to type.",
            "",
        ]
    if causes:
        head += ["Failures by cause (compiles):", ""]
        head += [f"{number[c]}. {c.replace('|', '/')} ({n} compiles)" for c, n in causes.items()]
        head += [""]
    head += ["| kernel | sm_75 (T4) | sm_90 (H100/H200) |", "|---|---|---|"]
    return "\n".join(head + rows) + "\n"


def header():
    """The report's title, what wrote it, where and with which versions."""
    dists = ("numba-cuda-mlir", "numba", "numba-cuda", "numpy", "cuda-bindings", "cuda-toolkit")
    return "\n".join(
        [
            "# numba-cuda-mlir: the course's kernels compiled to PTX",
            "",
            "Written by `scripts/check_numba_cuda_mlir.py` on "
            f"{time.strftime('%Y-%m-%d')} ({platform.machine()}, "
            f"{'a GPU present' if _gpu_present() else 'no GPU: the target capability preset'}).",
            "",
            "Versions: "
            + ", ".join(f"{d} {_version(d) or 'not installed'}" for d in dists)
            + f", python {platform.python_version()}.",
            "",
            "Compiled only: no kernel ran. `scripts/mlir_gpu_smoke.py` runs some of them on a GPU.",
            "",
        ]
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="data/numba-cuda-mlir/compile-report.md", help="Markdown report")
    parser.add_argument("--log", default="data/numba-cuda-mlir/compile-log.txt", help="raw log (tracebacks)")
    parser.add_argument("--json", default=None, help="also write the results as JSON here")
    parser.add_argument("--modules", nargs="*", help="kernel modules (default: every one the course has)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per module")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker)
        return 0
    if _version("numba-cuda-mlir") is None:
        print("numba-cuda-mlir is not installed in this Python: see this script's docstring", file=sys.stderr)
        return 2
    from cudalearn.chapters import kernel_modules

    modules = args.modules or kernel_modules()
    direct = direct_importers(modules)
    start = time.perf_counter()
    results = run_all(modules, args.timeout)
    text, log = header() + "\n" + section(results, time.perf_counter() - start, direct), []
    traced = set()  # one traceback per cause; the other kernels that hit it are listed
    for key, res in sorted(results.items()):
        if not res.get("ok") and res["error"] not in traced:
            traced.add(res["error"])
            same = sorted(k for k, r in results.items() if r.get("error") == res["error"] and k != key)
            log += [f"### {key}", "", res["error"], "", "```", res.get("trace", "").strip(), "```"]
            log += ["", f"The same error: {', '.join(same) or 'no other compile'}.", ""]
    for path in (args.out, args.log, args.json):
        if path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)
    Path(args.log).write_text("\n".join([text, "## Failures: the last lines of each traceback", "", *log]))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, sort_keys=True))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
