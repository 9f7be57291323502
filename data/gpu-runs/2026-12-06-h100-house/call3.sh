# Call 3: book 09 again (call 1's run of it ended with "double free or corruption" after its last cell),
# then each lab's own solution graded by `cudalearn grade` in gpu mode (call 2 lacked nbformat there).
source data/gpu-runs/2026-12-06-h100-house/setup.sh
CUDALEARN_MODE=gpu timeout 150 python3 scripts/gpu_run.py --timeout 140 --out /tmp/b09.json book/09-vit-patching.ipynb \
  > "$OUT/book09.log" 2>&1; echo "book 09 again: exit $?"; grep "^== .*: \|double free" "$OUT/book09.log"
for s in solutions/*.ipynb; do n=$(basename $s .ipynb); mkdir -p /tmp/subs/$n; cp $s /tmp/subs/$n/; done
for s in solutions/*.ipynb; do n=$(basename $s .ipynb)
  (CUDALEARN_MODE=gpu timeout 300 cudalearn grade $s /tmp/subs/$n --out /tmp/grades -j 1 > /tmp/grade_$n.log 2>&1; echo "exit $?" >> /tmp/grade_$n.log) &
done; wait
for f in /tmp/grade_*.log; do echo "== $f"; cat $f; done > "$OUT/grade.log"; cat /tmp/grades/*.csv > "$OUT/grades.csv"
grep -v "^wrote" "$OUT/grade.log" | cut -c1-220
