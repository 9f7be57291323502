# The third device call of 2026-12-07 (not part of the course): book 05 again after its sweep's reading was
# narrowed (calls 1 and 2 ran call.sh of 2026-12-06-h100-round4), then 6a's Exercise 3 command as printed, to
# check that it profiles steps 4 and 5 and that the Source page's wavefront columns exist.
mkdir -p /tmp/oc; OUT_FINAL="$OUT"; export OUT=/tmp/oc; t0=$(date +%s)
source data/gpu-runs/2026-12-06-h100-round3/setup.sh
CUDALEARN_MODE=gpu timeout 200 python3 scripts/gpu_run.py --timeout 190 --out "$OUT/run.json" \
  book/05-fusion-shallow-net.ipynb > "$OUT/run.log" 2>&1; echo "gpu_run exit $? at $(( $(date +%s) - t0 )) s"
NCU=$(python3 -c "from cudalearn.compile import toolchain; print(toolchain.find_ncu() or '')")
echo "ncu: $NCU"
if [ -n "$NCU" ]; then
  CUDALEARN_MODE=gpu timeout 150 "$NCU" --kernel-name regex:"regblock_2d_(prefetch|warptile)" --section SourceCounters \
    --import-source yes -o /tmp/oc/steps45 python3 -m cudalearn.chapters.ch06.bench --ncu-child --n 4096 \
    > "$OUT/ncu.log" 2>&1; echo "ncu exit $? at $(( $(date +%s) - t0 )) s"; tail -n 5 "$OUT/ncu.log"
  timeout 60 "$NCU" --import /tmp/oc/steps45.ncu-rep --page source --print-source sass --csv \
    > "$OUT/ncu-source.csv" 2> "$OUT/ncu-source.err"; echo "source page exit $?"
  head -c 600 "$OUT/ncu-source.csv"; echo; head -c 400 "$OUT/ncu-source.err"
  rm -f /tmp/oc/steps45.ncu-rep
fi
tar czf "$OUT_FINAL/call.tgz" -C /tmp/oc .
grep "^== .*: " "$OUT/run.log"; grep -B2 -A12 "^Traceback" "$OUT/run.log" | cut -c1-240 | head -40
