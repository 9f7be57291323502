"""Benchmark of Chapter 6's deep dive 06d: the hand-written tensor-core kernels against cuBLAS, one run.

    CUDALEARN_MODE=gpu python3 scripts/bench_tc.py --out run.json   # N = 4096 on a GPU, stored as JSON
    python3 scripts/bench_tc.py                                     # a smoke test on the CPU tracer (N = 64)

At N = sizes.size("ch6.tc_n") every candidate computes C = A @ B.T from the same float32 A, B (the FP16 ones
from float16 copies) and is compared with the FP32 product (cuBLAS, TF32 off): its largest error relative to
the largest |C|, recorded under `bench.tc.N{N}.error`. Then all are timed in one `timing.measure` call
(`bench.tc.N{N}`): the 06d steps (`tc_gemm`: one warp a tile, a block tile with padded or swizzled shared
rows, the cp.async pipeline, its fast form `tc_steps.FAST`), Chapter 6's two best float32 kernels and cuBLAS
in FP16, TF32 and FP32. `bench.tc.N{N}.goal` judges issue 33's goal with the numbers of this run: the best
06d kernel at >= 50% of cuBLAS FP16 and >= 5x the best float32 kernel of the course. On a GPU the candidates
for a faster pipeline (`tc_steps.VARIANTS`) are timed in the same run: each is first launched once at N =
512 in a child process (`probe`: a kernel that faults cannot take the run's CUDA context with it), and those
that ran and computed the product join the candidates; what the probe found is `bench.tc.N{N}.probe`, their
tiles `bench.tc.N{N}.variants`, each Numba kernel's registers, local and shared memory
`bench.tc.N{N}.resources`. A kernel counts for the goal only with an error below `TOLERANCE`. `bench.tc.mlp`
times Chapter 5's network's forward pass (`mlp_tc`) in FP16 on the tensor-core kernel against the same
network's float32 forward pass (`TunedMLP`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from cudalearn.chapters.ch06.tc_steps import STEPS, VARIANTS, build, build_variants, table, tc_call
from cudalearn.runtime import device, sizes

BASELINE = "cuBLAS FP16"
GOAL_CUBLAS, GOAL_FP32 = 0.5, 5.0  # issue 33
#: largest error relative to max |C| of a kernel that counts: FP16 inputs give ~1e-3 at N = 4096
TOLERANCE = 1e-2
PROBE_N = 512
PROBE_TIMEOUT_S = 180  # a child compiles and launches the variants one by one, ~3 s each
FP32_STEPS = ("regblock_2d_warptile", "regblock_2d_async")  # Chapter 6's best float32 kernels


def key(n: int) -> str:
    """The reference-data key of size n."""
    return f"bench.tc.N{n}"


def candidates(n, cc, variants=(), kernels=None):
    """({name: callable}, {name: relative error against FP32}) for the run at size n, with the named
    `variants` of `tc_steps.VARIANTS`; `kernels`, a dict, receives {name: Numba kernel} of the 06d ones."""
    import torch

    from cudalearn.chapters.ch06 import bench
    from cudalearn.runtime import precision

    dev = device.torch_device()
    g = torch.Generator().manual_seed(0)
    a32 = torch.randn(n, n, generator=g).to(dev)
    b32 = torch.randn(n, n, generator=g).to(dev)  # B as (n, k): C = A @ B.T
    bt32 = b32.T.contiguous()  # the float32 kernels take B as (k, n)
    a16, b16 = a32.half(), b32.half()
    precision.set_fp32()
    ref = torch.matmul(a32, b32.T).float().cpu().numpy()
    bias = torch.zeros(n, device=dev)
    c32 = torch.empty(n, n, device=dev)
    c16 = torch.empty(n, n, device=dev, dtype=torch.float16)
    found = {}
    built = {**build(cc), **build_variants(cc, list(variants))}
    for step, (kernel, tiles) in built.items():
        if tiles and (n % tiles["BM"] or n % tiles["BN"]):  # the tracer's N is below this step's tile
            continue
        found[step] = tc_call(kernel, tiles, a16, b16, bias, c32)
        if kernels is not None:
            kernels[step] = kernel
    if device.mode() == "gpu":
        from cudalearn.runtime.numba_backend import cuda

        dA, dB, dC = cuda.as_cuda_array(a32), cuda.as_cuda_array(bt32), cuda.as_cuda_array(c32)
        for name, (kernel, tiles) in bench.numba_kernels(cc).items():
            if name in FP32_STEPS:
                found[f"{name} FP32 (Ch. 6)"] = bench.launch(name, kernel, tiles, n, dA, dB, dC)
    found["cuBLAS FP16"] = lambda: torch.matmul(a16, b16.T, out=c16)
    for p in ("TF32", "FP32"):
        found[f"cuBLAS {p}"] = bench.cublas_call(p, a32, b32.T, c32)
    errors = {}
    for name, fn in found.items():
        c32.fill_(float("nan"))
        c16.fill_(float("nan"))
        fn()
        got = (c16 if name == "cuBLAS FP16" else c32).float().cpu().numpy()
        errors[name] = float(np.abs(got - ref).max() / np.abs(ref).max())
    precision.set_fp32()
    return found, errors


def verdict(results, errors=None) -> dict | None:
    """The best 06d kernel's fraction of cuBLAS FP16 and speed-up over the best float32 kernel, one run
    (with `errors`, only kernels whose error is below TOLERANCE)."""
    rate = {r["name"]: r.get("gflops") for r in results.rows}
    ok = {s for s in (*STEPS, *VARIANTS) if errors is None or errors.get(s, np.inf) < TOLERANCE}
    tc = {s: rate.get(s) for s in (*STEPS, *VARIANTS) if rate.get(s) and s in ok}
    fp32 = {s: g for s, g in rate.items() if g and s.endswith("FP32 (Ch. 6)")}
    if not tc or not fp32 or not rate.get(BASELINE):
        return None
    best, best32 = max(tc, key=tc.get), max(fp32, key=fp32.get)
    frac, speedup = tc[best] / rate[BASELINE], tc[best] / fp32[best32]
    return {
        "best": best,
        "best_fp32": best32,
        "fraction_of_cublas_fp16": frac,
        "speedup_over_best_fp32": speedup,
        "goal": {"fraction_of_cublas_fp16": GOAL_CUBLAS, "speedup_over_best_fp32": GOAL_FP32},
        "met": frac >= GOAL_CUBLAS and speedup >= GOAL_FP32,
    }


def verdict_line(v: dict) -> str:
    """The goal's verdict in two lines."""
    return (
        f"goal: {v['best']} at {v['fraction_of_cublas_fp16']:.0%} of cuBLAS FP16 (goal >= {GOAL_CUBLAS:.0%})"
        f"\n      and {v['speedup_over_best_fp32']:.1f}x {v['best_fp32']} (goal >= {GOAL_FP32:.0f}x),"
        f" same run: {'met' if v['met'] else 'MISSED'}"
    )


