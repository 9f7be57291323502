# A device call of the sixth session of 2026-12-06 (not part of the course). Arguments: "speed" to run the
# speed check first (round3/speed.sh: labs 2-6 and 10, their naive answers and planted cheats) and run.py's
# CUDA choice on this driver, "ncu" to profile chapter 10's row kernels, then the notebooks and scripts to run
# in gpu mode (scripts/gpu_run.py), in order, until the call's time is spent; gpu_run records each figure as
# it is measured, so what ran before the limit is kept. $OUT is packed into one archive (the device tool
# returns a limited number of files).
mkdir -p /tmp/oc; OUT_FINAL="$OUT"; export OUT=/tmp/oc; t0=$(date +%s); R3=data/gpu-runs/2026-12-06-h100-round3
source $R3/setup.sh
if [ "$1" = speed ]; then shift
  timeout 300 bash $R3/speed.sh > "$OUT/speed.log" 2>&1; echo "speed exit $? at $(( $(date +%s) - t0 )) s"
  bash $R3/run_py_plan.sh > "$OUT/run_py_plan.log" 2>&1; echo "plan exit $?"
fi
if [ "$1" = ncu ]; then shift
  timeout 90 python3 scripts/ncu_rows.py gpu --out "$OUT/ncu-rows.json" > "$OUT/ncu-rows.log" 2>&1
  echo "ncu_rows exit $? at $(( $(date +%s) - t0 )) s"; tail -n 3 "$OUT/ncu-rows.log"
fi
left=$(( ${LIMIT:-570} - ($(date +%s) - t0) ))
CUDALEARN_MODE=gpu timeout $left python3 scripts/gpu_run.py --timeout 170 --out "$OUT/run.json" "$@" \
  > "$OUT/run.log" 2>&1; echo "gpu_run exit $? at $(( $(date +%s) - t0 )) s"
tar czf "$OUT_FINAL/call.tgz" -C /tmp/oc .
[ -f "$OUT/speed.log" ] && grep -v "^wrote" "$OUT/speed.log" | grep -i "graded in\|exit\|FAIL\|PASS" | cut -c1-220 | tail -n 48
[ -f "$OUT/run_py_plan.json" ] && grep -o '"extra": "[a-z0-9]*"\|"driver_version": "[0-9.]*"' "$OUT/run_py_plan.json"
grep "^== .*: " "$OUT/run.log"; grep -B2 -A12 "^Traceback" "$OUT/run.log" | cut -c1-240 | head -70
