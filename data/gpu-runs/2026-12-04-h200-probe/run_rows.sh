set -x
export PYTHONUNBUFFERED=1 CUDALEARN_MODE=gpu
python3 -m pip install -q --no-index --no-deps --no-compile .whl/numpy-2.4.6-*.whl 2>&1 | tail -2
python3 -m pip install -q --no-deps --no-build-isolation --no-compile -e . 2>&1 | tail -2
python3 -c "import numpy, numba_cuda, torch; print(numpy.__version__, torch.__version__)"
timeout 300 python3 .probe/rows_probe.py 2>&1 | tee $OUT/rows_probe.log
timeout 200 ncu --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,smsp__inst_executed.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum -k regex:'softmax|ln_|layernorm|layer_norm|sm_' python3 .probe/rows_probe.py --ncu > $OUT/rows_ncu.log 2>&1; echo ncu rc=$?
grep -E "^  [a-z_]|gpu__time|dram__|warps_active|registers|inst_exec|sectors|requests" $OUT/rows_ncu.log | sed -E 's/\[abi[^]]*\]//; s/\(Array.*//' | head -150
