"""Compare cudalearn.trace's counts with Nsight Compute's hardware counters (Chapter 4).

    python scripts/ncu_compare.py tracer --out tracer.json   # any machine; the simulator is fine
    python scripts/ncu_compare.py gpu --out ncu.json         # a GPU machine with ncu: tracer + ncu
    python scripts/ncu_compare.py compare ncu.json           # table: tracer vs ncu, differences flagged
    python scripts/ncu_compare.py launch [NAME ...]          # used by `gpu`: run patterns on the GPU

Each pattern is a small float32 (or float64) kernel with a fixed launch, so
tracing it on the CPU takes well under a second (the matmuls about one to
three). Besides the hand-written patterns below, the course's own kernels of
Chapters 2-4 (cudalearn.kernels: naive, tiled, padded and transposed-tile
matmuls, transposes) are compared, each under a name of its own.
`gpu` runs ONE ncu process over `launch`, which runs every pattern once, and
writes FILE.json plus ncu's raw CSV beside it (FILE.ncu.csv). With numba-cuda
0.30 the GPU side needs numpy < 2.5 (see `cudalearn doctor`). KNOWN lists the
differences that come from the compiler, not from the tracer's model.
"""

import argparse
import csv
import datetime
import glob
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import types
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numba import cuda, float32, float64

ROOT = Path(__file__).resolve().parents[1]
try:
    from cudalearn.trace import trace
except ImportError:  # run from a checkout without installing the package
    sys.path.insert(0, str(ROOT / "src"))
    from cudalearn.trace import trace

# ncu metric -> the tracer counter it should equal; fix names here only.
METRICS = {
    "smsp__sass_inst_executed_op_shared_ld.sum": "shared_load_requests",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum": "shared_load_wavefronts",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum": "shared_load_bank_conflicts",
    "smsp__sass_inst_executed_op_shared_st.sum": "shared_store_requests",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum": "shared_store_wavefronts",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum": "shared_store_bank_conflicts",
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": "global_load_requests",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": "global_load_sectors",
    "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum": "global_store_requests",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum": "global_store_sectors",
}
# (pattern, tracer counter) -> why ncu differs; seen on an H200 with ncu 2025.3.1, numba-cuda 0.30.4
_MERGED_A = "compiler: 4 sA[ty, k] reads -> one 128-bit load"
_MERGED_AB = "compiler: 4 reads of each tile along k -> one 128-bit load; conflicts per wavefront kept"
KNOWN = {
    **{
        (name, counter): _MERGED_A
        for name in ("course_tiled_16x16", "course_tiled_32x32", "course_bt_32x33")
        for counter in ("shared_load_requests", "shared_load_wavefronts")
    },
    **{
        ("course_bt_32x32", counter): _MERGED_AB
        for counter in ("shared_load_requests", "shared_load_wavefronts", "shared_load_bank_conflicts")
    },
}
N = 64  # matmul size
THREADS = 128  # threads of the 1-D patterns: 4 warps
SHARED = 4096  # float32 words of shared memory in the stride patterns (16 KiB)


# --- pattern kernels -------------------------------------------------------


def named(name, fn):
    """Give a kernel factory's inner function its own name, so ncu shows it apart."""
    fn.__name__ = fn.__qualname__ = name
    return cuda.jit(fn)


