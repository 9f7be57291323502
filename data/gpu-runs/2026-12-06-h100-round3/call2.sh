# Call 2: the tensor-core GEMM candidates of 06d (issue 33) against cuBLAS FP16 and the best FP32 kernel,
# chapter 9b's block pace, then speed.sh (the speed-graded labs, issue 32).
source data/gpu-runs/2026-12-06-h100-round3/setup.sh
CUDALEARN_MODE=gpu timeout 200 python3 scripts/bench_tc.py --out "$OUT/tc.json" > "$OUT/tc.log" 2>&1; echo "bench_tc exit $?"
tail -n 45 "$OUT/tc.log"
CUDALEARN_MODE=gpu timeout 90 python3 -c "from cudalearn.chapters.ch09 import pace; pace.write('$OUT/ch9-pace.json')" \
  > "$OUT/ch9-pace.log" 2>&1; echo "pace exit $?"; tail -n 8 "$OUT/ch9-pace.log"
bash data/gpu-runs/2026-12-06-h100-round3/speed.sh > "$OUT/speed.log" 2>&1; echo "speed exit $?"
tail -n 70 "$OUT/speed.log"
