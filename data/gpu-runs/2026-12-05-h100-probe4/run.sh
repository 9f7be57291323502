# One device call (not part of the course): numba-cuda-mlir on the device's own numpy, then probe 4.
#   run(command="bash .dev/run.sh", carry=[".dev", ".whl-mlir"], timeout_s=600)
set -x
export PYTHONUNBUFFERED=1 CUDALEARN_MODE=gpu
python3 -m pip install -q --no-deps --no-build-isolation --no-compile -e . 2>&1 | tail -2
# 1. numba-cuda-mlir 0.6.0 on numpy as the image has it (2.5.x): the wheel into /tmp/mlir, no deps
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/mlir .whl-mlir/*.whl 2>&1 | tail -2
python3 -m pip list 2>/dev/null | grep -i -E "^(numpy|numba|numba-cuda|cuda-bindings|cuda-python|cuda-core|cuda-pathfinder|nvidia-cuda-nvcc|nvidia-cuda-nvcc-cu12|nvidia-nvjitlink|llvmlite|torch|triton) " | tee "$OUT/env.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv | tee -a "$OUT/env.txt"
(export PYTHONPATH=/tmp/mlir CUDALEARN_NUMBA=numba-cuda-mlir; timeout 110 python3 scripts/mlir_gpu_smoke.py 2>&1 | grep -v -i "NumbaPerformanceWarning\|^\s*warn" | tee "$OUT/mlir_smoke.log"; echo "smoke exit: ${PIPESTATUS[0]}" | tee -a "$OUT/mlir_smoke.log")
# 2. numpy 2.4.6 (the course's pin: numba-cuda 0.30 breaks on 2.5), repacked from .dev as a wheel
mkdir -p /tmp/np && tar xJf .dev/numpy-2.4.6-cp312.tar.xz -C /tmp/np && (cd /tmp/np && python3 -m zipfile -c /tmp/numpy-2.4.6-cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl $(ls -A))
python3 -m pip install -q --no-index --no-deps --no-compile /tmp/numpy-2.4.6-*.whl 2>&1 | tail -2
export CUDALEARN_NUMBA=numba-cuda
python3 -c "import numpy, numba_cuda, torch, triton; print(numpy.__version__, torch.__version__, triton.__version__)" | tee -a "$OUT/env.txt"
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_counting.py tests/test_trace_warp.py -k "gpu or bit_for_bit" 2>&1 | tail -4 | tee "$OUT/gpu_tests.log"
timeout 410 python3 .dev/probe4.py --budget 300 --out "$OUT" 2>&1 | grep -v -i "NumbaPerformanceWarning\|grid size\|^\s*warn" | tee "$OUT/probe4.log"
echo "probe exit: ${PIPESTATUS[0]}"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv
