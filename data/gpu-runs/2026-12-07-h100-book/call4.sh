# The fourth device call of 2026-12-07 (not part of the course): 06a and 05 in gpu mode after the r16 reads'
# edits (6a's warp_controls.check(results), 05's generated fusion share).
mkdir -p /tmp/oc; OUT_FINAL="$OUT"; export OUT=/tmp/oc; t0=$(date +%s)
source data/gpu-runs/2026-12-06-h100-round3/setup.sh
CUDALEARN_MODE=gpu timeout 170 python3 scripts/gpu_run.py --timeout 160 --out "$OUT/run.json" \
  book/06a-warp-tiling-and-cp-async.ipynb book/05-fusion-shallow-net.ipynb > "$OUT/run.log" 2>&1
echo "gpu_run exit $? at $(( $(date +%s) - t0 )) s"
tar czf "$OUT_FINAL/call.tgz" -C /tmp/oc .
grep "^== .*: " "$OUT/run.log"; grep -B2 -A12 "^Traceback" "$OUT/run.log" | cut -c1-240 | head -40
grep -A4 "the tiles alone:" "$OUT/run.log"; grep -A3 "^Read back" "$OUT/run.log"
