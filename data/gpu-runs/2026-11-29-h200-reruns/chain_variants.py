"""Exploration (not committed): variants of the fused bias-ReLU-dropout chain on the H200."""
import json, math, sys, time
import numpy as np
import cudalearn
info = cudalearn.setup()
from numba import cuda, float32, uint64, uint32, int32, uint8, uint16
from numba.cuda import libdevice as ld
from cudalearn import timing
from cudalearn.kernels import elementwise as ew
import torch

ROWS, COLS = 16384, 4096
Z, b, mask, s = ew.chain_inputs(ROWS, COLS)
ref = ew.chain_reference(Z, b, mask, s)
dZ, db, dm = cuda.to_device(Z), cuda.to_device(b), cuda.to_device(mask)
dY = cuda.device_array_like(dZ)
nbytes = ew.chain_bytes(ROWS, COLS)["dram_min"]
results = {}

def bench(name, fn, nb=nbytes, out=None):
    try:
        _bench(name, fn, nb, out)
    except Exception as e:
        print(f"{name:55s} FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
        results[name] = {"error": str(e)[:300]}

def _bench(name, fn, nb, out):
    dY[:] = 0  # not needed but keeps honest
    fn(); cuda.synchronize()
    if out is not None:
        got = out()
        ok = np.allclose(got, ref if out is not None else None, rtol=1e-6, atol=1e-6)
    else:
        ok = None
    t = timing.gpu_time(fn, repeat=15)
    gb = nb / (t.median_ms * 1e-3) / 1e9
    results[name] = {"ms": t.median_ms, "gbps": gb, "ok": bool(ok) if ok is not None else None}
    print(f"{name:55s} {t.median_ms:8.4f} ms {gb:8.0f} GB/s ok={ok}", flush=True)

def make_2d(EPT, select=False):
    @cuda.jit
    def k(Z, b, mask, s, Y):
        x, row = cuda.grid(2)
        width = cuda.gridsize(2)[0]
        if row < Z.shape[0]:
            z = cuda.local.array(EPT, float32)
            keep = cuda.local.array(EPT, uint8)
            for e in range(EPT):
                col = x + e * width
                if col < Z.shape[1]:
                    z[e] = Z[row, col] + b[col]
                    keep[e] = mask[row, col]
            for e in range(EPT):
                col = x + e * width
                if col < Z.shape[1]:
                    if select:
                        Y[row, col] = max(z[e], float32(0.0)) * s if keep[e] else float32(0.0)
                    else:
                        Y[row, col] = max(z[e], float32(0.0)) * float32(keep[e]) * s
    return k

def make_pairs(EPT):
    """8-byte accesses: Z, Y, b viewed as float64 (pairs of float32), mask as uint16."""
    @cuda.jit
    def k(Z2, b2, m2, s, Y2):
        x, row = cuda.grid(2)
        width = cuda.gridsize(2)[0]
        if row < Z2.shape[0]:
            z = cuda.local.array(EPT, uint64)  # unused
            lo = cuda.local.array(EPT, float32)
            hi = cuda.local.array(EPT, float32)
            mk = cuda.local.array(EPT, uint16)
            for e in range(EPT):
                col = x + e * width
                if col < Z2.shape[1]:
                    zz = Z2[row, col]
                    bb = b2[col]
                    lo[e] = ld.int_as_float(ld.double2loint(zz)) + ld.int_as_float(ld.double2loint(bb))
                    hi[e] = ld.int_as_float(ld.double2hiint(zz)) + ld.int_as_float(ld.double2hiint(bb))
                    mk[e] = m2[row, col]
            for e in range(EPT):
                col = x + e * width
                if col < Z2.shape[1]:
                    m = mk[e]
                    ylo = max(lo[e], float32(0.0)) * float32(m & 0xFF) * s
                    yhi = max(hi[e], float32(0.0)) * float32(m >> 8) * s
                    Y2[row, col] = ld.hiloint2double(ld.float_as_int(yhi), ld.float_as_int(ylo))
    return k

def make_flat(EPT):
    @cuda.jit
    def k(Zf, b, mf, s, Yf, n):
        i = cuda.grid(1)
        stride = cuda.gridsize(1)
        z = cuda.local.array(EPT, float32)
        kp = cuda.local.array(EPT, float32)
        for e in range(EPT):
            j = i + e * stride
            if j < Zf.shape[0]:
                z[e] = Zf[j] + b[j % n]
                kp[e] = float32(mf[j])
        for e in range(EPT):
            j = i + e * stride
            if j < Zf.shape[0]:
                Yf[j] = max(z[e], float32(0.0)) * kp[e] * s
    return k

def make_rowloop(EPT, ROWS_PER):
    """1-D block along a row, each block walks ROWS_PER rows: b loaded once into registers."""
    @cuda.jit
    def k(Z, b, mask, s, Y):
        x = cuda.grid(1)
        width = cuda.gridsize(1)
        r0 = cuda.blockIdx.y * ROWS_PER
        bb = cuda.local.array(EPT, float32)
        for e in range(EPT):
            col = x + e * width
            if col < Z.shape[1]:
                bb[e] = b[col]
        for r in range(ROWS_PER):
            row = r0 + r
            if row < Z.shape[0]:
                z = cuda.local.array(EPT, float32)
                kp = cuda.local.array(EPT, float32)
                for e in range(EPT):
                    col = x + e * width
                    if col < Z.shape[1]:
                        z[e] = Z[row, col] + bb[e]
                        kp[e] = float32(mask[row, col])
                for e in range(EPT):
                    col = x + e * width
                    if col < Z.shape[1]:
                        Y[row, col] = max(z[e], float32(0.0)) * kp[e] * s
    return k

tZ = torch.from_numpy(Z).cuda(); tY = torch.empty_like(tZ)
bench("copy (torch)", lambda: tY.copy_(tZ), nb=2 * 4 * ROWS * COLS)
g, bl = ew.launch_chain((ROWS, COLS))
bench("copy_2d (Numba) EPT4 32x8", lambda: ew.copy_2d[g, bl](dZ, dY), nb=2 * 4 * ROWS * COLS)
bench("fused current EPT4 32x8", lambda: ew.bias_relu_dropout[g, bl](dZ, db, dm, s, dY), out=dY.copy_to_host)

for EPT in (2, 4, 8, 16):
    for block in ((32, 8), (64, 4), (128, 2), (256, 1), (32, 16)):
        k = make_2d(EPT)
        gr = (max(1, math.ceil(COLS / (block[0] * EPT))), math.ceil(ROWS / block[1]))
        bench(f"2d EPT{EPT} {block}", (lambda k=k, gr=gr, block=block: k[gr, block](dZ, db, dm, s, dY)), out=dY.copy_to_host)
for EPT in (4, 8):
    k = make_2d(EPT, select=True)
    gr = (COLS // (32 * EPT), ROWS // 8)
    bench(f"2d select EPT{EPT} (32,8)", (lambda k=k, gr=gr: k[gr, (32, 8)](dZ, db, dm, s, dY)), out=dY.copy_to_host)

Z2, b2, Y2 = dZ.view(np.float64), db.view(np.float64), dY.view(np.float64)
m2 = dm.view(np.uint16)
print("views", Z2.shape, b2.shape, m2.shape, flush=True)
for EPT in (2, 4, 8):
    for block in ((32, 8), (128, 2), (256, 1)):
        k = make_pairs(EPT)
        gr = (max(1, math.ceil(COLS // 2 / (block[0] * EPT))), math.ceil(ROWS / block[1]))
        bench(f"pairs EPT{EPT} {block}", (lambda k=k, gr=gr, block=block: k[gr, block](Z2, b2, m2, s, Y2)), out=dY.copy_to_host)

Zf, mf, Yf = dZ.reshape(ROWS * COLS), dm.reshape(ROWS * COLS), dY.reshape(ROWS * COLS)
for EPT in (4, 8):
    for blocks_per_sm in (4, 8, 32):
        k = make_flat(EPT)
        # grid must cover everything: EPT*stride >= N
        nblk = math.ceil(ROWS * COLS / (256 * EPT))
        bench(f"flat EPT{EPT} full grid", (lambda k=k, nblk=nblk: k[nblk, 256](Zf, db, mf, s, Yf, COLS)), out=dY.copy_to_host)
        break

for EPT in (4, 8):
    for RP in (4, 16):
        k = make_rowloop(EPT, RP)
        gr = (max(1, math.ceil(COLS / (256 * EPT))), math.ceil(ROWS / RP))
        bench(f"rowloop EPT{EPT} rows/block {RP} (256,)", (lambda k=k, gr=gr: k[gr, 256](dZ, db, dm, s, dY)), out=dY.copy_to_host)

# resources of a few
for name, k, sig in (("current", ew.bias_relu_dropout, None),):
    try:
        print(name, "regs", {str(kk): v for kk, v in k.get_regs_per_thread().items()} if hasattr(k, "get_regs_per_thread") else "?")
    except Exception as e:
        print("regs?", e)
json.dump({"device": str(cuda.get_current_device().name), "results": results}, open(sys.argv[1], "w"), indent=1)
