# Call 4: book 09's end, "double free or corruption": the Python stack at the abort (faulthandler), from
# this tree and from the tree before the refactor (6cd8952, carried as .old), one after the other.
source data/gpu-runs/2026-12-06-h100-house/setup.sh
export PYTHONFAULTHANDLER=1
CUDALEARN_MODE=gpu timeout 140 python3 scripts/gpu_run.py --timeout 130 --out /tmp/b.json book/09-vit-patching.ipynb \
  > "$OUT/book09_new.log" 2>&1; echo "new tree: exit $?"; grep -A30 "double free\|Fatal Python" "$OUT/book09_new.log" | head -60
(cd .old && PYTHONPATH=$PWD/src CUDALEARN_MODE=gpu timeout 140 python3 scripts/gpu_run.py --timeout 130 --out /tmp/c.json \
  book/09-vit-patching.ipynb > "$OUT/book09_old.log" 2>&1; echo "old tree: exit $?"); grep "^== .*: \|double free" "$OUT/book09_old.log"
# then each lab's own solution graded again in gpu mode, judges now started afresh there
for s in solutions/*.ipynb; do n=$(basename $s .ipynb); mkdir -p /tmp/subs/$n; cp $s /tmp/subs/$n/; done
for s in solutions/*.ipynb; do n=$(basename $s .ipynb)
  (CUDALEARN_MODE=gpu timeout 280 cudalearn grade $s /tmp/subs/$n --out /tmp/grades -j 1 > /tmp/grade_$n.log 2>&1; echo "exit $?" >> /tmp/grade_$n.log) &
done; wait
for f in /tmp/grade_*.log; do echo "== $f"; cat $f; done > "$OUT/grade.log"; cat /tmp/grades/*.csv > "$OUT/grades.csv"
grep -v "^wrote" "$OUT/grade.log" | cut -c1-220
