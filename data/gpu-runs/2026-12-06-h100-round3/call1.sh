# Call 1: speed.sh (the speed-graded labs, issue 32), then the book notebooks of chapters 0-6 whose code changed
# this session (00, 02, 02a, 03, 05, 06) in gpu mode, in what time is left.
bash data/gpu-runs/2026-12-06-h100-round3/speed.sh > "$OUT/speed.log" 2>&1; echo "speed exit $?"
tail -n 60 "$OUT/speed.log"
CUDALEARN_MODE=gpu timeout 170 python3 scripts/gpu_run.py --timeout 100 --out "$OUT/books_0_6.json" \
  book/00-setup.ipynb book/02-first-kernels.ipynb book/02a-bytes-in-flight.ipynb book/03-tiling.ipynb \
  book/06-tensor-cores-triton.ipynb book/05-fusion-shallow-net.ipynb > "$OUT/books_0_6.log" 2>&1; echo "gpu_run exit $?"
grep "^== .*: " "$OUT/books_0_6.log"; grep -B2 -A12 "^Traceback" "$OUT/books_0_6.log" | head -60
