"""Benchmark of Chapter 6: every float32 and tensor-core matmul of the course against cuBLAS, one run.

    CUDALEARN_MODE=gpu python3 scripts/bench_gemm.py      # N = 4096 on a GPU (plus Nsight Compute if found)
    python3 scripts/bench_gemm.py                         # a smoke test under the simulator (N = 32)

At N = sizes.size("ch6.bench_n"), every candidate is first checked against cuBLAS FP32, then
all are timed in one `timing.measure` call (CUDA events, warm-up, median), recorded under
`bench.gemm.N{N}` when CUDALEARN_RECORD is set (scripts/gpu_run.py sets it): Chapter 3's tiled
kernel (if the package has it), the six register-blocked Numba kernels of Chapter 6, the Triton
matmul (FP32, TF32, FP16, if Triton is installed) and cuBLAS through PyTorch in FP32 (TF32 off),
TF32, FP16 and BF16 (TF32 and BF16 only from sm_80 on). The last lines judge the chapter's goal
with the numbers of this same run: the best Numba kernel at 85% or more of cuBLAS FP32, and
faster than Triton FP32.

It also records, per Numba kernel, what limits it (`bench.gemm.N{N}.resources`): registers and
local memory a thread, shared memory a block and occupancy (from the CUDA driver, the figures
`nvcc -Xptxas -v` prints), and the SASS instruction mix of its hot loop (ptxas and cuobjdump, from
the nvidia-cuda-nvcc wheel or Triton). Where Nsight Compute (`ncu`) is installed, it profiles one
launch of each Numba kernel and of cuBLAS FP32 (`bench.gemm.N{N}.ncu`); `--no-ncu` skips that.

Under the simulator nothing is timed: each candidate runs once at the small size, and the stored
reference figures of the GPU size are shown, if any. `scripts/bench_gemm.py` is the command line of
`main` here.
"""

from __future__ import annotations

import argparse
import json
import math
import sys

from cudalearn.runtime import device, sizes
from cudalearn.runtime import launch as grids

BASELINE = "cuBLAS FP32"
GOAL = 0.85  # the best Numba kernel's speed as a fraction of cuBLAS FP32 (issue 17) ...
RIVAL = "Triton FP32"  # ... and faster than Triton's FP32 matmul in the same run
TILED = "tiled T=32 (Ch. 3)"
NUMBA_STEPS = (
    "regblock_1d",
    "regblock_2d_simple",
    "regblock_2d_vec",
    "regblock_2d_prefetch",
    "regblock_2d_warptile",
    "regblock_2d_async",  # sm_80 and newer; its time includes the transpose of A it needs
)
NCU_SECTIONS = ("SpeedOfLight", "Occupancy", "LaunchStats", "ComputeWorkloadAnalysis", "WarpStateStats")
# Shared-memory counters whose names Chapter 4's tracer comparison already uses on an H200.
NCU_METRICS = (
    "smsp__sass_inst_executed_op_shared_ld.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
)


def key(n: int) -> str:
    """The reference-data key of size n."""
    return f"bench.gemm.N{n}"


def numba_kernels(cc) -> dict:
    """{name: (kernel, tiles)} of the Numba kernels for this device: Chapter 6's steps, Chapter 3's tile."""
    from cudalearn.chapters.ch06.kernels import regblock, regblock_tiles

    target = regblock_tiles.config_for(cc, simulator=device.mode() == "sim")
    found = dict(regblock.build(target))
    try:
        from cudalearn.chapters.ch03 import kernels as tiled
    except ImportError:  # Chapter 3's kernels not in this version of the package
        return found
    return {TILED: (tiled.matmul_tiled32, {"tile": 32}), **found}


def launch(name, kernel, tiles, n, dA, dB, dC):
    """A callable that computes dC = dA @ dB, (n, n) device arrays, with one Numba kernel (and, for the
    cp.async step, the transpose of A it needs: `regblock_launch.launcher`)."""
    from cudalearn.chapters.ch06.kernels import regblock_launch

    if name == TILED:
        grid, block = grids.square(n, n, tiles["tile"])
        return lambda: kernel[grid, block](dA, dB, dC)
    return regblock_launch.launcher(name, kernel, tiles, dA, dB, dC)


