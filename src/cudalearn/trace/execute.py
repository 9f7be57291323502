"""Running a kernel's Python source on the CPU: instrumented, barriers and warp intrinsics as yields,
block by block (Chapters 2, 10).

The kernel sees `fake_cuda.FakeCuda` as its `cuda`; its arrays are `arrays.TracedArray`s.
"""

import ast
import builtins
import gc
import inspect
import linecache
import types

import numpy as np

from cudalearn.compile import source
from cudalearn.runtime import intrinsics, numba_backend
from cudalearn.trace import collective, standins, warp
from cudalearn.trace.fake_cuda import FakeCuda
from cudalearn.trace.model import (
    MAX_BLOCK_THREADS,
    MAX_FINDINGS,
    MAX_THREADS,
    WARP_SIZE,
    TraceEndless,
    TraceError,
    TraceOutOfBounds,
    dim3,
    int32_dim3,
)
from cudalearn.trace.recorder import Recorder
from cudalearn.trace.report import BarrierError, TraceReport

_BARRIERS = {"syncthreads": "sync", "syncthreads_count": "count"}
_BARRIERS.update(syncthreads_and="and", syncthreads_or="or")
REBUILT = "__cudalearn_rebuilt__"  # set in the globals of a function the grader rebuilt (grading.rebuild)


def _python_function(obj):
    """The Python function behind a CUDADispatcher, a FakeCUDAKernel or a plain function."""
    if isinstance(obj, types.FunctionType):
        return obj
    for attr in ("py_func", "fn"):
        fn = getattr(obj, attr, None)
        if isinstance(fn, types.FunctionType):
            return fn
    raise TraceError(
        f"found no Python function to trace in this {type(obj).__name__} (expected a @cuda.jit kernel or a"
        f" Python function)"
    )


def _is_cuda_function(obj):
    """A @cuda.jit object (kernel or device function) of the simulator or the GPU target."""
    return type(obj).__module__.startswith("numba") and isinstance(
        getattr(obj, "py_func", None), types.FunctionType
    )


def _names(code):
    """Global names used by a code object and the code objects nested in it."""
    out = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            out |= _names(c)
    return out


class _SyncToYield(ast.NodeTransformer):
    """Rewrite barriers into `(yield (op, v))`, warp intrinsics into `(yield ("warp", (name, site, args)))`
    and calls of device functions that (transitively) use them into `(yield from f(...))` (Chapter 10)."""

    def __init__(self, env, cuda_module, file, yields=lambda obj: False):
        self.env, self.cuda, self.file, self.yields = env, cuda_module, file, yields
        self.found = self.warp = 0  # barriers, warp events (and yielding calls) rewritten
        self.injected = {}  # name -> a yielding device function reached through an attribute

    def _resolve(self, node):
        if isinstance(node, ast.Name):
            return self.env.get(node.id)
        if isinstance(node, ast.Attribute):
            return getattr(self._resolve(node.value), node.attr, None)
        return None

    def _cuda_name(self, f):
        """The name of the numba.cuda function f names (`cuda.syncthreads`, `shfl_down_sync`), or None."""
        if self.cuda is None:
            return None
        if isinstance(f, ast.Attribute) and self._resolve(f.value) is self.cuda:
            return f.attr
        if isinstance(f, ast.Name) and f.id in self.env:
            obj = self.env[f.id]
            return next((n for n in (*_BARRIERS, *warp.OPS) if obj is getattr(self.cuda, n, _NONE)), None)
        return None

    def visit_Call(self, node):
        self.generic_visit(node)
        name = self._cuda_name(node.func)
        if name in _BARRIERS:
            self.found += 1
            arg = node.args[0] if node.args else ast.Constant(None)
            return ast.copy_location(
                ast.Yield(ast.Tuple([ast.Constant(_BARRIERS[name]), arg], ast.Load())), node
            )
        if name in warp.OPS:
            arity = warp.OPS[name]
            if node.keywords or len(node.args) not in (arity if isinstance(arity, tuple) else (arity,)):
                raise TraceError(
                    f"line {node.lineno}: call cuda.{name} with {arity} positional argument(s), as numba does"
                )
            self.warp += 1
            site = ast.Constant((self.file, node.lineno, node.col_offset))
            event = ast.Tuple([ast.Constant(name), site, ast.Tuple(node.args, ast.Load())], ast.Load())
            return ast.copy_location(ast.Yield(ast.Tuple([ast.Constant("warp"), event], ast.Load())), node)
        target = None if name else self._resolve(node.func)
        instruction = collective.name_of(target)
        if instruction is not None:  # a chapter's warp instruction (mma.sync, ldmatrix: Chapter 6)
            self.warp += 1
            site = ast.Constant((self.file, node.lineno, node.col_offset))
            args = ast.Tuple(node.args, ast.Load())
            event = ast.Tuple([ast.Constant(instruction), site, args], ast.Load())
            return ast.copy_location(ast.Yield(ast.Tuple([ast.Constant("warp"), event], ast.Load())), node)
        if target is None or not self.yields(target):
            return node
        self.warp += 1
        if not isinstance(node.func, ast.Name):  # mod.warp_sum(v): call the instrumented one by a name
            alias = f"_cudalearn_device_{len(self.injected)}"
            self.injected[alias] = target
            node.func = ast.copy_location(ast.Name(alias, ast.Load()), node.func)
        return ast.copy_location(ast.YieldFrom(node), node)


