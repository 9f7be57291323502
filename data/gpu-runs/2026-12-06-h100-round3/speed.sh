# Speed-graded labs (issue 32), on one GPU: every speed lab's solution, naive answers (a low tier), the planted
# cheating kernels (zero speed points, each with its cause) and lab 2's solution graded three times (one tier).
# The six labs are graded at once, their timings in turn under one lock file (CUDALEARN_TIMING_LOCK); each
# `cudalearn grade` runs up to 8 notebooks at a time. Writes $OUT/grades/ (tables, feedback, leaderboards),
# $OUT/grade-LAB.log, $OUT/speed-check.txt (PASS/FAIL per expectation) and $OUT/env.txt (device, versions).
source data/gpu-runs/2026-12-06-h100-round3/setup.sh
export CUDALEARN_MODE=gpu CUDALEARN_TIMING_LOCK=/tmp/cudalearn-speed-timing.lock
date -u +"%Y-%m-%dT%H:%M:%SZ" >> "$OUT/env.txt"
SUBS=/tmp/cudalearn-speed-subs; rm -rf "$SUBS"
python3 tests/grading/speed_cheats/cheats.py "$SUBS" > "$OUT/plants.txt" || exit 1
grade() { timeout 340 cudalearn grade "$1" "$SUBS/$1" --out "$OUT/grades" -j "$2" --timeout 300 --leaderboard; }
start=$(date +%s)
for lab in 02 03 04 05 06 10; do  # lab 2 has 15 notebooks: 8 at a time; the others 1 to 3, 2 at a time
  (grade $lab "$([ $lab = 02 ] && echo 8 || echo 2)" > "$OUT/grade-$lab.log" 2>&1; echo "lab $lab: grade exit $?") &
done
wait
echo "graded in $(( $(date +%s) - start )) s"
for lab in 02 03 04 05 06 10; do tail -n 25 "$OUT/grade-$lab.log" | grep -v "^wrote"; done
(cd tests/grading/speed_cheats && python3 check.py "$OUT/grades") > "$OUT/speed-check.txt" 2>&1
echo "check exit $?"; cat "$OUT/speed-check.txt"
