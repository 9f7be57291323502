"""Run a handful of the course's kernels on a GPU with numba-cuda-mlir, each checked against NumPy.

`scripts/check_numba_cuda_mlir.py` only compiles, without a GPU; this runs. It sets gpu mode and
`CUDALEARN_NUMBA=numba-cuda-mlir` before importing the course, so `cudalearn.runtime.numba_backend` gives
the kernels numba-cuda-mlir's `cuda`, then checks, each on its own (one failure does not stop the
others), printing `ok` or `FAIL` with the error:

* kernels, against NumPy: vector add, the shuffle reduction (`sum_shuffle`), a 32x32 tiled matmul,
  the fused softmax cross-entropy of Chapter 5 (`softmax_xent`), the fused attention of Chapter 10
  (warp shuffles), and Chapter 10's `softmax_warp` (warp shuffles through the bridge's reductions),
  saying which compiler built it;
* the host side the course routes through the bridge: `timing.gpu_time` (numba-cuda-mlir's events
  bracket its launches), `launch.prepared` on PyTorch CUDA tensors (the one check that needs
  torch), `counting.observe` (launches and copies counted), `toolchain.resources` (registers,
  occupancy), the tracer on a numba-cuda-mlir kernel;
* interop the course avoids but a notebook may do: a numba-cuda device array given to a
  numba-cuda-mlir kernel, and a numba-cuda kernel launched in the same process.

    CUDALEARN_MODE=gpu CUDALEARN_NUMBA=numba-cuda-mlir PYTHONPATH=src python3 scripts/mlir_gpu_smoke.py

It exits 0 when every check passed, 1 otherwise, 2 when the process is not on numba-cuda-mlir.
"""

from __future__ import annotations

import os
import sys
import time
import traceback

os.environ.setdefault("CUDALEARN_MODE", "gpu")
os.environ.setdefault("CUDALEARN_NUMBA", "numba-cuda-mlir")

import numpy as np  # noqa: E402

RESULTS: list[tuple[str, bool, str]] = []


def check(name):
    """Run the decorated function now; record ok with its note, or FAIL with the error's last line."""

    def run(fn):
        start = time.perf_counter()
        try:
            note = fn() or ""
            RESULTS.append((name, True, note))
            print(f"ok    {name} ({time.perf_counter() - start:.1f} s) {note}", flush=True)
        except Exception as e:  # every check reports; none stops the others
            where = traceback.extract_tb(e.__traceback__)[-1]
            error = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:300] if str(e).strip() else ''}"
            RESULTS.append((name, False, error))
            print(f"FAIL  {name}: {error} [{where.filename}:{where.lineno}]", flush=True)
        return fn

    return run


