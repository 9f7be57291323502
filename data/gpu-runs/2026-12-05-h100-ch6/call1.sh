# Device call 1 (not part of the course): install as a user would, then the training-spread experiment
# and Chapter 6's benchmark with the new cp.async step (no Nsight Compute).
export PYTHONUNBUFFERED=1
mkdir -p /tmp/np && tar xJf .dev/numpy-2.4.6-cp312.tar.xz -C /tmp/np && (cd /tmp/np && python3 -m zipfile -c /tmp/numpy-2.4.6-cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl $(ls -A))
python3 -m pip install -q --no-index --no-deps --no-compile /tmp/numpy-2.4.6-*.whl 2>&1 | tail -1
python3 -m pip install -q --no-deps --no-build-isolation --no-compile -e . 2>&1 | tail -1
(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; python3 -c "import numpy, numba, torch; from numba import cuda; print(numpy.__version__, numba.__version__, torch.__version__)"; pip list 2>/dev/null | grep -i "numba\|triton\|torch\|numpy") > "$OUT/env.txt" 2>&1
export CUDALEARN_MODE=gpu CUDALEARN_NUMBA=numba-cuda
timeout 200 python3 scripts/bench_gemm.py --no-ncu 2>&1 | tee "$OUT/bench_gemm.log" | tail -40
timeout 230 python3 .dev/exp5.py 2>&1 | tee "$OUT/exp5.log" | tail -20