def probe_child(indices: list[int]) -> int:
    """In a child process: launch each variant (by index into VARIANTS) once at PROBE_N and print
    `PROBE i ok|wrong|failed detail`; stop at the first that fails (its fault may have spoilt the context)."""
    import torch

    from cudalearn.measure import timing

    device.setup()
    n, cc = PROBE_N, device.info().compute_capability
    names = list(VARIANTS)
    g = torch.Generator().manual_seed(1)
    a16 = torch.randn(n, n, generator=g).half().to(device.torch_device())
    b16 = torch.randn(n, n, generator=g).half().to(device.torch_device())
    ref = (a16.float() @ b16.float().T).cpu().numpy()
    for i in indices:
        try:
            ((kernel, tiles),) = build_variants(cc, [names[i]]).values()
            c = torch.full((n, n), float("nan"), device=a16.device)
            tc_call(kernel, tiles, a16, b16, torch.zeros(n, device=a16.device), c)()
            timing.synchronize()
            err = float(np.abs(c.cpu().numpy() - ref).max() / np.abs(ref).max())
        except Exception as e:  # noqa: BLE001 - reported to the parent, which goes on without it
            print(f"PROBE {i} failed {type(e).__name__}: {str(e)[:300]}".replace("\n", " "), flush=True)
            return 3
        print(f"PROBE {i} {'ok' if err < TOLERANCE else 'wrong'} error {err:.2e}", flush=True)
    return 0


def probe(names) -> dict:
    """{variant: 'ok error ...' | 'wrong ...' | 'failed ...' | 'crashed ...'}: each launched once at
    PROBE_N in child processes, a new child after each failure."""
    index = {name: i for i, name in enumerate(VARIANTS)}
    rest, found = [index[n] for n in names], {}
    env = {k: v for k, v in os.environ.items() if k != "CUDALEARN_RECORD"}
    src = str(Path(__file__).resolve().parents[3])  # this package, installed or not
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    while rest:
        before = len(rest)
        cmd = [sys.executable, "-m", "cudalearn.chapters.ch06.bench_tc", "--probe", *map(str, rest)]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=PROBE_TIMEOUT_S)
            out, err = r.stdout, r.stderr
        except subprocess.TimeoutExpired as e:
            out, err = e.stdout or "", f"timed out after {PROBE_TIMEOUT_S} s"
            out = out.decode() if isinstance(out, bytes) else out
        for line in out.splitlines():
            if line.startswith("PROBE "):
                _, i, verdict = line.split(" ", 2)
                found[list(VARIANTS)[int(i)]] = verdict
                rest.remove(int(i))
        if len(rest) == before:  # the child died in the first without a word
            first = rest.pop(0)
            found[list(VARIANTS)[first]] = "crashed: " + " ".join(err.strip().splitlines()[-3:])[:400]
    return found