def precisions(cc) -> dict:
    """{format: why it cannot run here, or None} for FP32, TF32, FP16 and BF16 on compute capability cc."""
    from cudalearn.measure.gpus import tensor_core_precisions

    tc = tensor_core_precisions(cc)
    gpu = device.mode() == "gpu"
    return {
        "FP32": None,
        "TF32": None if tc["tf32"] or not gpu else "no TF32 tensor cores below sm_80",
        "FP16": None,
        "BF16": None if tc["bf16"] or not gpu else "no BF16 tensor cores below sm_80",
    }


def cublas_call(p, a, b, c):
    """A callable: c = a @ b through PyTorch's cuBLAS, in format p ('TF32': float32 on TF32 tensor cores).

    Each call sets the precision of its own format, as the candidates run in turn in one `measure`;
    `main` runs them all inside `precision.fp32()`, which puts the settings back afterwards.
    """
    import torch

    setting = "high" if p == "TF32" else "highest"  # 'high' lets cuBLAS round float32 inputs to TF32

    def run():
        torch.set_float32_matmul_precision(setting)
        return torch.matmul(a, b, out=c)

    return run


def triton_call(triton_kernels):
    """A maker of callables c = a @ b through the course's Triton kernel, like cublas_call."""

    def make(p, a, b, c):
        precision = "tf32" if p == "TF32" else "ieee"
        return lambda: triton_kernels.matmul(a, b, precision=precision, out=c)

    return make


def candidates(n: int, cc) -> tuple[dict, dict, list[str]]:
    """({name: callable}, {name: (kernel, tiles)} of the Numba ones, skipped lines), each result checked."""
    import numpy as np
    import torch

    from cudalearn import checks
    from cudalearn.chapters.ch03.operands import matmul_operands
    from cudalearn.runtime import precision

    ops = matmul_operands(n)  # cuBLAS's FP32 product is the expected result
    dA, dB, dC, tA, tB, tC, expected = ops.dA, ops.dB, ops.dC, ops.tA, ops.tB, ops.tC, ops.expected
    tol = {"rtol": 1e-3, "atol": 1e-3 * math.sqrt(n)}
    lowp_tol = {"rtol": 3e-2, "atol": 3e-2 * math.sqrt(n)}  # 16-bit or TF32 inputs: about 3 digits

    from cudalearn.chapters.ch06.kernels import regblock_tiles

    found, numba = {}, {}
    target = regblock_tiles.config_for(cc, simulator=device.mode() == "sim")
    skipped = [f"{name}: {why}" for name, why in regblock_tiles.unbuilt(target).items()]
    for name, (kernel, tiles) in numba_kernels(cc).items():
        fn = launch(name, kernel, tiles, n, dA, dB, dC)
        dC.copy_to_device(np.full((n, n), np.nan, np.float32))  # a kernel that writes nothing fails
        fn()
        checks.check_close(dC.copy_to_host(), expected, name=f"C of {name}", **tol)
        found[name] = fn
        numba[name] = (kernel, tiles)

    lowp = {"FP16": torch.float16, "BF16": torch.bfloat16}
    operands = {p: (tA, tB, tC) for p in ("FP32", "TF32")}
    operands |= {p: (tA.to(dt), tB.to(dt), tC.to(dt)) for p, dt in lowp.items()}
    libraries = {"cuBLAS": (cublas_call, ("FP32", "TF32", "FP16", "BF16"))}
    try:
        from cudalearn.chapters.ch06.kernels import triton_kernels

        libraries["Triton"] = (triton_call(triton_kernels), ("FP32", "TF32", "FP16"))
    except ImportError as e:
        skipped.append(f"Triton: not installed ({e})")
    why_not = precisions(cc)
    for library, (make, formats) in libraries.items():
        for p in formats:
            if why_not[p]:
                skipped.append(f"{library} {p}: {why_not[p]}")
                continue
            fn = make(p, *operands[p])
            got = fn().float().cpu().numpy()  # also compiles the Triton kernel, before any timing
            checks.check_close(
                got, expected, name=f"C of {library} {p}", **(tol if p == "FP32" else lowp_tol)
            )
            found[f"{library} {p}"] = fn
    precision.set_fp32()  # TF32 off again after the TF32 candidates' checks
    return found, numba, skipped


def resources(numba: dict, cc) -> dict:
    """{name: registers, local and shared memory, occupancy, ptxas figures and hot-loop SASS mix} (GPU)."""
    from cudalearn.chapters.ch06.kernels import regblock_launch
    from cudalearn.compile import toolchain

    out = {}
    for name, (kernel, tiles) in numba.items():
        threads = tiles["tile"] ** 2 if name == TILED else regblock_launch.threads_per_block(name, tiles)
        entry = {"tiles": tiles, **toolchain.resources(kernel, threads)}
        try:
            entry.update(toolchain.compile_report(toolchain.kernel_ptx(kernel), cc))
        except Exception as e:  # no ptxas or cuobjdump here, or PTX newer than they read: say so
            entry["compile_error"] = f"{type(e).__name__}: {e}"
        out[name] = entry
    return out


