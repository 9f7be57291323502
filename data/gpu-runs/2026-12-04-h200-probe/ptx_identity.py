"""The PTX of the probed sm_j and ln_chan against the package's softmax_registers and layernorm (run from the repo root)."""
import re, sys
import numba.cuda as cuda
sys.argv=['x']
src=open('data/gpu-runs/2026-12-04-h200-probe/rows_probe.py').read()
head=src.split('def host_us')[0].replace('info = cudalearn.setup()','').replace('import torch  # noqa: E402','').replace('import torch.nn.functional as F  # noqa: E402','')
ns={}; exec(head, ns)
from cudalearn.kernels import softmax
def norm(ptx):
    ptx=re.sub(r'_ZN\w+','NAME',ptx)
    ptx='\n'.join(l for l in ptx.splitlines() if not l.startswith('//') and '.file' not in l and '.loc' not in l)
    return ptx
for probe, pkg in (('sm_j','softmax_registers'),('ln_chan','layernorm')):
    for cc in ((9,0),(7,5)):
        a,_=cuda.compile_ptx(ns[probe].py_func, softmax.SIGNATURES[pkg], cc=cc)
        b,_=cuda.compile_ptx(getattr(softmax,pkg).py_func, softmax.SIGNATURES[pkg], cc=cc)
        na, nb = norm(a), norm(b)
        import difflib
        d=[l for l in difflib.unified_diff(na.splitlines(), nb.splitlines(), lineterm='', n=0) if l[:1] in '+-' and not l.startswith(('+++','---'))]
        print(probe, pkg, cc, 'identical' if na==nb else f'DIFFER {len(d)} lines', d[:6])
