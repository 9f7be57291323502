# Call 3: 06a and 06d again (call 2 found a kernel not yet compiled in 06a's resources and the tracer
# without a stand-in for cp.async in gpu mode in 06d), then the book's chapters 7-11 with their deep dives.
source data/gpu-runs/2026-12-06-h100-round2/setup.sh
CUDALEARN_MODE=gpu timeout 520 python3 scripts/gpu_run.py --timeout 200 --out "$OUT/books_7_11.json" \
  book/06a-*.ipynb book/06d-*.ipynb book/0[7-9]*.ipynb book/1*.ipynb > "$OUT/books_7_11.log" 2>&1; echo "gpu_run exit $?"
grep "^== .*: " "$OUT/books_7_11.log"; grep -B2 -A10 "^Traceback" "$OUT/books_7_11.log" | head -60