def close(got, want, rtol=1e-4, atol=1e-5):
    """Raise AssertionError naming the worst element when got and want differ."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape:
        raise AssertionError(f"shape {got.shape}, expected {want.shape}")
    err = np.abs(got - want) - atol - rtol * np.abs(want)
    if (err > 0).any():
        i = np.unravel_index(int(np.argmax(err)), err.shape)
        raise AssertionError(f"at {i}: got {got[i]!r}, expected {want[i]!r}")


def compiler(kernel):
    from cudalearn.runtime import numba_backend

    return numba_backend.cuda_of(kernel).__name__.partition(".")[0].replace("_", "-")


def main() -> int:
    import cudalearn
    from cudalearn.runtime import numba_backend

    info = cudalearn.setup()
    chosen = numba_backend.current()
    print(f"numba_backend: {chosen}", flush=True)
    if info.mode != "gpu" or chosen.package != numba_backend.NUMBA_CUDA_MLIR:
        print("not on numba-cuda-mlir in gpu mode: nothing to check", file=sys.stderr)
        return 2
    from cudalearn.chapters.ch00 import kernels as basics
    from cudalearn.chapters.ch03 import kernels as tiled
    from cudalearn.chapters.ch05.kernels import elementwise
    from cudalearn.chapters.ch10.kernels import attention, reductions, softmax
    from cudalearn.compile import toolchain
    from cudalearn.measure import timing
    from cudalearn.runtime import counting, launch
    from cudalearn.runtime.numba_backend import cuda

    rng = np.random.default_rng(0)

    @check("basics.vector_add")
    def _():
        n = 1 << 20
        a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
        out = cuda.device_array(n, np.float32)
        basics.vector_add[launch.blocks(n, 256), 256](cuda.to_device(a), cuda.to_device(b), out)
        close(out.copy_to_host(), a + b, 0, 0)
        return f"n={n}, {compiler(basics.vector_add)}"

    @check("reductions.sum_shuffle")
    def _():
        x = rng.random(1_000_003, dtype=np.float32)
        got = reductions.launch_sum(reductions.sum_shuffle, x)
        want = float(np.sum(x, dtype=np.float64))
        assert abs(got - want) <= 1e-5 * want, f"got {got}, expected {want}"
        return f"{got} vs {want:.2f} (float64), {compiler(reductions.sum_shuffle)}"

    @check("tiled.matmul_tiled32")
    def _():
        n = 512
        A, B = rng.standard_normal((n, n), np.float32), rng.standard_normal((n, n), np.float32)
        C = cuda.device_array((n, n), np.float32)
        grid, block = tiled.launch_config(n, n, 32)
        tiled.matmul_tiled32[grid, block](cuda.to_device(A), cuda.to_device(B), C)
        close(C.copy_to_host(), A.astype(np.float64) @ B, 1e-3, 1e-3)
        return f"n={n} against NumPy (float64), {compiler(tiled.matmul_tiled32)}"

    @check("elementwise.softmax_xent")
    def _():
        m, c = 1000, 10
        logits = rng.standard_normal((m, c), np.float32)
        labels = rng.integers(0, c, m).astype(np.int32)
        d_grad, d_loss = cuda.device_array((m, c), np.float32), cuda.to_device(np.zeros(1, np.float32))
        args = (cuda.to_device(logits), cuda.to_device(labels), d_grad, d_loss, 0, np.float32(1 / m))
        elementwise.softmax_xent[launch.blocks(m, 128), 128](*args)
        z = logits.astype(np.float64)
        p = np.exp(z - z.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        onehot = np.eye(c)[labels]
        close(d_grad.copy_to_host(), (p - onehot) / m, 1e-4, 1e-6)
        close(d_loss.copy_to_host()[0], -np.log(p[np.arange(m), labels]).mean(), 1e-4, 1e-6)
        return f"gradient and mean loss against NumPy (float64), {compiler(elementwise.softmax_xent)}"

    @check("attention.attention_fused")
    def _():
        n, d = 512, 64
        q, k, v = (rng.standard_normal((n, d)).astype(np.float32) for _ in range(3))
        o = attention.launch_attention_fused(*(cuda.to_device(a) for a in (q, k, v)))
        close(o.copy_to_host(), attention.attention_reference(q, k, v), 1e-3, 1e-4)
        return f"n={n}, d={d}, {compiler(attention.attention_fused)}"

    @check("regblock.regblock_2d_warptile")
    def _():
        from cudalearn.chapters.ch06.kernels import regblock, regblock_launch, regblock_tiles

        n = 1000  # not a multiple of the tiles: the edge blocks' guarded path too
        A, B = rng.standard_normal((n, n), np.float32), rng.standard_normal((n, n), np.float32)
        C = cuda.device_array((n, n), np.float32)
        cfg = regblock_tiles.tiles("regblock_2d_warptile", regblock_tiles.config_for(info.compute_capability))
        grid, threads = regblock_launch.launch_config("regblock_2d_warptile", cfg, n, n)
        kernel = regblock.make_regblock_2d_warptile(**cfg)
        kernel[grid, threads](cuda.to_device(A), cuda.to_device(B), C)
        close(C.copy_to_host(), A.astype(np.float64) @ B, 1e-3, 1e-3)
        return f"n={n}, tiles {cfg}, {compiler(kernel)}"

    @check("softmax.softmax_warp")
    def _():
        x = (4 * rng.standard_normal((256, 1000))).astype(np.float32)
        y = cuda.device_array_like(x)
        softmax.launch_rows(softmax.softmax_warp, cuda.to_device(x), y)
        e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
        close(y.copy_to_host(), e / e.sum(1, keepdims=True), 1e-4, 1e-7)
        return compiler(softmax.softmax_warp)

    @check("timing.gpu_time (numba-cuda-mlir's events around its launches)")
    def _():
        n = 1 << 24
        x = cuda.to_device(np.ones(n, np.float32))
        run = lambda: basics.busy[launch.blocks(n, 256), 256](x, 200)  # noqa: E731
        t = timing.gpu_time(run, repeat=5)
        timing.synchronize()
        start = time.perf_counter()
        for _ in range(20):
            run()
        timing.synchronize()
        wall = (time.perf_counter() - start) / 20 * 1e3
        note = f"events {t.median_ms:.3f} ms, wall {wall:.3f} ms a launch"
        assert 0 < t.median_ms <= wall * 1.2, note  # events that missed the launches would read ~0
        return note

    @check("launch.prepared on torch tensors")
    def _():
        import torch

        n = 1 << 20
        a, b = torch.rand(n, device="cuda"), torch.rand(n, device="cuda")
        out = torch.empty(n, device="cuda")
        views = [launch.cuda_view(t) for t in (a, b, out)]
        run = launch.prepared(basics.vector_add, launch.blocks(n, 256), 256, *views)
        run()
        torch.cuda.synchronize()
        close(out.cpu().numpy(), (a + b).cpu().numpy(), 0, 0)
        return f"views: {type(views[0]).__module__}"

    @check("counting.observe")
    def _():
        x = cuda.to_device(np.ones(1024, np.float32))
        with counting.observe() as seen:
            basics.scale[4, 256](x, np.float32(2))
            x.copy_to_host()
        assert seen.launches == ["scale"] and seen.copies == 1, (seen.launches, seen.copies)

    @check("toolchain.resources")
    def _():
        kernel = tiled.matmul_tiled32
        figures = toolchain.resources(kernel, 32 * 32)
        assert figures["registers_per_thread"] > 0 and figures["shared_bytes_per_block"] >= 8192, figures
        return str(figures)

    @check("tracer on a numba-cuda-mlir kernel (CPU)")
    def _():
        from cudalearn import trace

        n = 64
        A, B = rng.standard_normal((n, n), np.float32), rng.standard_normal((n, n), np.float32)
        grid, block = tiled.launch_config(n, n, 16)
        rep = trace.trace(tiled.matmul_tiled16, grid, block, A, B, np.zeros((n, n), np.float32))
        close(rep.outputs[2], A @ B, 1e-4, 1e-4)
        assert rep.bank_conflicts == 0 and rep.race_count == 0, rep
        return f"{rep.shared_requests} shared requests, no conflict, no race"

    @check("interop: a numba-cuda device array given to a numba-cuda-mlir kernel")
    def _():
        import numba.cuda

        n = 4096
        a = numba.cuda.to_device(np.arange(n, dtype=np.float32))
        out = cuda.device_array(n, np.float32)
        basics.vector_add[launch.blocks(n, 256), 256](a, a, out)
        close(out.copy_to_host(), 2 * np.arange(n, dtype=np.float32), 0, 0)

    @check("interop: a numba-cuda kernel in the same process")
    def _():
        import numba.cuda

        @numba.cuda.jit
        def double(x):
            i = numba.cuda.grid(1)
            if i < x.shape[0]:
                x[i] *= 2

        x = numba.cuda.to_device(np.ones(1000, np.float32))
        double[4, 256](x)
        close(x.copy_to_host(), np.full(1000, 2, np.float32), 0, 0)

    failed = [name for name, ok, _ in RESULTS if not ok]
    print(f"\n{len(RESULTS) - len(failed)} of {len(RESULTS)} checks passed on {info.line()}")
    for name in failed:
        print(f"  failed: {name}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
