"""The package's kernels: correct under the simulator, compiled to real PTX, same as the solutions' copies.

The kernel modules are discovered (`cudalearn.kernels.kernel_modules`), never listed: a new module of
`cudalearn/kernels/` is compiled, checked for SIGNATURES and compared with the notebooks' copies at once.
"""

import ast
import importlib
import inspect
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import numpy as np
import pytest

from cudalearn import checks
from cudalearn.kernels import basics, kernel_modules, matmul, strided_copy

ROOT = Path(__file__).resolve().parents[1]
MODULES = kernel_modules()


def test_kernel_modules_are_discovered_from_the_source(tmp_path):
    chapters = ("basics", "strided_copy", "matmul", "tiled", "transpose", "linear", "elementwise", "regblock")
    assert {f"cudalearn.kernels.{name}" for name in (*chapters, "patchify")} <= set(MODULES)
    assert "cudalearn.kernels.memory" not in MODULES, "an alias that only re-exports defines no kernel"
    pkg = tmp_path / "cudalearn"
    (pkg / "kernels").mkdir(parents=True)
    (pkg / "other").mkdir()
    (pkg / "kernels" / "new_chapter.py").write_text("@cuda.jit\ndef k(x):\n    pass\n")
    (pkg / "kernels" / "helpers.py").write_text("def launch(n):\n    return n\n")
    (pkg / "other" / "listed.py").write_text('SIGNATURES = {"k": "void(float32[::1])"}\n')
    (pkg / "other" / "tests_only.py").write_text("@cuda.jit\ndef k(x):\n    pass\n")
    found = kernel_modules(pkg)
    assert found == ["cudalearn.kernels.new_chapter", "cudalearn.other.listed"], found


def test_importing_the_kernels_package_chooses_no_mode():
    code = """
    import os, sys
    import cudalearn.kernels
    from cudalearn import device
    assert "numba" not in sys.modules and "NUMBA_ENABLE_CUDASIM" not in os.environ, sorted(sys.modules)
    assert device._INFO is None
    print(len(cudalearn.kernels.kernel_modules()))
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
                        f"{path.name}: kernel {fn.name} differs from its copy in cudalearn.kernels; "
                        "keep one source"
                    )
    assert seen or not list((ROOT / "solutions").glob("*.ipynb"))
