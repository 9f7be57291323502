# Device calls of 2026-12-06, third session (not part of the course): install as a user would, into the machine's own
# python: the carried numpy 2.4.6 wheel (numba-cuda 0.30 breaks on the image's numpy 2.5), then the course.
export PYTHONUNBUFFERED=1 CUDALEARN_NUMBA=numba-cuda
python3 -m pip install -q --no-index --no-deps --no-compile .whl/*.whl 2>&1 | tail -1  # numpy 2.4.6; nbformat and its needs for the grader
python3 -m pip install -q --no-deps --no-build-isolation --no-compile -e . 2>&1 | tail -1
(nvidia-smi --query-gpu=name,driver_version --format=csv; git log -1 --format='commit %h %s' 2>/dev/null | cut -c1-120;
 python3 -c "import numpy, numba, torch, numba.cuda; print('numpy', numpy.__version__, 'numba', numba.__version__, 'torch', torch.__version__)";
 python3 -m pip list 2>/dev/null | grep -i "numba\|triton\|^torch \|cuda-bindings") > "$OUT/env.txt" 2>&1
