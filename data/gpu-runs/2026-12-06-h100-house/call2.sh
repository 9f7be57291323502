# Call 2: every solution notebook in gpu mode, then each lab's own solution graded by `cudalearn grade` in gpu
# mode (as root: student code runs as nobody), twelve grade runs at once, with this refactor's judge and
# compile servers.
source data/gpu-runs/2026-12-06-h100-house/setup.sh
# book 09 again first: call 1's run of it ended with "double free or corruption" after its last cell
CUDALEARN_MODE=gpu timeout 120 python3 scripts/gpu_run.py --timeout 110 book/09-vit-patching.ipynb > "$OUT/book09.log" 2>&1
echo "book 09 again: exit $?"; grep "^== \|double free" "$OUT/book09.log"
CUDALEARN_MODE=gpu timeout 260 python3 scripts/gpu_run.py --timeout 250 --out "$OUT/solutions.json" solutions/*.ipynb \
  > "$OUT/solutions.log" 2>&1; echo "gpu_run exit $?"
grep "^== " "$OUT/solutions.log"
for s in solutions/*.ipynb; do n=$(basename $s .ipynb); mkdir -p /tmp/subs/$n; cp $s /tmp/subs/$n/; done
for s in solutions/*.ipynb; do n=$(basename $s .ipynb)
  (CUDALEARN_MODE=gpu timeout 180 cudalearn grade $s /tmp/subs/$n --out /tmp/grades -j 1 > /tmp/grade_$n.log 2>&1; echo "exit $?" >> /tmp/grade_$n.log) &
done; wait
for f in /tmp/grade_*.log; do echo "== $f"; cat $f; done > "$OUT/grade.log"; cat /tmp/grades/*.csv > "$OUT/grades.csv"
grep -v "^wrote" "$OUT/grade.log" | cut -c1-220
