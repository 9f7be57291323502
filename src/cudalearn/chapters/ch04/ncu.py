"""The tracer's counts against Nsight Compute's hardware counters, on the pattern catalogue (Chapter 4).

`tracer_result()` traces every pattern of `cudalearn.chapters.ch04.patterns` on the CPU (any machine);
`gpu_result(script)` does the same and profiles them all under ONE ncu run over `script launch`,
which calls `launch_patterns`; `compare_lines` prints the two side by side, each difference
flagged. `scripts/ncu_compare.py` is the command line; Chapter 4 reads the stored run
(`reference.lookup("ch4.ncu_compare")`, data/reference/h200-ncu-compare.json). KNOWN lists the
differences that come from the compiler, not from the tracer's model.
"""

import datetime
import json
import sys
import tempfile
from pathlib import Path

from cudalearn.chapters.ch04.patterns import close, patterns
from cudalearn.compile import toolchain

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


def run_tracer(pats) -> dict:
    """Trace every pattern on the CPU: counters, races, and whether the output is right."""
    from cudalearn.trace import trace

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


def launch_patterns(names) -> dict:
    """Run the named patterns (all when empty) once each on the GPU: {device, cc, results}."""
    from cudalearn.runtime.numba_backend import SIMULATOR, cuda

    if SIMULATOR:
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
    return meta


def _now():
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def launch_of(p):
    """A pattern's launch configuration as JSON."""
    return {"griddim": list(p.griddim), "blockdim": list(p.blockdim)}


def tracer_result() -> dict:
    """Every pattern traced (any machine), as the JSON `scripts/ncu_compare.py tracer` writes."""
    pats = patterns()
    result = {
        "device": "none (CPU tracer)",
        "date": _now(),
        "versions": toolchain.ncu_versions(),
        "metrics": METRICS,
        "patterns": {},
    }
    tracer = run_tracer(pats)
    for name, p in pats.items():
        result["patterns"][name] = {"launch": launch_of(p), "tracer": tracer[name]}
    return result


def gpu_result(script, out_path=None) -> tuple:
    """(result, error): every pattern traced and profiled under one ncu over `script launch --meta FILE`.

    ncu's raw CSV is kept beside `out_path` (FILE.ncu.csv), to re-check the parsing.
    """
    pats = patterns()
    tracer = run_tracer(pats)
    ncu = toolchain.find_ncu()
    if ncu is None:
        parsed, meta, error, raw = {}, {}, "ncu not found on PATH nor under /opt/nvidia/nsight-compute", ""
    else:
        with tempfile.TemporaryDirectory() as tmp:
            meta_path = Path(tmp) / "meta.json"
            child = toolchain.child_command(script, "launch", "--meta", str(meta_path))
            prof = toolchain.profile(ncu, child, list(pats), metrics=list(METRICS))
            meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
        if prof.stdout or prof.returncode is not None:
            print(prof.stdout)
        if prof.stderr:
            print("ncu stderr:\n" + prof.stderr, file=sys.stderr)
        parsed, error, raw = prof.metrics, prof.failure(), prof.text
    if out_path and raw:
        Path(out_path).with_suffix(".ncu.csv").write_text(raw)
    if error:
        print(error, file=sys.stderr)
    result = {
        "device": meta.get("device", "unknown") + (f" (cc {meta['cc']})" if "cc" in meta else ""),
        "date": _now(),
        "versions": toolchain.ncu_versions(ncu),
        "metrics": METRICS,
        "ncu_error": error,
        "patterns": {},
    }
    for name, p in pats.items():
        result["patterns"][name] = {
            "launch": launch_of(p),
            "tracer": tracer[name],
            "ncu": parsed.get(name) or {"error": error or "no ncu row for this kernel"},
            "gpu": meta.get("results", {}).get(name, {}),
        }
    return result, error


def _fmt(v):
    """A table cell: '-' for a missing value."""
    return "-" if v is None else str(v)


def compare_lines(data) -> list:
    """Tracer vs ncu for every pattern and metric of a stored result, each difference flagged."""
    lines = [f"device: {data.get('device')}  date: {data.get('date')}  versions: {data.get('versions')}"]
    if data.get("ncu_error"):
        lines.append(f"ncu error: {data['ncu_error']}")
    metrics = data.get("metrics", METRICS)
    same = total = 0
    lines.append(f"{'pattern':<22} {'tracer counter':<28} {'tracer':>9} {'ncu':>9}  flag")
    for name, entry in data["patterns"].items():
        tracer, ncu = entry.get("tracer", {}), entry.get("ncu") or {}
        for problem in (tracer.get("error"), ncu.get("error"), entry.get("gpu", {}).get("error")):
            if problem:
                lines.append(f"{name:<22} error: {problem.splitlines()[0]}")
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
            lines.append(f"{name:<22} {counter:<28} {_fmt(t):>9} {_fmt(n):>9}  {flag}")
        for side, ok in (("tracer", tracer.get("output_ok")), ("gpu", entry.get("gpu", {}).get("output_ok"))):
            if ok is False:
                lines.append(f"{name:<22} {side} output is WRONG")
    lines.append(f"{same} of {total} compared counts agree" if total else "no ncu counts to compare")
    return lines
