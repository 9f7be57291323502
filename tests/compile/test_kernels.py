"""The package's kernels: correct under the simulator, compiled to real PTX, same as the solutions' copies.

The kernel modules are discovered (`cudalearn.chapters.kernel_modules`), never listed: a new module of
`cudalearn/kernels/` is compiled, checked for SIGNATURES and compared with the notebooks' copies at once.
"""

import ast
import importlib
import inspect
import io
import json
import os
import re
import subprocess
import sys
import textwrap
from contextlib import redirect_stdout
from pathlib import Path

import nbformat
import numpy as np
import pytest

from cudalearn import checks
from cudalearn.chapters import kernel_modules
from cudalearn.chapters.ch00 import kernels as basics
from cudalearn.chapters.ch02 import bench as add_bench
from cudalearn.chapters.ch02.kernels import matmul, strided_copy
from cudalearn.compile import ptx
from cudalearn.runtime import launch

pytestmark = pytest.mark.compile

ROOT = Path(__file__).resolve().parents[2]
MODULES = kernel_modules()


def test_kernel_modules_are_discovered_from_the_source(tmp_path):
    chapters = (
        "ch00.kernels",
        "ch02.kernels.strided_copy",
        "ch02.kernels.matmul",
        "ch03.kernels",
        "ch04.kernels",
        "ch05.kernels.linear",
        "ch05.kernels.elementwise",
        "ch06.kernels.regblock",
        "ch09.kernels",
    )
    assert {f"cudalearn.chapters.{name}" for name in chapters} <= set(MODULES)
    assert "cudalearn.chapters.ch07.figures.memory" not in MODULES, (
        "a module without kernels is no kernel module"
    )
    pkg = tmp_path / "cudalearn"
    (pkg / "chapters" / "ch12" / "kernels").mkdir(parents=True)
    (pkg / "chapters" / "ch13").mkdir(parents=True)
    (pkg / "other").mkdir()
    (pkg / "chapters" / "ch12" / "kernels" / "scan.py").write_text("@cuda.jit\ndef k(x):\n    pass\n")
    (pkg / "chapters" / "ch13" / "kernels.py").write_text("@cuda.jit\ndef k(x):\n    pass\n")
    (pkg / "chapters" / "ch13" / "helpers.py").write_text("@cuda.jit\ndef k(x):\n    pass\n")
    (pkg / "other" / "listed.py").write_text('SIGNATURES = {"k": "void(float32[::1])"}\n')
    (pkg / "other" / "tests_only.py").write_text("@cuda.jit\ndef k(x):\n    pass\n")
    found = kernel_modules(pkg)
    assert found == [
        "cudalearn.chapters.ch12.kernels.scan",
        "cudalearn.chapters.ch13.kernels",
        "cudalearn.other.listed",
    ], found


def test_importing_the_kernels_package_chooses_no_mode():
    code = """
    import os, sys
    import cudalearn.chapters
    from cudalearn.runtime import device
    assert "numba" not in sys.modules and "NUMBA_ENABLE_CUDASIM" not in os.environ, sorted(sys.modules)
    assert device._INFO is None
    print(len(cudalearn.chapters.kernel_modules()))
    """
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_ENABLE_CUDASIM", "CUDALEARN_MODE")}
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env)
    assert r.returncode == 0 and int(r.stdout) == len(MODULES), r.stderr[-3000:]


def test_vector_add_scale_busy_and_ids():
    n = 45
    a, b = np.arange(n, dtype=np.float32), np.ones(n, np.float32)
    out = checks.run_kernel(basics.vector_add, 2, 32, a, b, checks.empty_output(n))[2]
    checks.check_close(out, a + b, name="out")
    x = checks.run_kernel(basics.scale, 2, 32, a.copy(), np.float32(3.0))[0]
    checks.check_close(x, 3 * a, name="x")
    y = checks.run_kernel(basics.busy, 1, 8, np.zeros(8, np.float32), np.int32(3))[0]
    v = np.float32(0)
    for _ in range(3):
        v = v * np.float32(0.999) + np.float32(0.001)
    checks.check_close(y, np.full(8, v, np.float32), name="x")
    ids = checks.run_kernel(basics.thread_ids, 2, 40, checks.empty_output((70, 4), np.int32))[0]
    assert ids[45].tolist() == [1, 5, 45, 0] and ids[39].tolist() == [0, 39, 39, 1]


@pytest.mark.parametrize("k", [1, 2, 4, 8])
def test_vector_add_ilp_adds_every_element_for_any_n(k):
    """k elements a thread, guarded: n off the block grid and off k, n = 1, n = 0, a single block."""
    kernel = basics.vector_add_ilp(k)
    rng = np.random.default_rng(k)
    for n, threads in ((45, 32), (1, 32), (0, 32), (3 * 32 * k + 5, 32), (40, 64)):
        a, b = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
        out = np.full(n, np.nan, np.float32)
        kernel[max(1, launch.blocks(n, threads * k)), threads](a, b, out)
        np.testing.assert_array_equal(out, a + b, err_msg=f"k={k}, n={n}, threads={threads}")
    assert basics.vector_add_ilp(k) is kernel, "one compile per k"