def resource_lines(res: dict) -> list[str]:
    """One line per kernel: what bounds it (registers, occupancy, the instruction mix of its hot loop)."""
    lines = [
        f"{'kernel':<22} {'threads':>7} {'regs':>5} {'local B':>7} {'smem B':>7} {'blocks/SM':>9} "
        f"{'occupancy':>9} {'loop: FFMA share, LDS (128-bit), other':>40}"
    ]
    for name, r in res.items():
        loop = r.get("sass", {}).get("loop") or {}
        mix = r.get("compile_error", "-")[:40]
        if loop:
            mix = f"{loop['ffma_share']:.0%} of {loop['instructions']}, {loop['LDS']} ({loop['lds128']}), "
            mix += str(loop["other"])
        lines.append(
            f"{name:<22} {r['threads_per_block']:>7} {r['registers_per_thread']:>5} "
            f"{r['local_bytes_per_thread']:>7} {r['shared_bytes_per_block']:>7} {r['blocks_per_sm']:>9} "
            f"{r['occupancy']:>9.0%} {mix:>40}"
        )
    return lines


def verdict(results) -> dict | None:
    """The best Numba kernel of a run, its fraction of cuBLAS FP32 and its speed against Triton FP32.

    None when the run has no times. `met` needs both: at least GOAL of cuBLAS FP32 and faster than
    Triton FP32 (`beats_triton`, None where Triton is not in the run: then the goal is not met).
    """
    rate = {r["name"]: r.get("gflops") for r in results.rows}
    numba = {name: g for name, g in rate.items() if g and (name in NUMBA_STEPS or name == TILED)}
    if not numba or not rate.get(BASELINE):
        return None
    best = max(numba, key=numba.get)
    fraction = numba[best] / rate[BASELINE]
    rival = rate.get(RIVAL)
    beats = None if not rival else numba[best] > rival
    return {
        "best": best,
        "fraction_of_cublas_fp32": fraction,
        "goal": GOAL,
        "vs_triton_fp32": None if not rival else numba[best] / rival,
        "beats_triton": beats,
        "met": fraction >= GOAL and beats is True,
    }


def verdict_line(v: dict) -> str:
    """The goal's verdict as one line, from `verdict` (or a stored one, which may predate the Triton part)."""
    line = (
        f"goal: best Numba kernel {v['best']} at {v['fraction_of_cublas_fp32']:.0%} of cuBLAS FP32 "
        f"(TF32 off) in the same run (goal >= {v['goal']:.0%})"
    )
    if "beats_triton" in v:
        vs = v.get("vs_triton_fp32")
        line += f", {vs:.2f}x Triton FP32's speed (goal > 1)" if vs else ", Triton FP32 not in this run"
    line += f": {'met' if v['met'] else 'MISSED'}"
    if v["goal"] != GOAL or "beats_triton" not in v:  # a verdict stored under an earlier goal
        line += f" (judged by an earlier goal; today's: >= {GOAL:.0%} of cuBLAS FP32 and faster than {RIVAL})"
    return line


def ncu_child(n: int) -> int:
    """Launch each Numba kernel and cuBLAS FP32 once at size n (what ncu profiles); no checks, no timing."""
    import numpy as np
    import torch

    from cudalearn.runtime import precision
    from cudalearn.runtime.numba_backend import cuda

    rng = np.random.default_rng(0)
    A = rng.standard_normal((n, n), dtype=np.float32)
    dA, dB = cuda.to_device(A), cuda.to_device(A.T.copy())
    dC = cuda.device_array((n, n), dtype=np.float32)
    for name, (kernel, tiles) in numba_kernels(device.info().compute_capability).items():
        launch(name, kernel, tiles, n, dA, dB, dC)()
    precision.set_fp32()  # cuBLAS in true FP32, as in the timed run (this child process only profiles)
    t = torch.from_numpy(A).to(device.torch_device())
    torch.matmul(t, t)
    cuda.synchronize()
    torch.cuda.synchronize()
    return 0


def ncu_child_command(n: int) -> list[str]:
    """This Python running `main(['--ncu-child', '--n', n])` of this module: the process ncu profiles."""
    return [sys.executable, "-m", __name__, "--ncu-child", "--n", str(n)]