def resources(kernels, tiles) -> dict:
    """{name: registers and local bytes a thread, static and dynamic shared bytes} of compiled kernels."""
    from cudalearn.chapters.ch06.kernels import tc_parts

    def one(figure):  # one compiled signature: a number; several: {signature: number}
        if isinstance(figure, dict) and len(figure) == 1:
            return next(iter(figure.values()))
        return figure if not isinstance(figure, dict) else {str(s): v for s, v in figure.items()}

    out = {}
    for name, k in kernels.items():
        try:
            out[name] = {
                "registers": one(k.get_regs_per_thread()),
                "local_bytes": one(k.get_local_mem_per_thread()),
                "static_shared_bytes": one(k.get_shared_mem_per_block()),
                "dynamic_shared_bytes": tc_parts.shared_bytes(tiles[name])
                if tiles.get(name, {}).get("dynamic")
                else 0,
            }
        except Exception as e:  # noqa: BLE001 - a figure missing is reported, not fatal
            out[name] = {"error": f"{type(e).__name__}: {e}"[:200]}
    return out


def main(argv: list[str] | None = None) -> int:
    """Check, time and record the 06d kernels at N and the MLP forward pass; print the verdict."""
    from cudalearn.chapters.ch06 import mlp_tc
    from cudalearn.measure import reference, timing

    parser = argparse.ArgumentParser(prog="bench_tc", description=__doc__.splitlines()[0])
    parser.add_argument("n", nargs="?", type=int, help="matrix size (default: sizes ch6.tc_n)")
    parser.add_argument("--out", help="write the run's figures to this JSON file (CUDALEARN_RECORD)")
    parser.add_argument("--no-variants", action="store_true", help="time only the 06d steps")
    parser.add_argument("--probe", nargs="+", type=int, help=argparse.SUPPRESS)  # the child of `probe`
    args = parser.parse_args(argv)
    if args.probe:
        return probe_child(args.probe)
    if args.out:
        os.environ[reference.RECORD_ENV] = os.path.abspath(args.out)
    device.setup()
    n = args.n or sizes.size("ch6.tc_n")
    cc = device.info().compute_capability
    variants = []
    if device.mode() == "gpu" and VARIANTS and not args.no_variants and tuple(cc) >= (8, 0):
        probed = probe(list(VARIANTS))
        reference.record(key(n) + ".probe", probed)
        print("variants launched once at N =", PROBE_N, "in a child process:")
        print("\n".join(f"  {name:<40} {v}" for name, v in probed.items()))
        variants = [name for name, v in probed.items() if v.startswith("ok")]
        reference.record(key(n) + ".variants", {name: VARIANTS[name] for name in VARIANTS})  # their tiles
    kernels = {}
    found, errors = candidates(n, cc, variants, kernels)
    reference.record(key(n) + ".error", errors)
    print("largest error relative to max |C| of the FP32 product:")
    print("\n".join(f"  {name:<40} {e:.2e}" for name, e in errors.items()))
    results = timing.measure(key(n), found, baseline=BASELINE, flops=2 * n**3, size={"N": n, "C": "A @ B.T"})
    print(table(results))
    if device.mode() == "gpu":
        from cudalearn.chapters.ch06.tc_steps import tiles_for

        tiles = {name: tiles_for(name, cc) for name in kernels if name in VARIANTS}
        used = reference.record(key(n) + ".resources", resources(kernels, tiles))
        print("registers and local memory a thread, shared memory a block:")
        print("\n".join(f"  {name:<40} {r}" for name, r in used.items()))
    if device.mode() != "gpu":
        results = timing.stored_results(key(sizes.size("ch6.tc_n", "gpu")))
        print(table(results) if results is not None else "no stored GPU run yet")
        if results is None:
            return 0
    v = verdict(results, errors if device.mode() == "gpu" else None)
    print(verdict_line(v) if v else "goal: not judged (no GPU times for the kernels it compares)")
    if v and device.mode() == "gpu":
        reference.record(key(n) + ".goal", v)
    print(mlp_tc.compare())
    stored = reference.recording()
    if args.out and stored is not None and stored.exists():  # the run names its script, as gpu_run.py's do
        data = json.loads(stored.read_text())
        stored.write_text(reference.dumps({**data, "source": "scripts/bench_tc.py"}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
