"""Lab 7 (AlexNet's two-GPU split): wrong answers students write, and valid alternatives."""

from mutations import valid, wrong

SOLUTION_SEND = (
    "h = [torch.cat([net.send(h[0], 0, c, name), net.send(h[1], 1, c, name)], dim=1) for c in (0, 1)]"
)

MUTATIONS = [
    # Exercise 1: exchange_bytes ------------------------------------------------------------------
    wrong(
        "bytes-no-default",
        "exchange_bytes",
        "drops the default of bytes_per_element from the signature",
        r"without bytes_per_element.*bytes_per_element=4",
        (
            "def exchange_bytes(cfg, batch, bytes_per_element=4):",
            "def exchange_bytes(cfg, batch, bytes_per_element=2):",
        ),
    ),
    wrong(
        "bytes-forward-only",
        "exchange_bytes",
        "counts the forward pass only",
        r"half: the gradients cross back",
        ("return 2 * batch", "return batch"),
    ),
    wrong(
        "bytes-no-logits",
        "exchange_bytes",
        "leaves out the logits gathered for the loss",
        r"left out the logits",
        ("values += cfg.classes // 2", "values += 0"),
    ),
    wrong(
        "bytes-no-batch",
        "exchange_bytes",
        "counts one image, not the batch",
        r"count for one image.*multiply by batch",
        ("return 2 * batch * values * bytes_per_element", "return 2 * values * bytes_per_element"),
    ),
    wrong(
        "bytes-all-logits",
        "exchange_bytes",
        "counts all the logits, not column 1's half",
        r"counted all the logits.*cfg\.classes // 2",
        ("values += cfg.classes // 2", "values += cfg.classes"),
    ),
    wrong(
        "bytes-2012-hard-coded",
        "exchange_bytes",
        "loops over the 2012 exchange layers instead of cfg.exchange",
        r"2012 exchange layers.*cfg\.exchange",
        ("for name in cfg.exchange", "for name in alexnet.EXCHANGE_2012"),
    ),
    wrong(
        "bytes-4-hard-coded",
        "exchange_bytes",
        "multiplies by 4 instead of bytes_per_element",
        r"4-byte elements: multiply by bytes_per_element",
        ("* bytes_per_element", "* 4"),
    ),
    wrong(
        "bytes-package-function",
        "exchange_bytes",
        "returns the sum of the package's alexnet.exchange_bytes, which the text forbids",
        r"called alexnet\.exchange_bytes",
        code=(
            "def exchange_bytes(cfg, batch, bytes_per_element=4):\n"
            "    per_layer = alexnet.exchange_bytes(cfg, batch, bytes_per_element)\n"
            "    return sum(f + b for f, b in per_layer.values())\n"
        ),
    ),
    wrong(
        "bytes-package-function-imported",
        "exchange_bytes",
        "imports the package's function under another name and sums it",
        r"called alexnet\.exchange_bytes",
        code=(
            "from cudalearn.nn.alexnet import exchange_bytes as _reference\n\n\n"
            "def exchange_bytes(cfg, batch, bytes_per_element=4):\n"
            "    return sum(sum(v) for v in _reference(cfg, batch, bytes_per_element).values())\n"
        ),
    ),
    valid(
        "bytes-numpy-int",
        "exchange_bytes",
        "returns np.prod's numpy.int64 without int() (the one int rule: a NumPy integer is an int)",
        ("values = sum(int(np.prod(cfg.input_shape(name)))", "values = sum(np.prod(cfg.input_shape(name))"),
    ),
    wrong(
        "bytes-float-halves",
        "exchange_bytes",
        "halves the classes with / (a float)",
        r"a float.*asks for an int",
        ("cfg.classes // 2", "cfg.classes / 2"),
    ),
    valid(
        "bytes-per-layer-loop",
        "exchange_bytes",
        "a loop over the layers with math.prod, forward and backward added separately",
        code=(
            "import math\n\n\n"
            "def exchange_bytes(cfg, batch, bytes_per_element=4):\n"
            "    forward = 0\n"
            "    for name in cfg.exchange:\n"
            "        forward += batch * math.prod(cfg.input_shape(name)) * bytes_per_element\n"
            "    forward += batch * (cfg.classes // 2) * bytes_per_element\n"
            "    backward = forward\n"
            "    return forward + backward\n"
        ),
    ),
    valid(
        "bytes-from-output-shapes",
        "exchange_bytes",
        "reads each exchange layer's input as the previous layer's output",
        code=(
            "def exchange_bytes(cfg, batch, bytes_per_element=4):\n"
            "    total = 0\n"
            "    for name in cfg.exchange:\n"
            "        previous = alexnet.LAYERS[alexnet.LAYERS.index(name) - 1]\n"
            "        total += int(np.prod(cfg.output_shape(previous)))\n"
            "    return 2 * bytes_per_element * batch * (total + cfg.classes // 2)\n"
        ),
    ),
    # Exercise 2: split_forward -------------------------------------------------------------------
    wrong(
        "split-calls-forward",
        "split_forward",
        "returns net(x), the package's own forward pass",
        r"called net\(x\).*net\.stage and net\.send",
        code="def split_forward(net, x):\n    return net(x)\n",
    ),
    wrong(
        "split-calls-class-forward",
        "split_forward",
        "calls the class's forward directly, bypassing net(x)",
        r"called net\(x\).*net\.stage and net\.send",
        code="def split_forward(net, x):\n    return type(net).forward(net, x)\n",
    ),
    wrong(
        "split-2012-hard-coded",
        "split_forward",
        "exchanges at alexnet.EXCHANGE_2012 whatever the network's configuration",
        r"exchanges at \('conv2', 'fc7'\).*net\.cfg\.exchange",
        ("if name in net.cfg.exchange:", "if name in alexnet.EXCHANGE_2012:"),
    ),
    wrong(
        "split-detached",
        "split_forward",
        "detaches the logits",
        r"without a gradient",
        (
            "return torch.cat([h[0], net.send(h[1], 1, 0, alexnet.OUTPUT)], dim=1)",
            "return torch.cat([h[0], net.send(h[1], 1, 0, alexnet.OUTPUT)], dim=1).detach()",
        ),
    ),
    wrong(
        "split-no-grad",
        "split_forward",
        "runs the forward pass under torch.no_grad()",
        r"without a gradient",
        code=(
            "def split_forward(net, x):\n"
            "    with torch.no_grad():\n"
            "        h = [x.to(dev) for dev in net.devices]\n"
            "        for name in alexnet.LAYERS:\n"
            "            if name in net.cfg.exchange:\n"
            f"                {SOLUTION_SEND}\n"
            "            h = [net.stage(name, c, h[c]) for c in (0, 1)]\n"
            "        return torch.cat([h[0], net.send(h[1], 1, 0, alexnet.OUTPUT)], dim=1)\n"
        ),
    ),
    wrong(
        "split-sends-every-half",
        "split_forward",
        "sends each column's tensor across and back at every layer, even where it does not exchange",
        r"bytes that crossed.*do not exchange",
        code=(
            "def split_forward(net, x):\n"
            "    h = [x.to(dev) for dev in net.devices]\n"
            "    for name in alexnet.LAYERS:\n"
            "        if name in net.cfg.exchange:\n"
            f"            {SOLUTION_SEND}\n"
            "        else:\n"
            "            h = [net.send(h[c], c, 1 - c, name) for c in (0, 1)]\n"
            "            h = [net.send(h[c], c, 1 - c, name) for c in (0, 1)]\n"
            "        h = [net.stage(name, c, h[c]) for c in (0, 1)]\n"
            "    return torch.cat([h[0], net.send(h[1], 1, 0, alexnet.OUTPUT)], dim=1)\n"
        ),
    ),
    wrong(
        "split-output-not-sent",
        "split_forward",
        "gathers column 1's logits with .to() instead of net.send",
        r"nothing was sent at \['output'\]",
        ("net.send(h[1], 1, 0, alexnet.OUTPUT)", "h[1].to(net.devices[0])"),
    ),
    wrong(
        "split-halves-swapped",
        "split_forward",
        "concatenates column 1's tensor before column 0's at the exchange layers",
        r"is wrong at.*column 0's tensor, column 1's tensor\], dim=1\) \(in that order\)",
        (
            "[net.send(h[0], 0, c, name), net.send(h[1], 1, c, name)]",
            "[net.send(h[1], 1, c, name), net.send(h[0], 0, c, name)]",
        ),
    ),
    wrong(
        "split-logits-swapped",
        "split_forward",
        "puts column 1's logits first",
        r"halves swapped",
        (
            "torch.cat([h[0], net.send(h[1], 1, 0, alexnet.OUTPUT)], dim=1)",
            "torch.cat([net.send(h[1], 1, 0, alexnet.OUTPUT), h[0]], dim=1)",
        ),
    ),
    wrong(
        "split-cat-batch-dim",
        "split_forward",
        "concatenates along the batch dimension",
        r"RuntimeError.*dim=1",
        ("], dim=1) for c in (0, 1)]", "], dim=0) for c in (0, 1)]"),
    ),
    wrong(
        "split-returns-none",
        "split_forward",
        "builds the logits but forgets to return them",
        r"returned None.*not done yet",
        (
            "return torch.cat([h[0], net.send(h[1], 1, 0, alexnet.OUTPUT)], dim=1)",
            "logits = torch.cat([h[0], net.send(h[1], 1, 0, alexnet.OUTPUT)], dim=1)",
        ),
    ),
    wrong(
        "split-half-logits",
        "split_forward",
        "returns column 0's logits only",
        r"has shape \(4, 5\), expected \(4, 10\).*column 0's half of the logits only",
        (
            "return torch.cat([h[0], net.send(h[1], 1, 0, alexnet.OUTPUT)], dim=1)",
            "return h[0]",
        ),
    ),
    wrong(
        "split-softmax",
        "split_forward",
        "returns probabilities: a softmax over the logits",
        r"probabilities \(softmax\)",
        (
            "return torch.cat([h[0], net.send(h[1], 1, 0, alexnet.OUTPUT)], dim=1)",
            "return torch.softmax(torch.cat([h[0], net.send(h[1], 1, 0, alexnet.OUTPUT)], dim=1), dim=1)",
        ),
    ),
    wrong(
        "split-train-mode",
        "split_forward",
        "switches the network to training mode: dropout on",
        r"training mode \(net\.train\(\)\)",
        ("h = [x.to(dev) for dev in net.devices]", "net.train()\n    h = [x.to(dev) for dev in net.devices]"),
    ),
    wrong(
        "split-detach-exchange",
        "split_forward",
        "detaches the tensors it sends at the exchange layers",
        r"gradient of \S+ is None: no gradient reached.*\.detach\(\)",
        (
            "[net.send(h[0], 0, c, name), net.send(h[1], 1, c, name)]",
            "[net.send(h[0].detach(), 0, c, name), net.send(h[1].detach(), 1, c, name)]",
        ),
    ),
    wrong(
        "split-logits-on-column-1",
        "split_forward",
        "gathers the logits on column 1: sends column 0's half across (right numbers on one CPU)",
        r"gathered with sends \['0->1'\].*net\.send\(h\[1\], 1, 0, alexnet\.OUTPUT\)",
        (
            "torch.cat([h[0], net.send(h[1], 1, 0, alexnet.OUTPUT)], dim=1)",
            "torch.cat([net.send(h[0], 0, 1, alexnet.OUTPUT), h[1]], dim=1)",
        ),
    ),
    wrong(
        "split-x-not-moved",
        "split_forward",
        "never moves the images to the columns' devices: h = [x, x] (right numbers on one CPU)",
        r"column 0 and 1 computed on the images x as they came.*x\.to\(dev\)",
        ("h = [x.to(dev) for dev in net.devices]", "h = [x, x]"),
    ),
    wrong(
        "split-send-src-dst-swapped",
        "split_forward",
        "passes dst before src to net.send: each half is delivered to the wrong column (right numbers and "
        "bytes on one CPU)",
        r"a column used what lives on the other column's device:.*delivers t to column (0|1), but column "
        r"(1|0) used the result",
        (
            "[net.send(h[0], 0, c, name), net.send(h[1], 1, c, name)]",
            "[net.send(h[0], c, 0, name), net.send(h[1], c, 1, name)]",
        ),
    ),
    valid(
        "split-explicit-columns",
        "split_forward",
        "two named column tensors, each exchange written as two sends",
        code=(
            "def split_forward(net, x):\n"
            "    a, b = x.to(net.devices[0]), x.to(net.devices[1])\n"
            "    for name in alexnet.LAYERS:\n"
            "        if name in net.cfg.exchange:\n"
            "            a, b = (\n"
            "                torch.cat([a, net.send(b, 1, 0, name)], dim=1),\n"
            "                torch.cat([net.send(a, 0, 1, name), b], dim=1),\n"
            "            )\n"
            "        a, b = net.stage(name, 0, a), net.stage(name, 1, b)\n"
            "    return torch.cat([a, net.send(b, 1, 0, alexnet.OUTPUT)], dim=1)\n"
        ),
    ),
    valid(
        "split-helper-function",
        "split_forward",
        "a helper that gathers both halves for one column, sending every tensor (a no-op when src == dst)",
        code=(
            "def gather(net, h, c, name):\n"
            "    return torch.cat([net.send(h[src], src, c, name) for src in (0, 1)], dim=1)\n\n\n"
            "def split_forward(net, x):\n"
            "    h = {c: x.to(net.devices[c]) for c in (0, 1)}\n"
            "    for name in alexnet.LAYERS:\n"
            "        if name in net.cfg.exchange:\n"
            "            h = {c: gather(net, h, c, name) for c in (0, 1)}\n"
            "        h = {c: net.stage(name, c, h[c]) for c in (0, 1)}\n"
            "    return torch.cat([h[0], net.send(h[1], 1, 0, alexnet.OUTPUT)], dim=1)\n"
        ),
    ),
    # Exercise 3: step_memory ---------------------------------------------------------------------
    wrong(
        "memory-no-default",
        "step_memory",
        "drops the default of bytes_per_element: a call without it fails",
        r"without bytes_per_element.*bytes_per_element=4",
        (
            "def step_memory(n_params, optimizer, bytes_per_element=4):",
            "def step_memory(n_params, optimizer, bytes_per_element):",
        ),
    ),
    wrong(
        "memory-no-gradients",
        "step_memory",
        "forgets the gradients",
        r"keys.*Missing: \['gradients'\]",
        (
            'return {"weights": one, "gradients": one, "optimizer": buffers * one}',
            'return {"weights": one, "optimizer": buffers * one}',
        ),
    ),
    wrong(
        "memory-adam-one-buffer",
        "step_memory",
        "counts Adam's state as one buffer",
        r"\['optimizer'\].*Adam two",
        ('"adam": 2', '"adam": 1'),
    ),
    wrong(
        "memory-floats",
        "step_memory",
        "returns floats (bytes computed with a division)",
        r"a float.*asks for an int",
        ("one = n_params * bytes_per_element", "one = n_params * bytes_per_element / 1"),
    ),
    wrong(
        "memory-4-bytes",
        "step_memory",
        "hard-codes 4-byte elements",
        r"\['weights'\].*here 2",
        ("one = n_params * bytes_per_element", "one = n_params * 4"),
    ),
    wrong(
        "memory-momentum-none",
        "step_memory",
        "thinks momentum keeps no state either",
        r"'momentum'.*\['optimizer'\].*momentum one buffer",
        ('"momentum": 1', '"momentum": 0'),
    ),
    valid(
        "memory-if-chain",
        "step_memory",
        "an if/elif chain",
        code=(
            "def step_memory(n_params, optimizer, bytes_per_element=4):\n"
            "    w = n_params * bytes_per_element\n"
            '    if optimizer == "sgd":\n'
            "        state = 0\n"
            '    elif optimizer == "momentum":\n'
            "        state = w\n"
            "    else:\n"
            "        state = 2 * w\n"
            '    return {"weights": w, "gradients": w, "optimizer": state}\n'
        ),
    ),
    valid(
        "memory-int-cast",
        "step_memory",
        "computes with a float factor, then casts to int",
        code=(
            "def step_memory(n_params, optimizer, bytes_per_element=4):\n"
            '    factor = {"sgd": 0.0, "momentum": 1.0, "adam": 2.0}[optimizer]\n'
            "    w = n_params * bytes_per_element\n"
            '    return {"weights": int(w), "gradients": int(w), "optimizer": int(factor * w)}\n'
        ),
    ),
]
