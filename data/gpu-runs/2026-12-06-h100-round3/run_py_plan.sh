# run.py's CUDA choice read on the H100's driver (no install: the device has no network); writes $OUT/run_py_plan.json
python3 -c 'import json, importlib.util, pathlib, os
s = importlib.util.spec_from_file_location("run", "run.py"); r = importlib.util.module_from_spec(s); s.loader.exec_module(r)
p = pathlib.Path("/proc/driver/nvidia/version")
out = {"proc_version": p.read_text() if p.exists() else None, "has_nvidia_gpu": r.has_nvidia_gpu(),
       "driver_version": r.driver_version(), "driver_version_smi_only": r.driver_version(pathlib.Path("/nonexistent")),
       "plan": r.plan()._asdict()}
pathlib.Path(os.environ["OUT"], "run_py_plan.json").write_text(json.dumps(out, indent=1)); print(json.dumps(out, indent=1))'