def run_ncu(n: int) -> dict:
    """Nsight Compute's sections for one launch of each Numba kernel and of cuBLAS FP32, or {'error': ...}."""
    from cudalearn.compile import toolchain

    ncu = toolchain.find_ncu()
    if ncu is None:
        return {"error": "ncu (Nsight Compute) not found"}
    prof = toolchain.profile(
        ncu,
        ncu_child_command(n),
        [*NUMBA_STEPS, "matmul_tiled", "gemm"],
        timeout=300,
        drop_env=("CUDALEARN_RECORD", "NUMBA_ENABLE_CUDASIM"),
        sections=NCU_SECTIONS,
        metrics=NCU_METRICS,
        # Full demangled names: cuBLAS's CUTLASS kernels are called Kernel2<...gemm...> in short form.
        kernels="regex:regblock|matmul_tiled|gemm",
        demangled=True,
    )
    if prof.error is not None:  # ncu could not run, or ran past the timeout
        return {"error": prof.error}
    if prof.returncode or not prof.metrics:
        tail = "\n".join((prof.stderr or prof.text).splitlines()[-15:])
        return {
            "error": f"ncu exit code {prof.returncode}, {len(prof.metrics)} kernels parsed: {tail}",
            **prof.metrics,
        }
    return prof.metrics


NCU_SHOWN = (
    "Duration",
    "Compute (SM) Throughput",
    "Registers Per Thread",
    "Achieved Occupancy",
    "Theoretical Occupancy",
    "Issue Slots Busy",
    "Warp Cycles Per Issued Instruction",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
)


def stored(name: str):
    """A stored reference figure as a timing.Results (when it is a measure() row set) or a dict, or None."""
    from cudalearn.measure import reference, timing

    results = timing.stored_results(name)
    return results if results is not None else reference.lookup(name)[0]


def main(argv: list[str] | None = None) -> int:
    """Check, time and record every matmul; print the table, the verdict and what bounds each kernel."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, help="matrix size (default: the size ch6.bench_n of this mode)")
    parser.add_argument("--no-ncu", action="store_true", help="skip the Nsight Compute profile")
    parser.add_argument("--ncu-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    device.setup()
    n = args.n or sizes.size("ch6.bench_n")
    if args.ncu_child:
        return ncu_child(n)
    from cudalearn.runtime import precision

    with precision.fp32():  # the candidates set their own formats; TF32 is off and restored around them
        return _run(n, args.no_ncu)


def _run(n: int, no_ncu: bool) -> int:
    """The benchmark at size n: checks, one timed run, the verdict, and on a GPU what bounds each kernel."""
    from cudalearn.measure import reference, timing

    cc = device.info().compute_capability
    found, numba, skipped = candidates(n, cc)
    for line in skipped:
        print(f"skipped {line}")
    size = {"N": n, "dtype": "float32 inputs (FP16/BF16 rows: converted copies)", "tf32_in_fp32_rows": False}
    results = timing.measure(key(n), found, baseline=BASELINE, flops=2 * n**3, size=size)
    print(results)
    if device.mode() != "gpu":
        gpu_n = sizes.size("ch6.bench_n", "gpu")
        print(f"\nThis process runs the simulator: nothing was timed. The stored reference for N = {gpu_n}:")
        results = stored(key(gpu_n))
        print(results if results is not None else f"none stored for {key(gpu_n)} yet")
        res = stored(key(gpu_n) + ".resources")
        if res:
            print("\n".join(resource_lines(res)))
        if results is None:
            return 0
    v = verdict(results)
    if v is None:
        print("goal: no GPU times for the Numba kernels and cuBLAS FP32 here: not judged")
    else:
        print(verdict_line(v))
        reference.record(key(n) + ".goal", v)
    if device.mode() == "gpu":
        res = reference.record(key(n) + ".resources", resources(numba, cc))
        print("\nwhat bounds each Numba kernel (driver figures, ptxas and SASS of this GPU):")
        print("\n".join(resource_lines(res)))
        if not no_ncu:
            prof = reference.record(key(n) + ".ncu", run_ncu(n))
            if "error" in prof:
                print(f"ncu: {prof['error']}")
            for name, metrics in prof.items():
                if isinstance(metrics, dict):
                    shown = {m: metrics[m] for m in NCU_SHOWN if m in metrics}
                    print(f"ncu {name}: {json.dumps(shown)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