def test_vector_add_ilp_refuses_a_count_that_is_not_a_positive_int():
    for bad in (0, -1, 2.0):
        with pytest.raises(ValueError, match="per_thread must be a positive int"):
            basics.vector_add_ilp(bad)


def _ptx_ops(kernel, cc):
    """The operations of a vector add kernel's PTX for `cc`, in order (the .entry's body only)."""
    text = ptx.compile_for_gpu(kernel, cc=cc, signature=basics.VECTOR_ADD_ILP_SIGNATURE)
    assert f".target sm_{cc[0]}{cc[1]}" in text
    body = text[text.index("{", text.index(".entry")) :]
    assert not re.search(r"[.]local\b", body), "the held values spilled to local memory"
    assert not re.search(r"[.]f64\b", body), "float64 in a float32 kernel"
    return [
        ln.split()[0]
        for ln in body.splitlines()
        if ln.strip().endswith(";") and not ln.strip().startswith(".")
    ]


@pytest.mark.parametrize("cc", [(7, 5), (9, 0)])
def test_vector_add_ilp_compiles_to_registers_unsigned_loads_first(cc):
    """Real PTX for a T4 and an H200, every k the book and the benchmark time: 2k loads then k stores,
    no local memory, no float64, and none of the wrap-around code of a signed index (shr.s64, and.b64,
    selp), which Chapter 2's vector_add has."""
    for k in add_bench.PER_THREAD:
        ops = _ptx_ops(basics.vector_add_ilp(k), cc)
        loads = [i for i, op in enumerate(ops) if op == "ld.global.f32"]
        stores = [i for i, op in enumerate(ops) if op == "st.global.f32"]
        assert len(loads) == 2 * k and len(stores) == k and max(loads) < min(stores), (k, ops)
        wrap = [op for op in ops if op in ("shr.s64", "and.b64") or op.startswith("selp")]
        assert not wrap, f"k={k}: wrap-around code of a signed index: {wrap}"
    signed = _ptx_ops(basics.vector_add, cc)
    assert signed.count("shr.s64") == 1 and signed.count("and.b64") == 3, "the book's PTX table says so"


def test_vector_add_ilp_machine_code_issues_every_load_before_the_first_add():
    """All 2k loads in flight together: in sm_90 SASS no FADD comes before the last LDG."""
    from cudalearn.compile import toolchain

    if toolchain.find_tool("ptxas") is None or toolchain.find_tool("cuobjdump") is None:
        pytest.skip("ptxas and cuobjdump are needed to read the machine code")
    for k in add_bench.PER_THREAD:
        text = ptx.compile_for_gpu(
            basics.vector_add_ilp(k), cc=(9, 0), signature=basics.VECTOR_ADD_ILP_SIGNATURE
        )
        ops = toolchain.sass_opcodes(text, (9, 0))
        loads = [i for i, op in enumerate(ops) if op.startswith("LDG")]
        adds = [i for i, op in enumerate(ops) if op.startswith("FADD")]
        assert len(loads) == 2 * k and len(adds) == k and max(loads) < min(adds), (k, ops)


def test_vector_add_bench_checks_its_candidates_and_judges_the_goal():
    found, check = add_bench.candidates(45, 32, seed=3)
    assert list(found) == [add_bench.TORCH, add_bench.ONE] + [
        add_bench.ilp_name(k) for k in add_bench.PER_THREAD
    ]
    assert check() == list(found)
    found[add_bench.ilp_name(2)] = lambda: None  # a candidate that writes nothing
    with pytest.raises(AssertionError, match=r"vector_add_ilp\(2\)"):
        check()
    label = "NVIDIA H200 (sm_90), 2026-12-31, numba-cuda 0.30.4"

    def fake(speeds):
        rows = [{"name": n, "median_ms": 1.0 / v, "vs_baseline": v} for n, v in speeds.items()]
        return type("R", (), {"rows": rows, "label": label})()

    met = add_bench.goal_line(fake({add_bench.TORCH: 1.0, add_bench.ONE: 0.8, add_bench.ilp_name(4): 0.95}))
    assert met.startswith("MET") and "vector_add_ilp(4) 0.95x; vector_add 0.80x" in met and label in met
    missed = add_bench.goal_line(
        fake({add_bench.TORCH: 1.0, add_bench.ONE: 0.8, add_bench.ilp_name(4): 0.85})
    )
    assert missed.startswith("MISSED"), missed
    assert add_bench.goal_line(fake({})).startswith("NO DATA")


def test_vector_add_bench_runs_under_the_simulator():
    out = io.StringIO()
    with redirect_stdout(out):
        assert add_bench.main() == 0
    text = out.getvalue()
    assert "checked against NumPy, bit for bit" in text and add_bench.ilp_name(8) in text
    assert "goal " in text, text


