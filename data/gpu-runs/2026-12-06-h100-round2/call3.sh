# Call 3: the book's chapters 7-11 with their deep dives, then every solution notebook, in gpu mode.
source data/gpu-runs/2026-12-06-h100-round2/setup.sh
CUDALEARN_MODE=gpu timeout 450 python3 scripts/gpu_run.py --timeout 200 --out "$OUT/books_7_11.json" \
  book/0[7-9]*.ipynb book/1*.ipynb > "$OUT/books_7_11.log" 2>&1; echo "gpu_run exit $?"
grep "^== .*: " "$OUT/books_7_11.log"; grep -B2 -A10 "^Traceback" "$OUT/books_7_11.log" | head -60
CUDALEARN_MODE=gpu timeout 100 python3 scripts/gpu_run.py --timeout 60 --out "$OUT/solutions.json" solutions/*.ipynb \
  > "$OUT/solutions.log" 2>&1; echo "gpu_run exit $?"
grep "^== .*: " "$OUT/solutions.log"
