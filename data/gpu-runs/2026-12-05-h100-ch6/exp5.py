"""Device call 1 (not part of the course): how long must Chapter 5's timed training be for PyTorch's
repeats to agree within 10%, and does the garbage collector matter? Writes $OUT/exp5.json."""
import gc, json, os, sys, time
import numpy as np
import cudalearn
cudalearn.setup()
from cudalearn import datasets, precision
from cudalearn.bench import shallow_net
from cudalearn.nn import mlp
from cudalearn.sizes import size

precision.set_fp32()
mlp.quiet_small_grids()
data = datasets.load_digits_augmented(size("ch5.copies"), side=size("ch5.side"), originals_used=size("ch5.originals"))
sizes = mlp.layer_sizes(data.features, size("ch5.hidden"))
batch = size("ch5.batch")
out = {"configs": [], "epochs_torch": None}
path = os.path.join(os.environ.get("OUT", "/tmp"), "exp5.json")
real_disable = gc.disable
for epochs, repeats, gc_off in [(5, 5, False), (5, 5, True), (20, 5, True), (20, 5, False), (40, 5, True)]:
    gc.disable = real_disable if gc_off else (lambda: None)
    t0 = time.time()
    r = shallow_net.time_training(data, sizes, batch=batch, lr=mlp.LR, epochs=epochs,
                                  names=("prepared", "torch"), repeats=repeats)
    gc.disable = real_disable
    entry = {"epochs": epochs, "repeats": repeats, "gc_off": gc_off, "runs": r["runs"], "spread": r["spread"],
             "ratio": r["seconds"]["prepared"] / r["seconds"]["torch"], "wall_s": time.time() - t0}
    out["configs"].append(entry)
    print(json.dumps({k: (v if k != "runs" else {n: [round(x, 3) for x in xs] for n, xs in v.items()}) for k, v in entry.items()}), flush=True)
    json.dump(out, open(path, "w"), indent=1)
# PyTorch epoch by epoch: where does its time vary?
net = mlp.TorchMLP(mlp.init_params(sizes, 0), batch, mlp.LR)
dd = net.data_class(data)
mlp.train(net, dd, 1, seed=1, evaluate=False, progress=False)
per = []
for e in range(40):
    dd.synchronize(); t0 = time.perf_counter()
    mlp.train(net, dd, 1, seed=e, evaluate=False, progress=False)
    dd.synchronize(); per.append(time.perf_counter() - t0)
out["epochs_torch"] = per
print("torch per epoch", [round(x, 4) for x in per], flush=True)
json.dump(out, open(path, "w"), indent=1)
