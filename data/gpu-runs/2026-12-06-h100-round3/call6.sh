# Call 6 (not run: no device time left): Nsight Compute on chapter 10's row kernels (ch10.ncu_rows, adopt with
# `reference adopt`, then `cudalearn outputs` on books 10 and 10d), then chapters 8 and 10 in gpu mode.
source data/gpu-runs/2026-12-06-h100-round3/setup.sh
python3 scripts/ncu_rows.py gpu --out "$OUT/ncu-rows.json" > "$OUT/ncu-rows.log" 2>&1; echo "ncu_rows exit $?"
CUDALEARN_MODE=gpu python3 scripts/gpu_run.py --timeout 200 --out "$OUT/book10.json" \
  book/08-*.ipynb book/10*.ipynb > "$OUT/book10.log" 2>&1; echo "gpu_run exit $?"
grep "^== .*: " "$OUT/book10.log"; grep -B2 -A12 "^Traceback" "$OUT/book10.log" | head -80