_NONE = object()


class _ReturnToExit(ast.NodeTransformer):
    """Rewrite the kernel's own `return` statements into `yield ("exit", None); return` (synccheck)."""

    def visit_FunctionDef(self, node):
        return node  # a nested def keeps its returns

    visit_AsyncFunctionDef = visit_Lambda = visit_FunctionDef

    def visit_Return(self, node):
        exit_ = ast.Expr(ast.Yield(ast.Tuple([ast.Constant("exit"), ast.Constant(None)], ast.Load())))
        return [ast.copy_location(exit_, node), ast.copy_location(ast.Return(None), node)]


def _cell_value(cell):
    """A closure cell's value (None while unassigned)."""
    try:
        return cell.cell_contents
    except ValueError:  # a closure variable not assigned yet
        return None


def use_tree(fn, fdef):
    """Trace `fn` from `fdef`, the def it was compiled from, never from its source (the grader's rebuild).

    `fdef` keeps the line numbers of the text it was parsed from. A function whose globals carry REBUILT
    is traced only this way: reading its source back (inspect) could yield text nobody checked.
    """
    source.use_tree(fn, fdef)


def _function_tree(fn):
    """(module, def) of fn's source with its real line numbers: the verified def when it has one."""
    fdef = source.verified_tree(fn)
    if fdef is not None:
        return ast.Module(body=[fdef], type_ignores=[]), fdef
    if fn.__globals__.get(REBUILT):
        raise TraceError(f"{fn.__name__} was rebuilt by the grader without its verified syntax tree")
    try:
        lines, start = inspect.getsourcelines(fn)
    except (OSError, TypeError) as e:
        raise TraceError(
            f"cannot read the source of {fn.__name__} ({e}); define it in a file or cell"
        ) from None
    text = "".join(lines)
    indented = text[:1] in (" ", "\t")  # a def inside a function or class: parsed where it stands
    tree = ast.parse("if 1:\n" + text if indented else text)
    fdef = tree.body[0].body[0] if indented else tree.body[0]
    if not isinstance(fdef, ast.FunctionDef):
        raise TraceError(f"{fn.__name__} is not defined by a plain def statement")
    fdef.decorator_list = []
    tree = ast.Module(body=[fdef], type_ignores=[])
    ast.increment_lineno(tree, start - (2 if indented else 1))  # the real lines and columns, for messages
    return tree, fdef


def _cells(fn):
    """fn's closure variables: name -> value."""
    return dict(zip(fn.__code__.co_freevars, map(_cell_value, fn.__closure__ or ()), strict=True))


def _yields(obj, cuda_module, memo):
    """Whether obj is a device function that (transitively) calls a barrier or a warp intrinsic: then it
    runs as a generator, and its callers `yield from` it (Chapter 10)."""
    if not _is_cuda_function(obj):
        return False
    fn = _python_function(obj)
    if id(fn) not in memo:
        memo[id(fn)] = False  # a recursive call does not make it yield
        env = {**fn.__globals__, **_cells(fn)}
        scan = _SyncToYield(
            env, cuda_module, fn.__code__.co_filename, lambda o: _yields(o, cuda_module, memo)
        )
        scan.visit(_function_tree(fn)[1])
        memo[id(fn)] = bool(scan.warp or scan.found)
    return memo[id(fn)]


