#!/usr/bin/env python3
"""Whether the course's kernels compile and run under the installed numpy (for runtime.compat).

    CUDALEARN_MODE=gpu python3 scripts/check_numpy_compat.py

First, in a child process without `cudalearn.setup()`, one kernel is compiled the way a student's first
cell would without the course: under numpy 2.5 with numba-cuda 0.30 that is the AttributeError the
compatibility alias exists for. Then, after `cudalearn.setup()`: what `runtime.compat` restored, every
kernel of `cudalearn.chapters.kernel_modules()` compiled to PTX for sm_75 and sm_90, and on a GPU one
launch each of Chapter 2's vector add and naive matmul checked against NumPy. Exits non-zero on failure.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
import textwrap

BARE = """
from numba import cuda
def k(a):
    a[0] = 1
cuda.compile_ptx(k, "void(float32[::1])", cc=(9, 0))
print("compiled without cudalearn.setup()")
"""


def main() -> int:
    import numpy as np

    print(f"numpy {np.__version__}, python {sys.version.split()[0]}")
    bare = subprocess.run([sys.executable, "-c", textwrap.dedent(BARE)], capture_output=True, text=True)
    last = (bare.stdout + bare.stderr).strip().splitlines()
    print(f"without cudalearn.setup(): rc {bare.returncode}: {last[-1] if last else ''}")

    import cudalearn
    from cudalearn.chapters import kernel_modules
    from cudalearn.course import doctor
    from cudalearn.runtime import compat

    info = cudalearn.setup()
    print(f"cudalearn.runtime.compat restored: {compat.APPLIED or 'nothing'}")
    from numba import cuda

    failed, count = [], 0
    for mod in kernel_modules():
        m = importlib.import_module(mod)
        for name, sig in m.SIGNATURES.items():
            for cc in ((7, 5), (9, 0)):
                try:
                    cuda.compile_ptx(getattr(m, name).py_func, sig, cc=cc)
                    count += 1
                except Exception as e:  # noqa: BLE001 - every failure is listed
                    failed.append(f"{mod}.{name} sm_{cc[0]}{cc[1]}: {type(e).__name__}: {e}")
    print(f"compiled {count} kernel/architecture pairs, {len(failed)} failed")
    for f in failed:
        print("  FAILED", f)
    if info.mode == "gpu":
        from cudalearn import checks
        from cudalearn.chapters.ch00.kernels import vector_add
        from cudalearn.chapters.ch02.kernels.matmul import matmul_naive
        from cudalearn.runtime.launch import blocks, square

        rng = np.random.default_rng(0)
        a, b = rng.standard_normal((2, 100_003)).astype(np.float32)
        out = checks.run_kernel(vector_add, blocks(a.size, 256), 256, a, b, checks.empty_output(a.size))[2]
        checks.check_close(out, a + b, name="vector_add")
        A, B = rng.standard_normal((2, 130, 130)).astype(np.float32)
        C = checks.run_kernel(matmul_naive, *square(130, 130, 16), A, B, checks.empty_output((130, 130)))[2]
        checks.check_close(C, A @ B, name="matmul_naive", **checks.matmul_tol(130))
        print("vector_add and matmul_naive on the GPU: equal to NumPy")
    print("\n".join(str(p) for p in doctor.diagnose(doctor.collect())) or "doctor: no known problem")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
