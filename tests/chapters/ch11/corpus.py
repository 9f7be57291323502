"""Lab 11 (beyond two GPUs): wrong answers students write, and valid alternatives."""

from mutations import valid, wrong

RS_SEND = "ring.send(r, (r + 1) % n, (r - s) % n, reduce=True)"
AG_SEND = "ring.send(r, (r + 1) % n, (r + 1 - s) % n, reduce=False)"
TP_OUT = 'return all_reduce(hidden @ shard["w2"].T) + b2'
TP_HIDDEN = 'hidden = F.gelu(x @ shard["w1"].T + shard["b1"])'

MUTATIONS = [
    # Exercise 1: ring_allreduce ------------------------------------------------------------------
    wrong(
        "ring-chunk-formula",
        "ring_allreduce",
        "sends chunk (r + s) % N in the reduce-scatter, so the partial sums are not passed on",
        r"reduce-scatter steps no chunk of rank \d adds up every rank's values.*\(r - s\) % N",
        (RS_SEND, "ring.send(r, (r + 1) % n, (r + s) % n, reduce=True)"),
    ),
    wrong(
        "ring-reduce-scatter-only",
        "ring_allreduce",
        "stops after the reduce-scatter",
        r"3 steps, expected 2\(N - 1\) = 6.*reduce-scatter alone",
        code=(
            "def ring_allreduce(ring):\n"
            "    n = ring.world\n"
            "    for s in range(n - 1):\n"
            "        for r in range(n):\n"
            f"            {RS_SEND}\n"
            "        ring.step()\n"
        ),
    ),
    wrong(
        "ring-gather-adds",
        "ring_allreduce",
        "adds in the all-gather too (reduce=True), counting values twice",
        r"times instead of once.*reduce=True.*overwrites its copy",
        (AG_SEND, "ring.send(r, (r + 1) % n, (r + 1 - s) % n, reduce=True)"),
    ),
    wrong(
        "ring-n-steps",
        "ring_allreduce",
        "makes N steps in each phase instead of N - 1",
        r"8 steps, expected 2\(N - 1\) = 6.*not N",
        ("for s in range(n - 1):  # reduce-scatter", "for s in range(n):  # reduce-scatter"),
        ("for s in range(n - 1):  # all-gather", "for s in range(n):  # all-gather"),
    ),
    wrong(
        "ring-gather-off-by-one",
        "ring_allreduce",
        "starts the all-gather at chunk r instead of the completed chunk r + 1",
        r"with reduce=False, but it held only ranks.*\(r \+ 1 - s\) % N",
        (AG_SEND, "ring.send(r, (r + 1) % n, (r - s) % n, reduce=False)"),
    ),
    wrong(
        "ring-star",
        "ring_allreduce",
        "gathers every chunk at rank 0, adds there, and sends the sums back from rank 0",
        r"rank 2 sent chunk \d to rank 0, which is not its neighbour.*star",
        code=(
            "def ring_allreduce(ring):\n"
            "    n = ring.world\n"
            "    for s in range(n):\n"
            "        for r in range(1, n):\n"
            "            ring.send(r, 0, (r + s) % n, reduce=True)\n"
            "        ring.step()\n"
            "    for r in range(1, n):\n"
            "        for i in range(n):\n"
            "            ring.send(0, r, i, reduce=False)\n"
            "            ring.step()\n"
        ),
    ),
    wrong(
        "ring-no-step",
        "ring_allreduce",
        "never calls ring.step(), so a rank queues a second chunk in the same step",
        r"raised ValueError: rank 0 already sends chunk \d in this step.*ring\.step\(\)",
        ("\n        ring.step()", ""),
        ("\n        ring.step()", ""),
    ),
    wrong(
        "ring-left-unmirrored",
        "ring_allreduce",
        "sends to the left neighbour with the chunk indices of the right-hand ring",
        r"left neighbour, \(r - 1\) % N.*\(r \+ s\) % N in the reduce-scatter",
        (RS_SEND, "ring.send(r, (r - 1) % n, (r - s) % n, reduce=True)"),
        (AG_SEND, "ring.send(r, (r - 1) % n, (r + 1 - s) % n, reduce=False)"),
    ),
    valid(
        "ring-left",
        "ring_allreduce",
        "the same ring turned the other way: sends to (r - 1) % N, chunk indices mirrored",
        code=(
            "def ring_allreduce(ring):\n"
            "    n = ring.world\n"
            "    for s in range(n - 1):\n"
            "        for r in range(n):\n"
            "            ring.send(r, (r - 1) % n, (r + s) % n, reduce=True)\n"
            "        ring.step()\n"
            "    for s in range(n - 1):\n"
            "        for r in range(n):\n"
            "            ring.send(r, (r - 1) % n, (r - 1 + s) % n, reduce=False)\n"
            "        ring.step()\n"
        ),
    ),
    valid(
        "ring-one-loop",
        "ring_allreduce",
        "one loop over the 2(N - 1) steps, the phase read from the step number",
        code=(
            "def ring_allreduce(ring):\n"
            "    n = ring.world\n"
            "    for t in range(2 * (n - 1)):\n"
            "        adding = t < n - 1\n"
            "        for r in range(n):\n"
            "            chunk = (r - t) % n if adding else (r + 1 - (t - (n - 1))) % n\n"
            "            ring.send(r, (r + 1) % n, chunk, reduce=adding)\n"
            "        ring.step()\n"
        ),
    ),
    valid(
        "ring-numpy-indices",
        "ring_allreduce",
        "ranks and chunks as NumPy integers, reduce left to its default in the first phase",
        code=(
            "def ring_allreduce(ring):\n"
            "    n = ring.world\n"
            "    ranks = np.arange(n)\n"
            "    for s in range(n - 1):\n"
            "        for r, c in zip(ranks, (ranks - s) % n):\n"
            "            ring.send(r, (r + 1) % n, c)\n"
            "        ring.step()\n"
            "    for s in range(n - 1):\n"
            "        for r, c in zip(ranks, (ranks + 1 - s) % n):\n"
            "            ring.send(r, (r + 1) % n, c, reduce=False)\n"
            "        ring.step()\n"
        ),
    ),
    # Exercise 2: shard_mlp and tp_forward --------------------------------------------------------
    wrong(
        "tp-w1-columns",
        "shard_mlp",
        "splits fc1 by its input features (columns), the row-parallel way",
        r"w1 should hold h/N rows of fc1\.weight \(h/N, d_in\) = \(8, 6\); yours is \(16, 3\): that is a "
        r"row-parallel split, whose outputs are partial sums GELU cannot be applied to",
        (
            '"w1": fc1.weight[rows]',
            '"w1": fc1.weight[:, rank * fc1.in_features // world : (rank + 1) * fc1.in_features // world]',
        ),
    ),
    wrong(
        "tp-size-from-in-features",
        "shard_mlp",
        "takes the shard size from fc1's input width: fc1.in_features // world instead of h // world",
        r"^(?!.*torch\.split).*rank 0's w1 has shape \(3, 6\).*that is d_in // N = 6 // 2: "
        r"fc1\.in_features.*split over the hidden features",
        ("size = fc1.out_features // world", "size = fc1.in_features // world"),
    ),
    wrong(
        "tp-size-from-output",
        "shard_mlp",
        "takes the shard size from fc2's output width: fc2.out_features // world",
        r"^(?!.*torch\.split).*rank 0's w1 has shape \(5, 6\).*d_out // N = 10 // 2: fc2\.out_features",
        ("size = fc1.out_features // world", "size = fc2.out_features // world"),
    ),
    wrong(
        "tp-w1-sliced-columns",
        "shard_mlp",
        "slices fc1.weight's columns with the hidden slice: rank 0 gets the whole weight, rank 1 none of it",
        r"whole of fc1\.weight.*slices the other axis: rank 1's w1 is \(16, 0\).*w1 takes rows of "
        r"fc1\.weight: fc1\.weight\[a:b\]",
        ('"w1": fc1.weight[rows]', '"w1": fc1.weight[:, rows]'),
    ),
    wrong(
        "tp-offset-rank-h",
        "shard_mlp",
        "starts rank r's rows at r * h instead of r * h / N",
        r"rank 1 got 0 rows of fc1\.weight.*not rank \* h",
        (
            "rows = slice(rank * size, (rank + 1) * size)",
            "rows = slice(rank * fc1.out_features, rank * fc1.out_features + size)",
        ),
    ),
    wrong(
        "tp-w2-rows",
        "shard_mlp",
        "splits fc2 by rows (its outputs) instead of columns",
        r"w2 should hold h/N columns of fc2\.weight.*split by its input features",
        ('"w2": fc2.weight[:, rows]', '"w2": fc2.weight[rows]'),
    ),
    wrong(
        "tp-b1-whole",
        "shard_mlp",
        "keeps fc1's whole bias on every rank",
        r"b1 is fc1's whole bias",
        ('"b1": fc1.bias[rows]', '"b1": fc1.bias'),
    ),
    wrong(
        "tp-bias-before-allreduce",
        "tp_forward",
        "adds fc2's bias on every rank before the all-reduce",
        r"the output is off by \(N-1\)·b2: add fc2's bias once, after the all-reduce",
        (TP_OUT, 'return all_reduce(hidden @ shard["w2"].T + b2)'),
    ),
    wrong(
        "tp-gelu-after-allreduce",
        "tp_forward",
        "applies GELU after the all-reduce",
        r"GELU was applied after the all-reduce",
        (TP_HIDDEN, 'hidden = x @ shard["w1"].T + shard["b1"]'),
        (TP_OUT, 'return F.gelu(all_reduce(hidden @ shard["w2"].T)) + b2'),
    ),
    wrong(
        "tp-two-allreduces",
        "tp_forward",
        "all-reduces fc1's output as well",
        r"called all_reduce 2 times, on \[\(3, 8\), \(3, 10\)\].*one all-reduce",
        (TP_HIDDEN, 'hidden = F.gelu(all_reduce(x @ shard["w1"].T + shard["b1"]))'),
    ),
    wrong(
        "tp-no-allreduce",
        "tp_forward",
        "returns each rank's partial output, never all-reduced",
        r"rank 0 never called all_reduce.*only a partial sum",
        (TP_OUT, 'return hidden @ shard["w2"].T + b2'),
    ),
    valid(
        "tp-chunk-linear",
        "shard_mlp",
        "shards by torch.chunk, the forward pass with F.linear",
        code=(
            "def shard_mlp(fc1, fc2, rank, world):\n"
            "    return {\n"
            '        "w1": torch.chunk(fc1.weight, world, dim=0)[rank],\n'
            '        "b1": torch.chunk(fc1.bias, world)[rank],\n'
            '        "w2": torch.chunk(fc2.weight, world, dim=1)[rank],\n'
            "    }\n\n\n"
            "def tp_forward(x, shard, b2, all_reduce):\n"
            '    h = F.linear(x, shard["w1"], shard["b1"])\n'
            '    return all_reduce(F.linear(F.gelu(h), shard["w2"])) + b2\n'
        ),
    ),
    valid(
        "tp-copies-module",
        "shard_mlp",
        "detached copies sized by tensor_parallel.shard_size, nn.GELU and addmm in the forward pass",
        code=(
            "act = torch.nn.GELU()\n\n\n"
            "def shard_mlp(fc1, fc2, rank, world):\n"
            "    size = tensor_parallel.shard_size(fc1.out_features, world)\n"
            "    start = rank * size\n"
            "    return {\n"
            '        "w1": fc1.weight.detach()[start : start + size].clone(),\n'
            '        "b1": fc1.bias.detach()[start : start + size].clone(),\n'
            '        "w2": fc2.weight.detach()[:, start : start + size].clone(),\n'
            "    }\n\n\n"
            "def tp_forward(x, shard, b2, all_reduce):\n"
            '    partial = act(torch.addmm(shard["b1"], x, shard["w1"].t())) @ shard["w2"].t()\n'
            "    out = all_reduce(partial)\n"
            "    return out + b2\n"
        ),
    ),
    # Exercise 3: model_state_bytes ---------------------------------------------------------------
    wrong(
        "zero-k-forgotten",
        "model_state_bytes",
        "counts one byte per parameter of optimizer state: the factor k forgotten",
        r"\['optimizer'\].*multiply by k",
        ('"optimizer": k * (shard', '"optimizer": (shard'),
    ),
    wrong(
        "zero-gradients-fp32",
        "model_state_bytes",
        "counts the gradients in fp32",
        r"\['gradients'\].*gradients are fp16",
        ('"gradients": 2 *', '"gradients": 4 *'),
    ),
    wrong(
        "zero-stage2-shards-parameters",
        "model_state_bytes",
        "shards the parameters from stage 2 on",
        r"stage 2 keeps a whole fp16 copy of the parameters on every GPU: only stage 3",
        ("shard if stage >= 3 else n_params", "shard if stage >= 2 else n_params"),
    ),
    wrong(
        "zero-stage1-shards-gradients",
        "model_state_bytes",
        "shards the gradients from stage 1 on",
        r"stage 1 \(P_os\) shards only the optimizer states",
        ('"gradients": 2 * (shard if stage >= 2', '"gradients": 2 * (shard if stage >= 1'),
    ),
    wrong(
        "zero-stage0-divides",
        "model_state_bytes",
        "divides everything by N at stage 0, as if data parallelism split the model",
        r"stage 0 is plain data parallelism \(DDP\)",
        code=(
            "def model_state_bytes(n_params, world, stage, k=12):\n"
            "    shard = -(-n_params // world)\n"
            "    if stage == 0:\n"
            '        return {"parameters": 2 * shard, "gradients": 2 * shard, "optimizer": k * shard}\n'
            "    return {\n"
            '        "parameters": 2 * (shard if stage >= 3 else n_params),\n'
            '        "gradients": 2 * (shard if stage >= 2 else n_params),\n'
            '        "optimizer": k * shard,\n'
            "    }\n"
        ),
    ),
    wrong(
        "zero-floor",
        "model_state_bytes",
        "rounds the shard down",
        r"round up.*⌈Ψ/N⌉ = 125001",
        ("shard = -(-n_params // world)", "shard = n_params // world"),
    ),
    wrong(
        "zero-floor-plus-one",
        "model_state_bytes",
        "rounds up with n_params // world + 1: one parameter too many when N divides Ψ",
        r"model_state_bytes\(7500000000, 64, 1\)\['optimizer'\].*N = 64 divides Ψ = 7500000000.*"
        r"n_params // world \+ 1 rounds up only where N does not divide Ψ",
        ("shard = -(-n_params // world)", "shard = n_params // world + 1"),
    ),
    valid(
        "zero-math-ceil",
        "model_state_bytes",
        "math.ceil of the division, one if per stage",
        code=(
            "import math\n\n\n"
            "def model_state_bytes(n_params, world, stage, k=12):\n"
            "    per_gpu = math.ceil(n_params / world)\n"
            "    params, grads, states = 2 * n_params, 2 * n_params, k * n_params\n"
            "    if stage >= 1:\n"
            "        states = k * per_gpu\n"
            "    if stage >= 2:\n"
            "        grads = 2 * per_gpu\n"
            "    if stage >= 3:\n"
            "        params = 2 * per_gpu\n"
            '    return {"parameters": params, "gradients": grads, "optimizer": states}\n'
        ),
    ),
    valid(
        "zero-table",
        "model_state_bytes",
        "a table of the stage from which each part is sharded",
        code=(
            "def model_state_bytes(n_params, world, stage, k=12):\n"
            "    per_gpu = (n_params + world - 1) // world\n"
            '    sharded_from = {"parameters": 3, "gradients": 2, "optimizer": 1}\n'
            '    size = {"parameters": 2, "gradients": 2, "optimizer": k}\n'
            "    return {\n"
            "        p: size[p] * (per_gpu if stage >= s else n_params) for p, s in sharded_from.items()\n"
            "    }\n"
        ),
    ),
]
