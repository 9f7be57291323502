# Call 4: speed.sh cut to lab 2 for the device time left (about 5 minutes): lab 2's solution graded three
# times, its naive answer and its planted cheats, timed one at a time under the timing lock.
source data/gpu-runs/2026-12-06-h100-round2/setup.sh
export CUDALEARN_MODE=gpu CUDALEARN_TIMING_LOCK=/tmp/cudalearn-speed-timing.lock
SUBS=/tmp/cudalearn-speed-subs; rm -rf "$SUBS"
python3 tests/grading/speed_cheats/cheats.py "$SUBS" > "$OUT/plants.txt" || exit 1
rm -rf "$SUBS"/0[3-9] "$SUBS"/1*
start=$(date +%s)
timeout 200 cudalearn grade 02 "$SUBS/02" --out "$OUT/grades" -j 8 --timeout 150 --leaderboard > "$OUT/grade-02.log" 2>&1
echo "lab 02: grade exit $?, $(( $(date +%s) - start )) s"; grep -v "^wrote" "$OUT/grade-02.log" | cut -c1-230 | tail -30