def make_shared_stride(stride):
    """out[t] = s[t * stride] after a unit-stride fill of s: gcd(stride, 32)-way conflicts."""

    def kernel(inp, out):
        s = cuda.shared.array(SHARED, float32)
        t = cuda.threadIdx.x
        for j in range(SHARED // THREADS):
            s[t + j * THREADS] = inp[t + j * THREADS]
        cuda.syncthreads()
        out[t] = s[t * stride]

    return named(f"shared_stride_{stride:02d}", kernel)


@cuda.jit
def shared_broadcast(inp, out):
    """All lanes read s[7]: a broadcast, one wavefront a request."""
    s = cuda.shared.array(THREADS, float32)
    t = cuda.threadIdx.x
    s[t] = inp[t]
    cuda.syncthreads()
    out[t] = s[7]


@cuda.jit
def shared_f64_stride_01(inp, out):
    """Consecutive float64: 2 wavefronts a request, no bank conflict."""
    s = cuda.shared.array(THREADS, float64)
    t = cuda.threadIdx.x
    s[t] = inp[t]
    cuda.syncthreads()
    out[t] = s[t]


@cuda.jit
def tile_col_read_32x32(inp, out):
    """A warp reads a column of a 32x32 float32 tile: 32-way conflict."""
    tile = cuda.shared.array((32, 32), float32)
    x = cuda.threadIdx.x
    y = cuda.threadIdx.y
    tile[y, x] = inp[y, x]
    cuda.syncthreads()
    out[y, x] = tile[x, y]


@cuda.jit
def tile_col_read_32x33(inp, out):
    """The same column read with a padding column (32x33): conflict-free."""
    tile = cuda.shared.array((32, 33), float32)
    x = cuda.threadIdx.x
    y = cuda.threadIdx.y
    tile[y, x] = inp[y, x]
    cuda.syncthreads()
    out[y, x] = tile[x, y]


def course_modules():
    """cudalearn.kernels' matmul, tiled and transpose modules, imported in a mode this process can give.

    Importing cudalearn.kernels runs cudalearn.setup(); with Numba's real CUDA
    target and no GPU (tracing on a laptop), that is the 'compile' mode.
    """
    from numba import config

    from cudalearn import device

    if not config.ENABLE_CUDASIM and not cuda.is_available():
        device.setup("compile", quiet=True)
    from cudalearn.kernels import matmul, tiled, transpose

    return matmul, tiled, transpose


def course_kernel(name, kernel):
    """A copy of a course kernel (cudalearn.kernels) under its own name, so ncu shows it apart.

    The copy shares the kernel's code, globals and closure (its tile size), so
    it compiles to the same machine code and the tracer reads the same source.
    """
    fn = kernel.py_func
    copy = types.FunctionType(fn.__code__, fn.__globals__, name, fn.__defaults__, fn.__closure__)
    copy.__qualname__ = name
    copy.__doc__ = fn.__doc__
    return cuda.jit(copy)


def make_global_stride(stride, dtype=float32):
    """out[t] = inp[t * stride]: 32 lanes x stride x itemsize bytes spread over sectors."""

    def kernel(inp, out):
        t = cuda.grid(1)
        out[t] = inp[t * stride]

    prefix = "global_f64" if dtype is float64 else "global"
    return named(f"{prefix}_stride_{stride:02d}", kernel)


@dataclass
class Pattern:
    """A kernel, its launch, its numpy inputs and the expected output (index into args)."""

    kernel: object
    griddim: tuple
    blockdim: tuple
    args: list
    out: int
    expected: np.ndarray


def patterns() -> dict:
    """All patterns by kernel name (Chapter 4 compares them with ncu)."""
    rng = np.random.default_rng(0)
    f32 = np.arange(SHARED, dtype=np.float32)
    out = np.zeros(THREADS, np.float32)
    tile = np.arange(32 * 32, dtype=np.float32).reshape(32, 32)
    A = rng.standard_normal((N, N)).astype(np.float32)
    B = rng.standard_normal((N, N)).astype(np.float32)
    C = np.zeros((N, N), np.float32)
    idx = np.arange(THREADS)
    found = []
    for s in (1, 2, 4, 8, 16, 32):
        found.append(Pattern(make_shared_stride(s), (1,), (THREADS,), [f32, out], 1, f32[idx * s]))
    found += [
        Pattern(shared_broadcast, (1,), (THREADS,), [f32[:THREADS], out], 1, np.full(THREADS, 7.0)),
        Pattern(shared_f64_stride_01, (1,), (THREADS,), [idx * 1.0, idx * 0.0], 1, idx * 1.0),
        Pattern(tile_col_read_32x32, (1,), (32, 32), [tile, tile * 0], 1, tile.T),
        Pattern(tile_col_read_32x33, (1,), (32, 32), [tile, tile * 0], 1, tile.T),
    ]
    for s in (1, 2, 4, 8, 32):
        found.append(Pattern(make_global_stride(s), (1,), (THREADS,), [f32, out], 1, f32[idx * s]))
    f64 = np.arange(THREADS, dtype=np.float64)
    found.append(Pattern(make_global_stride(1, float64), (1,), (THREADS,), [f64, f64 * 0], 1, f64))
    # the course's own kernels (Chapters 2-4), on the same A, B (N x N) and a 64 x 64 transpose
    course_matmul, course_tiled, course_transpose = course_modules()
    mm = [
        ("course_matmul_naive", course_matmul.matmul_naive, 16),
        ("course_tiled_16x16", course_tiled.matmul_tiled16, 16),
        ("course_tiled_32x32", course_tiled.matmul_tiled32, 32),
        ("course_tiled_32x33", course_tiled.matmul_tiled32_padded, 32),
        ("course_bt_32x32", course_tiled.matmul_bt_tiled32, 32),
        ("course_bt_32x33", course_tiled.matmul_bt_tiled32_padded, 32),
    ]
    for name, kernel, t in mm:
        found.append(Pattern(course_kernel(name, kernel), (N // t, N // t), (t, t), [A, B, C], 2, A @ B))
    src = rng.standard_normal((N, N)).astype(np.float32)
    tr = [
        ("course_transpose_naive", course_transpose.transpose_naive),
        ("course_transpose_32x32", course_transpose.transpose_tiled32),
        ("course_transpose_32x33", course_transpose.transpose_tiled32_padded),
    ]
    for name, kernel in tr:
        found.append(
            Pattern(course_kernel(name, kernel), (N // 32, N // 32), (32, 32), [src, src * 0], 1, src.T)
        )
    byname = {p.kernel.py_func.__name__: p for p in found}
    clash = [(a, b) for a in byname for b in byname if a != b and a in b]
    assert not clash, f"a pattern name inside another breaks ncu row matching: {clash}"
    return byname


def close(got, want):
    """Whether an output matches its numpy reference (float32 tolerance)."""
    return bool(np.allclose(got, want, rtol=1e-4, atol=1e-4))


# --- modes -----------------------------------------------------------------


def run_tracer(pats) -> dict:
    """Trace every pattern on the CPU: counters, races, and whether the output is right."""
    out = {}
    for name, p in pats.items():
        try:
            rep = trace(p.kernel, p.griddim, p.blockdim, *p.args)
        except Exception as e:  # record, keep going
            out[name] = {"error": f"{type(e).__name__}: {e}"}
            continue
        counts = {k: v for k, v in rep.counters().items() if k in METRICS.values()}
        out[name] = {**counts, "races": rep.race_count, "output_ok": close(rep.outputs[p.out], p.expected)}
    return out


def cmd_launch(names, meta_path):
    """Run the named patterns (all by default) once each on the GPU; write device and results."""
    from numba import config

    if config.ENABLE_CUDASIM:
        sys.exit("launch needs a real GPU: unset NUMBA_ENABLE_CUDASIM")
    pats = patterns()
    dev = cuda.get_current_device()
    meta = {"device": dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name)}
    meta["cc"] = ".".join(map(str, dev.compute_capability))
    meta["results"] = {}
    for name in names or list(pats):
        p = pats[name]
        try:
            dargs = [cuda.to_device(a) for a in p.args]
            p.kernel[p.griddim, p.blockdim](*dargs)
            cuda.synchronize()
            ok = close(dargs[p.out].copy_to_host(), p.expected)
            meta["results"][name] = {"output_ok": ok}
        except Exception as e:
            meta["results"][name] = {"error": f"{type(e).__name__}: {e}"}
        print(f"launched {name}: {meta['results'][name]}", flush=True)
    if meta_path:
        Path(meta_path).write_text(json.dumps(meta, indent=1))


def find_ncu():
    """ncu on PATH, else the newest under /opt/nvidia/nsight-compute or a CUDA toolkit."""
    found = shutil.which("ncu")
    if found:
        return found
    cands = sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu") + glob.glob("/usr/local/cuda*/bin/ncu"))
    return cands[-1] if cands else None


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


def run_ncu(ncu, names):
    """One ncu run over `launch` of all patterns: (metrics by pattern, launch meta, error, raw text)."""
    with tempfile.TemporaryDirectory() as tmp:
        log, meta = Path(tmp) / "ncu.csv", Path(tmp) / "meta.json"
        cmd = [ncu, "--clock-control", "none", "--target-processes", "all", "--csv", "--page", "details"]
        cmd += ["--print-units", "base", "--metrics", ",".join(METRICS), "--log-file", str(log)]
        cmd += [sys.executable, str(Path(__file__).resolve()), "launch", "--meta", str(meta)]
        env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
        print("running:", " ".join(cmd), flush=True)
        try:
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=540)
        except (OSError, subprocess.TimeoutExpired) as e:
            return {}, {}, f"{type(e).__name__}: {e}", ""
        print(proc.stdout)
        if proc.stderr:
            print("ncu stderr:\n" + proc.stderr, file=sys.stderr)
        text = (log.read_text() if log.exists() else "") + "\n" + proc.stdout
        parsed = parse_ncu_csv(text, names)
        launch_meta = json.loads(meta.read_text()) if meta.exists() else {}
        error = None
        if proc.returncode != 0 or not parsed:
            tail = "\n".join((proc.stderr or text).splitlines()[-30:])
            error = f"ncu exit code {proc.returncode}; {len(parsed)} kernels parsed\n{tail}"
        return parsed, launch_meta, error, text


def versions(ncu=None) -> dict:
    """Versions of Python, numba, numba-cuda, numpy and ncu."""
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": sys.version.split()[0]}
    for pkg in ("numba", "numba-cuda", "numpy"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = None
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


def cmd_tracer(out_path):
    """Trace every pattern (any machine) and write the tracer's counts."""
    pats = patterns()
    result = {
        "device": "none (CPU tracer)",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "versions": versions(),
        "metrics": METRICS,
        "patterns": {},
    }
    tracer = run_tracer(pats)
    for name, p in pats.items():
        result["patterns"][name] = {"launch": launch_of(p), "tracer": tracer[name]}
    write(out_path, result)


def launch_of(p):
    """A pattern's launch configuration as JSON."""
    return {"griddim": list(p.griddim), "blockdim": list(p.blockdim)}


def cmd_gpu(out_path):
    """Trace every pattern, profile them all under one ncu, write one JSON; 1 if ncu failed."""
    pats = patterns()
    tracer = run_tracer(pats)
    ncu = find_ncu()
    if ncu is None:
        parsed, meta, error, raw = {}, {}, "ncu not found on PATH nor under /opt/nvidia/nsight-compute", ""
    else:
        parsed, meta, error, raw = run_ncu(ncu, list(pats))
    if out_path and raw:
        Path(out_path).with_suffix(".ncu.csv").write_text(raw)  # kept to re-check the parsing
    if error:
        print(error, file=sys.stderr)
    result = {
        "device": meta.get("device", "unknown") + (f" (cc {meta['cc']})" if "cc" in meta else ""),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "versions": versions(ncu),
        "metrics": METRICS,
        "ncu_error": error,
        "patterns": {},
    }
    for name, p in pats.items():
        gpu = meta.get("results", {}).get(name, {})
        ncu_row = parsed.get(name) or {"error": error or "no ncu row for this kernel"}
        result["patterns"][name] = {
            "launch": launch_of(p),
            "tracer": tracer[name],
            "ncu": ncu_row,
            "gpu": gpu,
        }
    write(out_path, result)
    return 1 if error else 0


def write(path, result):
    """Write the result as JSON to path, or print it."""
    text = json.dumps(no_nan(result), indent=1)
    if path:
        Path(path).write_text(text + "\n")
        print(f"wrote {path}")
    else:
        print(text)


def cmd_compare(path):
    """Print tracer vs ncu for every pattern and metric; flag each difference."""
    data = json.loads(Path(path).read_text())
    print(f"device: {data.get('device')}  date: {data.get('date')}  versions: {data.get('versions')}")
    if data.get("ncu_error"):
        print(f"ncu error: {data['ncu_error']}")
    metrics = data.get("metrics", METRICS)
    same = total = 0
    print(f"{'pattern':<22} {'tracer counter':<28} {'tracer':>9} {'ncu':>9}  flag")
    for name, entry in data["patterns"].items():
        tracer, ncu = entry.get("tracer", {}), entry.get("ncu") or {}
        for problem in (tracer.get("error"), ncu.get("error"), entry.get("gpu", {}).get("error")):
            if problem:
                print(f"{name:<22} error: {problem.splitlines()[0]}")
        for metric, counter in metrics.items():
            t, n = tracer.get(counter), ncu.get(metric)
            if t is None and n is None:
                continue
            flag = ""
            if n is not None and t is not None:
                total += 1
                same += t == n
                flag = "" if t == n else f"DIFF x{n / t:.2f}" if t else "DIFF"
                flag += f" (known: {KNOWN[name, counter]})" if flag and (name, counter) in KNOWN else ""
            print(f"{name:<22} {counter:<28} {fmt(t):>9} {fmt(n):>9}  {flag}")
        for side, ok in (("tracer", tracer.get("output_ok")), ("gpu", entry.get("gpu", {}).get("output_ok"))):
            if ok is False:
                print(f"{name:<22} {side} output is WRONG")
    print(f"{same} of {total} compared counts agree" if total else "no ncu counts to compare")


def fmt(v):
    """A table cell: '-' for a missing value."""
    return "-" if v is None else str(v)


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
        cmd_tracer(args.out)
    elif args.mode == "gpu":
        sys.exit(cmd_gpu(args.out))
    elif args.mode == "compare":
        cmd_compare(args.file)
    else:
        cmd_launch(args.names, args.meta)


if __name__ == "__main__":
    main()
