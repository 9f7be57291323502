# Call 2: the book's chapters 0-6 with their deep dives in gpu mode (figures recorded to $OUT; adopted
# afterwards only where README.md says), then the solutions of the labs without speed points (00, 01, 07, 08, 09, 11) graded by
# `cudalearn grade` in gpu mode (as root: student code runs as nobody), at once; speed.sh grades the other six.
source data/gpu-runs/2026-12-06-h100-round2/setup.sh
CUDALEARN_MODE=gpu timeout 380 python3 scripts/gpu_run.py --timeout 200 --out "$OUT/books_0_6.json" \
  book/0[0-6]*.ipynb > "$OUT/books_0_6.log" 2>&1; echo "gpu_run exit $?"
grep "^== .*: " "$OUT/books_0_6.log"; grep -B2 -A10 "^Traceback" "$OUT/books_0_6.log" | head -60
LABS="solutions/0[0178]*.ipynb solutions/09*.ipynb solutions/11*.ipynb"
for s in $LABS; do n=$(basename $s .ipynb); mkdir -p /tmp/subs/$n; cp $s /tmp/subs/$n/; done
for s in $LABS; do n=$(basename $s .ipynb)
  (CUDALEARN_MODE=gpu timeout 150 cudalearn grade $s /tmp/subs/$n --out /tmp/grades -j 1 > /tmp/grade_$n.log 2>&1; echo "exit $?" >> /tmp/grade_$n.log) &
done; wait
for f in /tmp/grade_*.log; do echo "== $f"; cat $f; done > "$OUT/grade.log"; cat /tmp/grades/*.csv > "$OUT/grades.csv"
grep -v "^wrote" "$OUT/grade.log" | cut -c1-160 | head -50
