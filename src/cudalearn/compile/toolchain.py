"""NVIDIA's tools around a kernel: ptxas, the SASS it makes, and Nsight Compute (Chapters 4-6).

The one home of the course's toolchain code:

* `numba_cuda_backend`: which Numba CUDA compiler builds the course's kernels (numba-cuda, its
  simulator, or numba-cuda-mlir: `cudalearn.runtime.numba_backend` chooses), and `NUMBA_CUDA_MLIR_STATUS`,
  what numba-cuda-mlir does with the course (the doctor prints both);
* `tool_paths` / `find_tool`: where ptxas and cuobjdump are (NVIDIA's wheels, Triton's copy, PATH);
* `compile_report`: `ptxas -v` figures (registers, spills, shared memory) and the SASS instruction
  mix (`instruction_mix`) of PTX compiled for one GPU; `sass_opcodes`: its SASS opcodes in program
  order; `resources` and `kernel_ptx`: what the CUDA driver says of a kernel compiled on this GPU;
* `find_ncu`, `ncu_command`, `profile`, `parse_ncu_csv`: one Nsight Compute run over a child
  command, its CSV parsed into {kernel: {metric: value}}; `ncu_versions` for the stored JSON.

What measures with them: `cudalearn.chapters.ch04.ncu` (`scripts/ncu_compare.py`), `scripts/ncu_chain.py`
and `cudalearn.chapters.ch06.bench` (`scripts/bench_gemm.py`).
"""

from __future__ import annotations

import csv
import glob
import importlib.util
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

# Which Numba CUDA compiler (Chapter 0's doctor) ---------------------------------------------------

#: What numba-cuda-mlir, numba-cuda's successor, does with the course: measured by
#: scripts/check_numba_cuda_mlir.py (data/numba-cuda-mlir/compile-report.md); the doctor prints it.
NUMBA_CUDA_MLIR_STATUS = (
    "numba-cuda-mlir 0.6.0 has no simulator; in gpu mode, when it is installed, it compiles the course's "
    "kernels (runtime.numba_backend; CUDALEARN_NUMBA=numba-cuda switches back). Checked without a GPU, "
    "to PTX for sm_75 and sm_90: all 68 kernels compile, and ptxas assembles them "
    "(data/numba-cuda-mlir/compile-report.md). On a GPU (an H100, with numpy 2.5.2), the 14 checks of "
    "scripts/mlir_gpu_smoke.py passed: seven kernels against NumPy, and the timing, launch, counting and "
    "tracer helpers (data/gpu-runs/2026-12-05-h100-probe4); no chapter has run on it end to end yet."
)


def numba_cuda_backend(modules=None):
    """Which Numba CUDA compiler builds the course's kernels here; None before any is chosen or imported.

    'numba-cuda', 'numba-cuda (simulator)' or 'numba-cuda-mlir': the choice of
    `cudalearn.runtime.numba_backend` once made (`cudalearn.setup()` makes it); before that, the package that
    gave an imported `numba.cuda` ('numba-cuda-mlir' when something redirected it to
    numba_cuda_mlir.cuda). Never imports or chooses anything. `modules` stands for sys.modules (a
    test plants one). Chapter 0's doctor reports it.
    """
    modules = sys.modules if modules is None else modules
    bridge = modules.get("cudalearn.runtime.numba_backend")
    chosen = bridge.current() if bridge is not None else None
    if chosen is not None:
        return chosen.label
    cuda = modules.get("numba.cuda")
    if cuda is None:
        return None
    where = f"{getattr(cuda, '__name__', '')} {getattr(cuda, '__file__', None) or ''}"
    if "numba_cuda_mlir" in where:
        return "numba-cuda-mlir"
    simulator = getattr(modules.get("numba.core.config"), "ENABLE_CUDASIM", 0)
    return "numba-cuda (simulator)" if simulator else "numba-cuda"


# ptxas and cuobjdump (Chapter 6) -----------------------------------------------------------------


