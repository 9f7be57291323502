# Call 1: chapter 4 in gpu mode, for the SASS of its tiled products' hot loops (ch4.compiled_loops) and
# its timings in the same run.
source data/gpu-runs/2026-12-06-h100-round2/setup.sh
CUDALEARN_MODE=gpu timeout 400 python3 scripts/gpu_run.py --timeout 300 --out "$OUT/ch4.json" \
  book/04-bank-conflicts.ipynb > "$OUT/ch4.log" 2>&1; echo "gpu_run exit $?"
grep "^== " "$OUT/ch4.log"; tail -25 "$OUT/ch4.log"