@pytest.mark.parametrize("stride", [1, 2, 4, 8])
def test_copy_strided_is_a_permutation_read_with_the_stride(stride):
    n = 64
    src = np.arange(n, dtype=np.float32)
    grid, block, rows, s = strided_copy.copy_strided_launch(n, stride, threads=16)
    dst = checks.run_kernel(strided_copy.copy_strided, grid, block, src, checks.empty_output(n), rows, s)[1]
    np.testing.assert_array_equal(dst, src.reshape(-1, stride).T.ravel())
    assert dst[1] - dst[0] == stride, "neighbouring threads read elements `stride` apart"
    with pytest.raises(ValueError, match="multiple of the stride"):
        strided_copy.copy_strided_launch(10, 4)


@pytest.mark.parametrize("kernel", [matmul.matmul_naive, matmul.matmul_naive_swapped])
def test_matmuls(kernel):
    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((13, 7)).astype(np.float32), rng.standard_normal((7, 11)).astype(np.float32)
    grid = (2, 2)
    C = checks.run_kernel(kernel, grid, (8, 8), A, B, checks.empty_output((13, 11)))[2]
    checks.check_close(C, A @ B, name="C", rtol=1e-4, atol=1e-4)


def _compile_all() -> dict:
    code = f"""
    import json, cudalearn
    cudalearn.setup("compile", quiet=True)
    import importlib
    from numba import cuda
    out = {{}}
    for mod in {MODULES!r}:
        m = importlib.import_module(mod)
        for name, sig in m.SIGNATURES.items():
            for cc in ((7, 5), (9, 0)):
                ptx, _ = cuda.compile_ptx(getattr(m, name).py_func, sig, cc=cc)
                out[f"{{mod}}.{{name}}@sm_{{cc[0]}}{{cc[1]}}"] = ptx
    print(json.dumps(out))
    """
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_ENABLE_CUDASIM", "CUDALEARN_MODE")}
    r = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env, timeout=600
    )
    assert r.returncode == 0, f"PTX compilation failed:\n{r.stderr[-3000:]}"
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_every_package_kernel_compiles_to_ptx_for_t4_and_h200():
    ptx = _compile_all()
    expected = {
        f"{mod}.{name}@{sm}"
        for mod in MODULES
        for name in importlib.import_module(mod).SIGNATURES
        for sm in ("sm_75", "sm_90")
    }
    assert set(ptx) == expected
    for key, text in ptx.items():
        sm = key.rsplit("@", 1)[1]
        assert f".target {sm}" in text, key
        if "matmul" in key or "busy" in key:
            assert ".f64" not in text, f"{key} computes in float64: use float32 constants and accumulators"


def _is_device_function(v) -> bool:
    """A `cuda.jit(device=True)` helper (it compiles inside the kernels that call it, not on its own)."""
    return bool(getattr(v, "_device", False) or getattr(v, "targetoptions", {}).get("device"))


def _kernels_defined_in(m) -> set[str]:
    """Names of the @cuda.jit kernels module `m` defines (made there, not imported from elsewhere)."""
    found = set()
    for name, v in vars(m).items():
        fn = getattr(v, "py_func", None) or getattr(v, "fn", None)
        is_kernel = hasattr(v, "py_func") or type(v).__name__ == "FakeCUDAKernel"
        if is_kernel and not _is_device_function(v) and getattr(fn, "__module__", None) == m.__name__:
            found.add(name)
    return found


def test_every_jit_kernel_in_the_package_has_a_signature():
    for mod in MODULES:
        m = importlib.import_module(mod)
        assert hasattr(m, "SIGNATURES"), f"{mod} defines kernels {_kernels_defined_in(m)} but no SIGNATURES"
        kernels = _kernels_defined_in(m)
        assert kernels == set(m.SIGNATURES), f"{mod}: kernels {kernels} vs SIGNATURES {set(m.SIGNATURES)}"


def _body(fn_node: ast.FunctionDef) -> str:
    body = fn_node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring may differ
    return ast.dump(ast.Module(body=body, type_ignores=[]))


def _jit_functions(source: str):
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and any(
            "cuda.jit" in ast.unparse(d) for d in node.decorator_list
        ):
            yield node


def test_solution_kernels_do_not_drift_from_the_package():
    package = {}
    for mod in MODULES:
        src = inspect.getsource(importlib.import_module(mod))
        package.update({f.name: _body(f) for f in _jit_functions(src)})
    seen = 0
    for path in sorted((ROOT / "solutions").glob("*.ipynb")) + sorted((ROOT / "book").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if cell.cell_type != "code":
                continue
            src = "\n".join(
                ln
                for ln in cell.source.splitlines()
                if not ln.strip().startswith("###") and not ln.lstrip().startswith(("%", "!"))
            )
            for fn in _jit_functions(src):
                if fn.name in package:
                    seen += 1
                    assert _body(fn) == package[fn.name], (
                        f"{path.name}: kernel {fn.name} differs from its copy in cudalearn.chapters; "
                        "keep one source"
                    )
    assert seen or not list((ROOT / "solutions").glob("*.ipynb"))