def tool_paths(name):
    """Every copy of a CUDA tool (ptxas, cuobjdump) found, best first (Chapter 6).

    The order: NVIDIA's wheels as cuda-pathfinder finds them (cu12 or cu13
    layouts), the nvidia-cuda-nvcc wheel, Triton's copy, then PATH.
    """
    places = []
    try:
        from cuda import pathfinder

        places.append(pathfinder.find_nvidia_binary_utility(name))
    except Exception:  # no cuda-pathfinder, or a layout it rejects: look in the other places
        pass
    for package, sub in (("nvidia.cuda_nvcc", "bin"), ("triton", "backends/nvidia/bin")):
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            spec = None
        for root in (spec.submodule_search_locations or []) if spec else []:
            places.append(Path(root) / sub / name)
    places.append(shutil.which(name))
    found = []
    for place in places:
        if place and Path(place).is_file() and str(Path(place).resolve()) not in map(str, found):
            found.append(Path(place).resolve())
    return [str(p) for p in found]


def find_tool(name):
    """Path of a CUDA tool (ptxas, cuobjdump), the first of `tool_paths`; else None (Chapter 6)."""
    paths = tool_paths(name)
    return paths[0] if paths else None


_PTXAS_FIGURES = {
    "registers": r"Used (\d+) registers",
    "spill_store_bytes": r"(\d+) bytes spill stores",
    "spill_load_bytes": r"(\d+) bytes spill loads",
    "stack_bytes": r"(\d+) bytes stack frame",
    "shared_bytes": r"(\d+) bytes smem",
}


def _assemble(ptx, cc):
    """(ptxas -v's report, cuobjdump's SASS listing, the ptxas used) of `ptx` for sm_<cc> (Chapters 2-6)."""
    ptxases, cuobjdump = tool_paths("ptxas"), find_tool("cuobjdump")
    if not ptxases or not cuobjdump:
        raise RuntimeError("ptxas and cuobjdump are needed (CUDA toolkit, nvidia-cuda-nvcc wheel or Triton)")
    arch = f"sm_{cc[0]}{cc[1]}"
    with tempfile.TemporaryDirectory() as tmp:
        src, cubin = Path(tmp) / "k.ptx", Path(tmp) / "k.cubin"
        src.write_text(ptx)
        failures = []
        for ptxas in ptxases:  # an older ptxas refuses PTX of a newer version: try the next copy
            run = subprocess.run(
                [ptxas, "-v", f"-arch={arch}", str(src), "-o", str(cubin)], capture_output=True, text=True
            )
            if run.returncode == 0:
                break
            failures.append(f"{ptxas}: {run.stderr.strip()[-300:]}")
        else:
            raise RuntimeError("ptxas failed: " + " | ".join(failures))
        dump = subprocess.run([cuobjdump, "-sass", str(cubin)], capture_output=True, text=True)
        if dump.returncode:
            raise RuntimeError(f"cuobjdump failed: {dump.stderr.strip()[-500:]}")
    return run.stderr, dump.stdout, ptxas


def compile_report(ptx, cc, loop_lines=False):
    """`ptxas -v` figures and the SASS instruction mix of `ptx` compiled for sm_<cc> (Chapters 4 and 6).

    Returns {"ptxas": {registers, spill_store_bytes, spill_load_bytes, stack_bytes, shared_bytes},
    "sass": instruction_mix(...)}, with "loop_lines" (`hot_loop`) when asked. Raises RuntimeError when
    ptxas or cuobjdump cannot be found or fail.
    """
    report, sass, ptxas = _assemble(ptx, cc)
    figures = {}
    for key, pattern in _PTXAS_FIGURES.items():
        m = re.search(pattern, report)
        figures[key] = int(m.group(1)) if m else 0
    out = {"arch": f"sm_{cc[0]}{cc[1]}", "ptxas": figures, "sass": instruction_mix(sass)}
    if loop_lines:
        out |= {"loop_lines": hot_loop(sass), "ptxas_version": ptxas_version(ptxas)}
    return out