def _instrument(fn, fake, memo, kernel):
    """fn recompiled from its syntax tree with `cuda` -> fake and device functions instrumented."""
    if id(fn) in memo:
        return memo[id(fn)]
    tree, fdef = _function_tree(fn)
    cuda_module = numba_backend.cuda_of(fn)  # numba.cuda, or numba_cuda_mlir.cuda for the course's kernels
    cells = _cells(fn)
    yields = memo.setdefault("yields", {})
    syncs = _SyncToYield(
        {**fn.__globals__, **cells},
        cuda_module,
        fn.__code__.co_filename,
        lambda o: _yields(o, cuda_module, yields),
    )
    syncs.visit(fdef)
    if kernel:
        fdef.body = [_ReturnToExit().visit(stmt) for stmt in fdef.body]
        fdef.body = [x for stmt in fdef.body for x in (stmt if isinstance(stmt, list) else [stmt])]

    def swap(v):
        if v is cuda_module and v is not None:
            return fake
        if standins.standin(v) is not None:  # a GPU intrinsic of one thread: its Python stand-in
            return standins.standin(v)
        return _instrument(_python_function(v), fake, memo, False) if _is_cuda_function(v) else v

    env = dict(fn.__globals__)
    for name, gpu in intrinsics.KERNEL_BUILTINS.items():  # max/min of floats: a GPU's, as the simulator's
        if env.get(name, getattr(builtins, name)) is getattr(builtins, name):
            env[name] = gpu
    if cells:  # rebuild the closure: def factory(free vars): def fn ...; return fn
        factory = ast.parse(f"def _cudalearn_factory({', '.join(cells)}):\n    pass").body[0]
        factory.body = [fdef, ast.Return(ast.Name(fdef.name, ast.Load()))]
        tree.body = [factory]
    ast.fix_missing_locations(tree)
    exec(compile(tree, fn.__code__.co_filename, "exec"), env)
    new = env.pop("_cudalearn_factory")(*map(swap, cells.values())) if cells else env[fdef.name]
    memo[id(fn)] = new
    for name in _names(fn.__code__) & env.keys():
        env[name] = swap(env[name])
    for name, target in syncs.injected.items():
        env[name] = swap(target)
    if kernel and not inspect.isgeneratorfunction(new):
        plain = new

        def new(*args):
            plain(*args)
            return
            yield

    return new


def _to_host(arg):
    """A writable numpy copy of an array argument, or None for a scalar."""
    if isinstance(arg, np.ndarray):
        return np.array(arg, copy=True, order="K") if arg.ndim else None
    if hasattr(arg, "copy_to_host"):
        return arg.copy_to_host()
    if all(hasattr(arg, a) for a in ("detach", "cpu", "numpy")):
        return arg.detach().cpu().numpy().copy()
    return None


def trace(kernel, griddim, blockdim, *args) -> TraceReport:
    """Run kernel[griddim, blockdim](*args) on the CPU and report its memory accesses (Chapters 2-5).

    kernel: a @cuda.jit kernel (simulator or GPU target) or a plain Python function.
    griddim, blockdim: an int or a tuple of 1-3 ints. args: numpy arrays (copied: the
    kernel's writes land in report.outputs), device arrays (copied to the host) or scalars.
    """
    fn = _python_function(kernel)
    griddim, blockdim = dim3(griddim, "griddim"), dim3(blockdim, "blockdim")
    per_block = int(np.prod(blockdim))
    nthreads = int(np.prod(griddim)) * per_block
    if per_block > MAX_BLOCK_THREADS:
        raise TraceError(f"blockdim {blockdim} has {per_block} threads; CUDA allows at most 1024 a block")
    if nthreads > MAX_THREADS:
        raise TraceError(
            f"launch {griddim} x {blockdim} has {nthreads} threads; the tracer runs each in Python"
            f" and accepts at most {MAX_THREADS}: trace the same kernel on a smaller problem (e.g. N=64)"
        )
    rec = Recorder(griddim, blockdim, fn.__code__.co_filename)
    fake = FakeCuda(rec, numba_backend.cuda_of(fn), fn.__name__)
    run = _instrument(fn, fake, {}, kernel=True)
    names = list(inspect.signature(fn).parameters)
    names += [f"arg{i}" for i in range(len(names), len(args))]
    traced, outputs = [], []
    for name, arg in zip(names, args, strict=False):
        host = _to_host(arg)
        outputs.append(arg if host is None else host)
        traced.append(arg if host is None else rec.allocate(name, False, 0, host))
    gc_enabled = gc.isenabled()
    gc.disable()  # a trace makes millions of small long-lived tuples; collecting them costs ~1/3
    try:
        with np.errstate(all="ignore"):  # a GPU does not warn on overflow or 0/0
            for bz in range(griddim[2]):
                for by in range(griddim[1]):
                    for bx in range(griddim[0]):
                        _run_block(rec, fake, run, traced, (bx, by, bz))
    except TraceEndless as e:
        raise _endless(e, fn, rec) from None
    finally:
        if gc_enabled:
            gc.enable()
    rep = rec.report
    rep.kernel, rep.outputs = fn.__name__, outputs
    rep.by_line = dict(sorted(rep.by_line.items(), key=lambda kv: (isinstance(kv[0], tuple), kv[0])))
    return rep


