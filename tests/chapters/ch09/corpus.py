"""Lab 9 (ViT patching): wrong answers students write, and valid alternatives."""

from mutations import valid, wrong

GUARD = "if b < out.shape[0] and n < out.shape[1] and e < out.shape[2]:"
READ = "out[b, n, e] = img[b, c, i * p + r, j * p + s]"
WEIGHT = "linear.weight.copy_(conv.weight.reshape(d, c * p * p))"
BIAS = "linear = nn.Linear(c * p * p, d, bias=conv.bias is not None)"
FLOPS = "return 2 * (2 * n * n * dim)"

MUTATIONS = [
    # Exercise 1: the patchify kernel -------------------------------------------------------------
    wrong(
        "block-of-32-typed-in",
        "patchify",
        "builds e from a block size of 32 typed in, not the launch's",
        r"blocks of 64 threads along x.*no block size typed in",
        (
            "e, n, b = cuda.grid(3)",
            "e = cuda.blockIdx.x * 32 + cuda.threadIdx.x\n    n = cuda.blockIdx.y\n    b = cuda.blockIdx.z",
        ),
    ),
    wrong(
        "channel-split-by-p",
        "patchify",
        "takes the channel as e // p instead of e // (p * p)",
        r"index is negative.*c = e // \(p \* p\) is the channel",
        ("c = e // (p * p)  # channel", "c = e // p  # channel"),
    ),
    wrong(
        "out-indices-reordered",
        "patchify",
        "writes out[b, e, n]",
        r"indexed out\[b, n, e\].*in another order",
        (READ, "out[b, e, n] = img[b, c, i * p + r, j * p + s]"),
    ),
    wrong(
        "patch-swapped-ij",
        "patchify",
        "reads the patch at (patch column, patch row): row and column of patches swapped",
        r"outside.*patch row and column",
        (READ, "out[b, n, e] = img[b, c, j * p + r, i * p + s]"),
    ),
    wrong(
        "patch-column-major",
        "patchify",
        "numbers the patches column by column (i = n % rows)",
        r"column by column",
        ("i = n // per_row  # patch row", "i = n % (img.shape[2] // p)  # patch row"),
        ("j = n - i * per_row  # patch column", "j = n // (img.shape[2] // p)  # patch column"),
    ),
    wrong(
        "patch-per-row-from-h",
        "patchify",
        "counts the patches per row with H instead of W",
        r"outside.*H and W",
        ("per_row = img.shape[3] // p", "per_row = img.shape[2] // p"),
    ),
    wrong(
        "patch-channel-last",
        "patchify",
        "orders the patch vector (row, column, channel)",
        r"\(row, column, channel\) order",
        ("c = e // (p * p)  # channel", "c = e % img.shape[1]  # channel"),
        ("rs = e - c * (p * p)", "rs = e // img.shape[1]"),
    ),
    wrong(
        "patch-swapped-rs",
        "patchify",
        "swaps the row and the column inside the patch",
        r"row and column inside the patch swapped",
        (READ, "out[b, n, e] = img[b, c, i * p + s, j * p + r]"),
    ),
    wrong(
        "patch-no-e-guard",
        "patchify",
        "guards the images and patches but not the extra x threads of a block",
        r"outside.*guard",
        (GUARD, "if b < out.shape[0] and n < out.shape[1]:"),
    ),
    wrong(
        "patch-guard-off-by-one",
        "patchify",
        "guards with <= instead of <",
        r"outside.*guard",
        (GUARD, "if b < out.shape[0] and n < out.shape[1] and e <= out.shape[2]:"),
    ),
    wrong(
        "patch-true-division",
        "patchify",
        "computes the channel with / and int(): float64 arithmetic in the kernel",
        r"float64",
        ("c = e // (p * p)  # channel", "c = int(e / (p * p))  # channel"),
    ),
    wrong(
        "patch-grid-order",
        "patchify",
        "unpacks cuda.grid(3) as (b, n, e)",
        r"e, n, b = cuda.grid\(3\)",
        ("e, n, b = cuda.grid(3)", "b, n, e = cuda.grid(3)"),
    ),
    valid(
        "patch-early-return",
        "patchify",
        "an early return instead of the if block",
        (
            GUARD,
            "if b >= out.shape[0] or n >= out.shape[1] or e >= out.shape[2]:\n        return\n    if True:",
        ),
    ),
    valid(
        "patch-stride-loop",
        "patchify",
        "a grid-stride loop along the patch vector",
        (GUARD, "for e in range(e, out.shape[2], cuda.gridsize(3)[0]):"),
    ),
    valid(
        "patch-modulo",
        "patchify",
        "% and // instead of subtractions",
        ("j = n - i * per_row", "j = n % per_row"),
        ("rs = e - c * (p * p)", "rs = e % (p * p)"),
        ("s = rs - r * p", "s = rs % p"),
    ),
    # Exercise 2: linear_from_conv ----------------------------------------------------------------
    wrong(
        "embed-always-bias",
        "linear_from_conv",
        "always creates the Linear with a bias (nn.Linear's random one when the conv has none)",
        r"has no bias, but your Linear has one.*random",
        (BIAS, "linear = nn.Linear(c * p * p, d)"),
    ),
    wrong(
        "embed-zero-bias",
        "linear_from_conv",
        "always creates a bias and zeroes it when the conv has none",
        r"has no bias, but your Linear has one.*all zeros",
        (BIAS, "linear = nn.Linear(c * p * p, d)"),
        ("if conv.bias is not None:\n", "linear.bias.zero_()\n        if conv.bias is not None:\n"),
    ),
    wrong(
        "embed-no-bias-copy",
        "linear_from_conv",
        "forgets to copy the conv's bias",
        r"copy the conv's bias",
        ("            linear.bias.copy_(conv.bias)", "            pass"),
    ),
    wrong(
        "embed-channel-last",
        "linear_from_conv",
        "flattens the filters in (row, column, channel) order",
        r"\(row, column, channel\) order",
        (WEIGHT, "linear.weight.copy_(conv.weight.permute(0, 2, 3, 1).reshape(d, c * p * p))"),
    ),
    wrong(
        "embed-transposed",
        "linear_from_conv",
        "swaps in and out features",
        r"a patch has C\*p\*p",
        (BIAS, "linear = nn.Linear(d, c * p * p, bias=conv.bias is not None)"),
        (WEIGHT, "linear.weight.copy_(conv.weight.reshape(d, c * p * p).T)"),
        ("linear.bias.copy_(conv.bias)", "pass"),
    ),
    wrong(
        "embed-no-no-grad",
        "linear_from_conv",
        "copies the weights without torch.no_grad()",
        r"torch.no_grad",
        ("with torch.no_grad():", "if True:"),
    ),
    wrong(
        "embed-returns-weight",
        "linear_from_conv",
        "returns the weight matrix instead of the layer",
        r"should return an nn.Linear",
        ("return linear", "return linear.weight"),
    ),
    valid(
        "embed-flatten-data",
        "linear_from_conv",
        "flatten(1) and assignment through .data",
        (WEIGHT, "linear.weight.data = conv.weight.data.flatten(1).clone()"),
    ),
    valid(
        "embed-state-dict",
        "linear_from_conv",
        "load_state_dict with the reshaped state of the conv",
        (
            "    with torch.no_grad():\n"
            "        linear.weight.copy_(conv.weight.reshape(d, c * p * p))\n"
            "        if conv.bias is not None:\n"
            "            linear.bias.copy_(conv.bias)\n",
            "    state = {k: v.reshape(d, -1) if k == 'weight' else v\n"
            "             for k, v in conv.state_dict().items()}\n"
            "    linear.load_state_dict(state)\n",
        ),
    ),
    wrong(
        "embed-float64",
        "linear_from_conv",
        "creates the Linear in float64",
        r"your Linear's weight is float64, the conv's float32",
        (BIAS, "linear = nn.Linear(c * p * p, d, bias=conv.bias is not None, dtype=torch.float64)"),
    ),
    wrong(
        "embed-frozen",
        "linear_from_conv",
        "sets the weight as a Parameter that does not require gradients",
        r"weight does not require gradients.*would not train",
        (
            WEIGHT,
            "linear.weight = nn.Parameter(conv.weight.reshape(d, c * p * p).clone(), requires_grad=False)",
        ),
    ),
    wrong(
        "embed-shares-the-conv",
        "linear_from_conv",
        "makes the Linear's parameters views of the conv's",
        r"weight and bias share memory with the conv's parameters",
        (WEIGHT, "linear.weight = nn.Parameter(conv.weight.view(d, c * p * p))"),
        ("linear.bias.copy_(conv.bias)", "linear.bias = conv.bias"),
    ),
    # Exercise 3: attention_flops -----------------------------------------------------------------
    wrong(
        "flops-one-product",
        "attention_flops",
        "counts Q K^T only, forgets the product with V",
        r"half the count.*one of the two products",
        (FLOPS, "return 2 * n * n * dim"),
    ),
    wrong(
        "flops-mac-as-one",
        "attention_flops",
        "counts a multiply-add as 1 FLOP",
        r"half the count.*multiply-add as 1 FLOP",
        (FLOPS, "return 2 * (n * n * dim)"),
    ),
    wrong(
        "flops-softmax",
        "attention_flops",
        "adds the softmax (about 5 operations per score)",
        r"counted the softmax",
        (FLOPS, "return 2 * (2 * n * n * dim) + 5 * n * n"),
    ),
    wrong(
        "flops-projections",
        "attention_flops",
        "adds the Q, K, V projections",
        r"counted the projections",
        (FLOPS, "return 2 * (2 * n * n * dim) + 3 * (2 * n * dim * dim)"),
    ),
    wrong(
        "flops-float",
        "attention_flops",
        "computes N with / and ** : returns a float",
        r"is .*, a float, where an int is asked for",
        ("n = (image // patch) ** 2", "n = (image / patch) ** 2"),
    ),
    wrong(
        "flops-n-not-squared",
        "attention_flops",
        "takes N = image // patch, the patches along one side",
        r"not image // patch",
        ("n = (image // patch) ** 2", "n = image // patch"),
    ),
    valid(
        "flops-numpy-int",
        "attention_flops",
        "returns np.prod(...), a NumPy integer (the one int rule: a NumPy integer is an int)",
        (FLOPS, "return np.prod([4, n, n, dim])"),
    ),
    wrong(
        "flops-true-division",
        "attention_flops",
        "N from a true division, (image / patch) ** 2, converted with int() at the end: right only where "
        "the patch divides the image",
        r"16 does not divide 44.*image // patch = 2 per side.*A true division \(image / patch\)",
        ("n = (image // patch) ** 2", "n = (image / patch) ** 2"),
        (FLOPS, "return int(4 * n * n * dim)"),
    ),
    wrong(
        "flops-pixel-ratio",
        "attention_flops",
        "N as the image's pixels over a patch's pixels, image**2 // patch**2",
        r"16 does not divide 44.*keeps only the whole patches.*N = \(image // patch\)\*\*2 = 4",
        ("n = (image // patch) ** 2", "n = image * image // (patch * patch)"),
    ),
    valid(
        "flops-int-of-float",
        "attention_flops",
        "float arithmetic for the count, N from int() of the patches per side (a floor, for positive sizes)",
        ("n = (image // patch) ** 2", "n = int(image / patch) ** 2"),
        (FLOPS, "return int(4.0 * n * n * dim)"),
    ),
    valid(
        "flops-tokens-product",
        "attention_flops",
        "tokens as a product of patches per side, 4 N^2 D in one expression",
        ("n = (image // patch) ** 2", "side = image // patch\n    n = side * side"),
        (FLOPS, "return 4 * n**2 * dim"),
    ),
]