def sass_opcodes(ptx, cc):
    """The SASS opcodes of `ptx` compiled for sm_<cc> by ptxas, in program order (Chapters 2 and 5).

    `['LDC', 'S2R', ..., 'LDG.E', ..., 'EXIT', 'BRA']`: what the order of a kernel's loads and
    arithmetic is in machine code. Raises RuntimeError when ptxas or cuobjdump cannot be found or fail.
    """
    return [m.group(2) for m in _SASS_LINE.finditer(_assemble(ptx, cc)[1])]


_SASS_LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)([^;]*);")
_KINDS = ("FFMA", "LDS", "LDG", "STS", "STG", "LDL", "STL", "BAR")


def _kind(op):
    """The kind of a SASS opcode for instruction_mix: its base name if one of _KINDS, else 'other'."""
    base = op.split(".")[0]
    return base if base in _KINDS else "other"


def _hot_loop(ops):
    """The body of the loop (a backward branch) that holds the most FFMAs: [(address, opcode, operands)]."""
    best, most = [], 0
    for addr, op, rest in ops:
        target = re.search(r"0x([0-9a-f]+)", rest) if op == "BRA" else None
        if target and int(target.group(1), 16) < addr:
            body = [o for o in ops if int(target.group(1), 16) <= o[0] <= addr]
            ffmas = sum(_kind(o[1]) == "FFMA" for o in body)
            if ffmas > most:
                best, most = body, ffmas
    return best


def hot_loop(sass):
    """The hot loop of a SASS listing (see `instruction_mix`) as 'OPCODE operands' lines (Chapter 4)."""
    ops = [(int(m.group(1), 16), m.group(2), m.group(3)) for m in _SASS_LINE.finditer(sass)]
    return [f"{op} {' '.join(rest.split())}".strip() for _, op, rest in _hot_loop(ops)]


def ptxas_version(path):
    """The release line of a ptxas ('Cuda compilation tools, release 12.9, V12.9.86') (Chapter 4)."""
    run = subprocess.run([path, "--version"], capture_output=True, text=True)
    lines = [line for line in run.stdout.splitlines() if "release" in line]
    return lines[-1].strip() if lines else "unknown"


def instruction_mix(sass):
    """Counts of SASS instructions by kind (FFMA, LDS, LDG, STS, STG, LDL, STL, BAR, other) (Chapter 6).

    For the whole kernel (`total`) and for its hot loop: the loop (a backward branch) whose body holds
    the most FFMAs, counted once per iteration (`loop`), with `ffma_share` = FFMA / all its instructions.
    `lds128` counts the 128-bit shared loads among the LDS.
    """
    ops = [(int(m.group(1), 16), m.group(2), m.group(3)) for m in _SASS_LINE.finditer(sass)]
    total = Counter(_kind(op) for _, op, _ in ops)
    body = [op for _, op, _ in _hot_loop(ops)]
    loop = {}
    if body:
        count = Counter(_kind(o) for o in body)
        loop = {k: count[k] for k in (*_KINDS, "other")}
        loop["instructions"] = len(body)
        loop["lds128"] = sum(o.startswith("LDS") and ".128" in o for o in body)
        loop["ffma_share"] = count["FFMA"] / len(body)
    return {
        "total": {k: total[k] for k in (*_KINDS, "other")}
        | {"instructions": len(ops), "lds128": sum(o.startswith("LDS") and ".128" in o for _, o, _ in ops)},
        "loop": loop,
    }


# What the CUDA driver says of a kernel compiled on this GPU (Chapter 6) ----------------------------