def _endless(e, fn, rec):
    """The TraceEndless a student can act on: the thread, its most executed line and the loop around it."""
    loop = 0
    if e.line:
        fdef = _function_tree(fn)[1]
        loops = [
            n
            for n in ast.walk(fdef)
            if isinstance(n, (ast.For, ast.While)) and n.lineno <= e.line <= (n.end_lineno or n.lineno)
        ]
        whiles = [n.lineno for n in loops if isinstance(n, ast.While)]  # a `for ... in range` ends
        loop = max(whiles) if whiles else min((n.lineno for n in loops), default=0)
    name, src = fn.__name__, linecache.getline(rec.kernel_file, e.line).strip()
    where = f"line {e.line} (`{src}`)" if e.line else "an array access in a device function"
    where += f" {e.steps:,} times"
    if loop:
        where += f", in the loop at line {loop} (`{linecache.getline(rec.kernel_file, loop).strip()}`)"
    msg = (
        f"`{name}` did not finish: block {e.block} made more than {rec.budget:,} array accesses, and its"
        f" thread {e.thread} ran {where}. An endless loop? Check that the loop"
        " variable advances in every iteration (e.g. `t += 1` at the end of a `while` loop) and that the"
        " loop's bound is the one you mean."
    )
    return TraceEndless(msg, name, e.thread, e.block, e.line, e.steps, loop)


def _run_block(rec, fake, run, args, block):
    """Run one block's threads phase by phase: each thread, in warp order, to its next barrier.

    Within a phase a thread stops at each warp event too; when every lane it waits for is there, the
    warp's group completes (`warp.resolve`) and its lanes run on (Chapter 10).
    """
    bx, by, bz = rec.blockdim
    threads = [(x, y, z) for z in range(bz) for y in range(by) for x in range(bx)]
    dims = [int32_dim3(t) for t in threads]
    n = len(threads)
    fake.blockIdx = int32_dim3(block)
    rec.begin_block(block)
    counts = [{} for _ in threads]
    gens = [run(*args) for _ in threads]
    sends = [None] * n
    gone, at_barrier = {}, {}  # thread id -> line it returned on (0: ran to the end) / barrier it waits at
    name, file = fake._kernel, rec.kernel_file
    warps = [
        warp.Warp(f, min(WARP_SIZE, n - f), name, file, block, threads, gone, at_barrier, (bx, by))
        for f in range(0, n, WARP_SIZE)
    ]
    live = list(range(n))
    while live:
        waiting, exited, returned = [], [], {}
        mines = [None] * n  # the shared addresses each thread writes in this phase
        held = {}  # warp index -> {lane: (name, site, args)} of its lanes at a warp event
        ready = live
        while ready:
            for tid in ready:
                w = tid // WARP_SIZE
                rec.lane, rec.warp = tid % WARP_SIZE, w
                rec.thread = threads[tid] if not warps[w].epoch else warps[w].actor(tid)
                rec.counts, fake.threadIdx = counts[tid], dims[tid]
                mine = mines[tid]
                if mine is None:
                    mine = mines[tid] = set()
                rec.mine = mine
                gen = gens[tid]
                try:
                    op, value = gen.send(sends[tid])
                    if op == "exit":  # a `return` in the kernel (rewritten by _ReturnToExit)
                        returned[tid] = gen.gi_frame.f_lineno
                        gen.send(None)  # runs the return: StopIteration
                except StopIteration:
                    op = None
                except (TraceOutOfBounds, TraceError):
                    raise
                except Exception as e:
                    if isinstance(e, IndexError):  # a local array (plain NumPy here) indexed outside?
                        found = rec.local_out_of_bounds(e)
                        if found is not e:
                            raise found from None
                    e.add_note(f"(raised by thread {threads[tid]} of block {block} under cudalearn.trace)")
                    raise
                if op == "warp":
                    held.setdefault(w, {})[tid % WARP_SIZE] = value
                elif op is None:
                    exited.append(tid)
                    gone[tid] = returned.get(tid, 0)
                else:
                    line = _barrier_line(gen, file)
                    waiting.append((tid, op, value, line))
                    at_barrier[tid] = line
            ready = _warp_round(rec, warps, held, sends, mines) if held else ()
        rec.phase_mines.extend(m for m in mines if m)
        rec.end_phase()
        waiting.sort()  # in thread order (warp events may have reordered the arrivals)
        exited.sort()
        _barrier_results(rec, waiting, exited, returned, sends, threads, block)
        live = [w[0] for w in waiting]
        at_barrier.clear()
        for w in warps:
            w.epoch = 0
    rec.end_block()


