# Call 5: speed.sh again after the fixes of call 2's three failures (sizes with threads past the output, the
# spinning plant's missing import, a correct naive plant for lab 3), then run.py's CUDA choice on this driver.
# Everything under $OUT is packed into one archive (the device tool returns a limited number of files).
mkdir -p /tmp/o5; OUT_FINAL="$OUT"; export OUT=/tmp/o5
bash data/gpu-runs/2026-12-06-h100-round3/speed.sh > "$OUT/speed.log" 2>&1; echo "speed exit $?"
bash data/gpu-runs/2026-12-06-h100-round3/run_py_plan.sh > "$OUT/run_py_plan.log" 2>&1; echo "plan exit $?"
tar czf "$OUT_FINAL/call5.tgz" -C /tmp/o5 .
grep -v "^wrote" "$OUT/speed.log" | tail -n 75 | cut -c1-330; grep -o '"extra": "[a-z0-9]*"\|"driver_version": "[0-9.]*"' "$OUT/run_py_plan.json"