def resources(kernel, threads):
    """Registers and local memory a thread, shared memory and occupancy of a kernel launched on this GPU.

    `kernel` must have run (or been compiled) for exactly one signature; `threads` is its block size.
    The figures come from the CUDA driver, as `nvcc -Xptxas -v` would print them at build time, and
    from its occupancy calculator. A kernel of either numba-cuda or numba-cuda-mlir. Chapter 6.
    """
    from cudalearn.runtime import numba_backend

    cuda = numba_backend.cuda_of(kernel)
    ov = next(iter(kernel.overloads.values()))
    dev = cuda.get_current_device()
    sms = dev.MULTIPROCESSOR_COUNT
    ensure = getattr(ov, "_ensure_kernel_attrs", None)
    if ensure is not None:  # numba-cuda-mlir 0.6.0 asks the driver for the figures on first use
        ensure()
    blocks = ov.max_cooperative_grid_blocks(threads) // sms
    regs, local, shared = ov.regs_per_thread, ov.local_mem_per_thread, ov.shared_mem_per_block
    max_warps = dev.MAX_THREADS_PER_MULTIPROCESSOR // 32
    warps = blocks * ((threads + 31) // 32)
    return {
        "threads_per_block": threads,
        "registers_per_thread": regs,
        "local_bytes_per_thread": local,
        "shared_bytes_per_block": shared,
        "blocks_per_sm": blocks,
        "warps_per_sm": warps,
        "occupancy": warps / max_warps,
    }


def kernel_sass(kernel):
    """The SASS listing of the cubin Numba linked (nvJitLink or the CUDA driver) for a kernel (Chapter 4).

    The machine code that ran, as `cuobjdump -sass` lists it; the kernel must have run (or been
    compiled) for exactly one signature. Raises RuntimeError when cuobjdump cannot be found or fails.
    """
    cuobjdump = find_tool("cuobjdump")
    if not cuobjdump:
        raise RuntimeError("cuobjdump is needed (CUDA toolkit, nvidia-cuda-nvcc wheel or Triton)")
    overload = next(iter(kernel.overloads.values()))
    with tempfile.TemporaryDirectory() as tmp:
        cubin = Path(tmp) / "k.cubin"
        code = overload.library.get_cubin()
        cubin.write_bytes(getattr(code, "code", code))  # numba-cuda 0.30 hands a cuda.core ObjectCode
        dump = subprocess.run([cuobjdump, "-sass", str(cubin)], capture_output=True, text=True)
    if dump.returncode:
        raise RuntimeError(f"cuobjdump failed: {dump.stderr.strip()[-500:]}")
    return dump.stdout


def kernel_ptx(kernel):
    """The PTX of a kernel compiled for one signature on this GPU (Chapter 6)."""
    asm = kernel.inspect_asm()
    return next(iter(asm.values())) if isinstance(asm, dict) else asm


# Nsight Compute (Chapters 4-6) ---------------------------------------------------------------------


def find_ncu():
    """ncu on PATH, else the newest under /opt/nvidia/nsight-compute or a CUDA toolkit (Chapters 4-6)."""
    found = shutil.which("ncu")
    if found:
        return found
    cands = sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu") + glob.glob("/usr/local/cuda*/bin/ncu"))
    return cands[-1] if cands else None


def ncu_command(
    ncu: str,
    child: Sequence[str],
    log: str | Path,
    *,
    metrics: Sequence[str] = (),
    sections: Sequence[str] = (),
    kernels: str | None = None,
    demangled: bool = False,
    all_processes: bool = True,
) -> list[str]:
    """The ncu command line that profiles `child` into the CSV file `log` (details page, base units).

    Clocks are left as the GPU runs them; `all_processes` follows the child's own children;
    `kernels` is an ncu kernel filter (`regex:...`); `demangled` prints whole C++ names, so that
    cuBLAS's CUTLASS kernels keep the `gemm` of their names.
    """
    cmd = [ncu, "--clock-control", "none"]
    if all_processes:
        cmd += ["--target-processes", "all"]
    cmd += ["--csv", "--page", "details", "--print-units", "base", "--log-file", str(log)]
    if demangled:
        cmd += ["--kernel-name-base", "demangled", "--print-kernel-base", "demangled"]
    if kernels:
        cmd += ["-k", kernels]
    for section in sections:
        cmd += ["--section", section]
    if metrics:
        cmd += ["--metrics", ",".join(metrics)]
    return cmd + list(child)


@dataclass
class Profile:
    """One ncu run: its metrics by kernel name, the CSV and the child's output, and what went wrong."""

    metrics: dict
    text: str = ""  # ncu's CSV log, then the child's stdout
    stdout: str = ""
    stderr: str = ""
    returncode: int | None = None
    error: str | None = None  # set when ncu could not run, exited non-zero or no kernel was parsed

    def failure(self, lines: int = 30) -> str | None:
        """None when the profile worked; else the exit code, the kernels parsed and the last lines."""
        if self.error is not None or (self.returncode == 0 and self.metrics):
            return self.error
        tail = "\n".join((self.stderr or self.text).splitlines()[-lines:])
        return f"ncu exit code {self.returncode}; {len(self.metrics)} kernels parsed\n{tail}"


def profile(
    ncu: str,
    child: Sequence[str],
    names: Sequence[str],
    *,
    launch: str = "first",
    timeout: float = 540,
    drop_env: Sequence[str] = ("NUMBA_ENABLE_CUDASIM",),
    echo: bool = True,
    **options,
) -> Profile:
    """Run `child` (a command line) under one ncu; parse the rows of the kernels `names` (Chapters 4-6).

    `options` go to `ncu_command` (metrics, sections, kernels, demangled, all_processes); `launch`
    to `parse_ncu_csv`. The environment loses `drop_env` (the child needs the real GPU target).
    """
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "ncu.csv"
        cmd = ncu_command(ncu, child, log, **options)
        env = {k: v for k, v in os.environ.items() if k not in drop_env}
        if echo:
            print("running:", " ".join(cmd), flush=True)
        try:
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        except (OSError, subprocess.TimeoutExpired) as e:
            return Profile({}, error=f"{type(e).__name__}: {e}")
        text = (log.read_text() if log.exists() else "") + "\n" + proc.stdout
    parsed = parse_ncu_csv(text, names, launch)
    return Profile(parsed, text, proc.stdout, proc.stderr, proc.returncode)


def to_number(text):
    """ncu's '4,096' -> 4096, '12.5' -> 12.5, 'n/a' -> nan."""
    try:
        value = float(text.replace(",", "").strip())
    except ValueError:
        return math.nan
    return int(value) if value.is_integer() else value


def parse_ncu_csv(text, names, launch="first") -> dict:
    """{pattern: {metric: value}} from `ncu --csv` (details page); the first (or last) launch of each kernel.

    A row belongs to the name found inside its kernel name (shown or mangled); where several are, to the
    longest, provided it contains the others (`bias_relu_dropout_pairs` holds `bias_relu_dropout`).
    """
    lines = [line for line in text.splitlines() if line.startswith('"')]
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        return {}
    out, kept_id = {}, {}
    for row in csv.DictReader(lines[start:]):
        matches = sorted((n for n in names if n in (row.get("Kernel Name") or "")), key=len)
        if not matches or any(m not in matches[-1] for m in matches) or row.get("Metric Name") is None:
            continue
        name = matches[-1]
        if kept_id.get(name) != row["ID"]:
            if name in kept_id and launch == "first":
                continue
            kept_id[name] = row["ID"]
            out[name] = {}
        out[name][row["Metric Name"]] = to_number(row["Metric Value"])
    return out


def ncu_versions(ncu=None) -> dict:
    """Versions of Python, numba, numba-cuda, numpy and (given its path) ncu, for a stored profile."""
    from cudalearn.runtime.versions import versions

    out = versions(("numba", "numba-cuda", "numpy"))
    if ncu:
        try:
            res = subprocess.run([ncu, "--version"], capture_output=True, text=True, timeout=60)
            out["ncu"] = res.stdout.strip().splitlines()[-1] if res.stdout.strip() else res.stderr.strip()
        except (OSError, subprocess.TimeoutExpired) as e:
            out["ncu"] = f"error: {e}"
    return out


def no_nan(value):
    """NaN -> None, so the JSON is strict."""
    if isinstance(value, dict):
        return {k: no_nan(v) for k, v in value.items()}
    return None if isinstance(value, float) and math.isnan(value) else value


def child_command(script: str | Path, *args: str) -> list[str]:
    """This Python running `script` with `args`: the child an ncu run profiles."""
    return [sys.executable, str(Path(script).resolve()), *args]