def _barrier_line(gen, file):
    """The line of the barrier a thread waits at: in a device function of the kernel's file, its own line;
    in another file's, the line of the kernel's call."""
    line, sub = gen.gi_frame.f_lineno, gen.gi_yieldfrom
    while sub is not None and getattr(sub, "gi_frame", None) is not None:
        if sub.gi_frame.f_code.co_filename == file:
            line = sub.gi_frame.f_lineno
        sub = sub.gi_yieldfrom
    return line


def _warp_round(rec, warps, held, sends, mines):
    """Complete what each warp's waiting lanes can (warp.resolve); the thread ids to run on, in order."""
    ready = []
    rec.mines = mines  # an ldmatrix's reads, checked for each lane (collective._read_rows)
    for w in sorted(held):
        lanes, wp = held[w], warps[w]
        epoch = wp.epoch
        ready += warp.resolve(wp, lanes, sends, rec.report)
        if wp.epoch != epoch:  # a full-warp syncwarp: each lane's later reads see the others' writes
            written = set().union(*(m for m in mines[wp.first : wp.first + wp.nlanes] if m))
            for tid in range(wp.first, wp.first + wp.nlanes):
                if mines[tid] is None:
                    mines[tid] = set()
                mines[tid] |= written
        if not lanes:
            del held[w]
    return sorted(ready)


def _barrier_results(rec, waiting, exited, returned, sends, threads, block):
    """Values of syncthreads_count/and/or for the threads at a barrier; barrier errors for divergence."""
    if not waiting:
        return
    at = {}  # barrier line -> the threads waiting there
    for w in waiting:
        at.setdefault(w[3], []).append(w[0])
    line = max(at, key=lambda n: (len(at[n]), -n))  # the barrier most threads wait at
    left = {}  # (kind, line where they left) -> thread ids
    for tid in exited:
        key = ("returned", returned[tid]) if tid in returned else ("skipped", 0)
        left.setdefault(key, []).append(tid)
    for other in sorted(at):
        if other != line:
            left[("divergent", other)] = at[other]
    for (kind, where), tids in left.items():
        waiting_n = len(waiting) if kind != "divergent" else len(at[line])
        err = BarrierError(
            kind,
            block,
            tuple(threads[t] for t in tids[:WARP_SIZE]),
            len(tids),
            waiting_n,
            line,
            linecache.getline(rec.kernel_file, line).strip(),
            where,
            linecache.getline(rec.kernel_file, where).strip() if where else "",
        )
        rep = rec.report
        rep.barrier_error_count += 1
        if len(rep.barrier_errors) < MAX_FINDINGS:
            rep.barrier_errors.append(err)
        rec.warn(("barrier", kind, line, where), str(err))
    truthy = sum(1 for w in waiting if w[2])
    result = {"sync": None, "count": truthy, "and": int(truthy == len(waiting)), "or": int(truthy > 0)}
    for tid, op, _, _ in waiting:
        sends[tid] = result[op]
