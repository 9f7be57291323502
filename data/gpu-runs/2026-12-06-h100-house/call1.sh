# Call 1: every book notebook in gpu mode after the house refactor (figures recorded to $OUT, not adopted).
source data/gpu-runs/2026-12-06-h100-house/setup.sh
CUDALEARN_MODE=gpu timeout 560 python3 scripts/gpu_run.py --timeout 300 --out "$OUT/books.json" book/*.ipynb \
  > "$OUT/books.log" 2>&1; echo "gpu_run exit $?"
grep "^== " "$OUT/books.log"; tail -5 "$OUT/books.log"
