# Device call 5 (not part of the course): Chapter 5 and its benchmark in gpu mode, stored in $OUT/ref.json.
export PYTHONUNBUFFERED=1
mkdir -p /tmp/np && tar xJf .dev/numpy-2.4.6-cp312.tar.xz -C /tmp/np && (cd /tmp/np && python3 -m zipfile -c /tmp/numpy-2.4.6-cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl $(ls -A))
python3 -m pip install -q --no-index --no-deps --no-compile /tmp/numpy-2.4.6-*.whl 2>&1 | tail -1
python3 -m pip install -q --no-deps --no-build-isolation --no-compile -e . 2>&1 | tail -1
(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; python3 -c "import numpy, numba, torch; print(numpy.__version__, numba.__version__, torch.__version__)"; nproc; lscpu | grep "Model name") > "$OUT/env.txt" 2>&1
export CUDALEARN_NUMBA=numba-cuda
CUDALEARN_MODE=gpu timeout 500 python3 scripts/gpu_run.py --timeout 300 --out "$OUT/ref.json" book/05-fusion-shallow-net.ipynb scripts/bench_fusion.py 2>&1 | tee "$OUT/gpu_run.log" | grep -v "^  .* cell [0-9]*: " | tail -60
