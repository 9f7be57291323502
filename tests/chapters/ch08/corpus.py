"""Lab 8 (ResNet skip gradients): wrong answers students write, and valid alternatives."""

from mutations import valid, wrong

FORWARD = "return x + self.fc2(torch.relu(self.fc1(x)))"
VJP = "(vjp,) = torch.autograd.grad(branch(xr), xr, grad_outputs=grad_y)"
RATIO = "return (layers[0].weight.grad.norm() / layers[-1].weight.grad.norm()).item()"

MUTATIONS = [
    # Exercise 1: ResidualBlock ------------------------------------------------------------------
    wrong(
        "block-no-skip",
        "ResidualBlock",
        "returns the branch F(x) alone, no skip",
        r"\+ x` is missing",
        (FORWARD, "return self.fc2(torch.relu(self.fc1(x)))"),
    ),
    wrong(
        "block-relu-after-add",
        "ResidualBlock",
        "puts a ReLU after the addition, as in the original ResNet's conv blocks",
        r"no ReLU after the addition",
        (FORWARD, "return torch.relu(x + self.fc2(torch.relu(self.fc1(x))))"),
    ),
    wrong(
        "block-no-inner-relu",
        "ResidualBlock",
        "forgets the ReLU between fc1 and fc2",
        r"ReLU between fc1 and fc2 is missing",
        (FORWARD, "return x + self.fc2(self.fc1(x))"),
    ),
    wrong(
        "block-detached-skip",
        "ResidualBlock",
        "adds the skip with a detached x: right output, the +1 of the gradient is lost",
        r"misses its \+1 term",
        (FORWARD, "return x.detach() + self.fc2(torch.relu(self.fc1(x)))"),
    ),
    wrong(
        "block-detached-branch",
        "ResidualBlock",
        "computes the branch from a detached x: the dF/dx term is lost",
        r"no dF/dx term",
        (FORWARD, "return x + self.fc2(torch.relu(self.fc1(x.detach())))"),
    ),
    wrong(
        "block-other-names",
        "ResidualBlock",
        "names the layers linear1 and linear2",
        r"no `fc1` Linear layer",
        ("self.fc1 = nn.Linear(width, width)", "self.linear1 = nn.Linear(width, width)"),
        ("self.fc2 = nn.Linear(width, width)", "self.linear2 = nn.Linear(width, width)"),
        (FORWARD, "return x + self.linear2(torch.relu(self.linear1(x)))"),
    ),
    wrong(
        "block-wide-hidden",
        "ResidualBlock",
        "makes the hidden layer twice as wide",
        r"keeps the width",
        ("self.fc1 = nn.Linear(width, width)", "self.fc1 = nn.Linear(width, 2 * width)"),
        ("self.fc2 = nn.Linear(width, width)", "self.fc2 = nn.Linear(2 * width, width)"),
    ),
    wrong(
        "block-in-place",
        "ResidualBlock",
        "adds the branch into x in place (x += F(x)), changing the caller's tensor",
        r"changed its input x in place",
        (FORWARD, "x += self.fc2(torch.relu(self.fc1(x)))\n        return x"),
    ),
    wrong(
        "block-one-layer-twice",
        "ResidualBlock",
        "reuses one Linear for both layers",
        r"same layer object",
        ("self.fc2 = nn.Linear(width, width)", "self.fc2 = self.fc1"),
    ),
    wrong(
        "block-no-grad-branch",
        "ResidualBlock",
        "computes the branch under torch.no_grad()",
        r"no dF/dx term",
        (
            FORWARD,
            "with torch.no_grad():\n            f = self.fc2(torch.relu(self.fc1(x)))\n        return x + f",
        ),
    ),
    wrong(
        "block-no-bias",
        "ResidualBlock",
        "drops the biases (bias=False): dead ReLUs then give exercise 3 a 0/0 ratio",
        r"`fc1` has no bias",
        ("self.fc1 = nn.Linear(width, width)", "self.fc1 = nn.Linear(width, width, bias=False)"),
        ("self.fc2 = nn.Linear(width, width)", "self.fc2 = nn.Linear(width, width, bias=False)"),
    ),
    wrong(
        "block-hard-coded-width",
        "ResidualBlock",
        "hard-codes the width of the visible check's first case, Linear(8, 8)",
        r"`fc1` is Linear\(8, 8\).*Linear\(5, 5\)",
        ("self.fc1 = nn.Linear(width, width)", "self.fc1 = nn.Linear(8, 8)"),
        ("self.fc2 = nn.Linear(width, width)", "self.fc2 = nn.Linear(8, 8)"),
    ),
    valid(
        "block-functional-relu",
        "ResidualBlock",
        "F.relu and the skip added last",
        (FORWARD, "out = self.fc2(F.relu(self.fc1(x)))\n        return out + x"),
    ),
    valid(
        "block-relu-module",
        "ResidualBlock",
        "an nn.ReLU module and torch.add",
        (
            "self.fc2 = nn.Linear(width, width)",
            "self.fc2 = nn.Linear(width, width)\n        self.act = nn.ReLU()",
        ),
        (FORWARD, "return torch.add(x, self.fc2(self.act(self.fc1(x))))"),
    ),
    # Exercise 2: input_gradient -----------------------------------------------------------------
    wrong(
        "grad-no-plus-one",
        "input_gradient",
        "returns the vector-Jacobian product of the branch only",
        r"add the \+1 term",
        ("return vjp + grad_y", "return vjp"),
    ),
    wrong(
        "grad-autograd-plus-one",
        "input_gradient",
        "lets autograd do the + 1: differentiates branch(x) + x",
        r"autograd added the\s+`\+ 1`",
        (VJP, "(vjp,) = torch.autograd.grad(branch(xr) + xr, xr, grad_outputs=grad_y)"),
        ("return vjp + grad_y", "return vjp"),
    ),
    wrong(
        "grad-autograd-backward",
        "input_gradient",
        "backward() through branch(x) + x and returns x.grad",
        r"autograd added the\s+`\+ 1`",
        (VJP, "(branch(xr) + xr).backward(grad_y)"),
        ("return vjp + grad_y", "return xr.grad"),
    ),
    wrong(
        "grad-adds-one",
        "input_gradient",
        "adds the number 1 instead of grad_y",
        r"added the number 1",
        ("return vjp + grad_y", "return vjp + 1"),
    ),
    wrong(
        "grad-only-grad-y",
        "input_gradient",
        "returns grad_y alone",
        r"grad_y only",
        ("return vjp + grad_y", "return grad_y.clone()"),
    ),
    wrong(
        "grad-changes-x",
        "input_gradient",
        "switches on requires_grad on the caller's x",
        r"changed its argument x",
        ("xr = x.detach().clone().requires_grad_(True)", "xr = x.requires_grad_(True)"),
    ),
    wrong(
        "grad-sum-loss",
        "input_gradient",
        "differentiates branch(x).sum() instead of using grad_y",
        r"largest error",
        (VJP, "(vjp,) = torch.autograd.grad(branch(xr).sum(), xr)"),
    ),
    valid(
        "grad-backward",
        "input_gradient",
        "backward() on the branch alone, then xr.grad + grad_y",
        (VJP, "branch(xr).backward(grad_y)\n    vjp = xr.grad"),
    ),
    valid(
        "grad-functional-vjp",
        "input_gradient",
        "torch.autograd.functional.vjp",
        ("    xr = x.detach().clone().requires_grad_(True)\n", ""),
        (VJP, "_, vjp = torch.autograd.functional.vjp(branch, x.detach().clone(), grad_y)"),
    ),
    valid(
        "grad-func-vjp",
        "input_gradient",
        "torch.func.vjp",
        ("    xr = x.detach().clone().requires_grad_(True)\n", ""),
        (VJP, "_, pullback = torch.func.vjp(branch, x.detach().clone())\n    (vjp,) = pullback(grad_y)"),
    ),
    # Exercise 3: first_to_last ------------------------------------------------------------------
    wrong(
        "ratio-upside-down",
        "first_to_last",
        "last layer over first",
        r"upside down",
        (RATIO, "return (layers[-1].weight.grad.norm() / layers[0].weight.grad.norm()).item()"),
    ),
    wrong(
        "ratio-no-zero-grad",
        "first_to_last",
        "forgets net.zero_grad(): old gradients add up",
        r"zero_grad",
        ("    net.zero_grad()\n", ""),
    ),
    wrong(
        "ratio-weight-norms",
        "first_to_last",
        "divides the weights' norms, not their gradients'",
        r"expected",
        (RATIO, "return (layers[0].weight.norm() / layers[-1].weight.norm()).item()"),
    ),
    wrong(
        "ratio-last-parameter",
        "first_to_last",
        "takes the first and last parameters of the net: the last one is a bias",
        r"bias",
        (
            RATIO,
            "params = list(net.parameters())\n"
            "    return (params[0].grad.norm() / params[-1].grad.norm()).item()",
        ),
    ),
    wrong(
        "ratio-tensor",
        "first_to_last",
        "returns a 0-d tensor, no .item()",
        r"Python float",
        (RATIO, "return layers[0].weight.grad.norm() / layers[-1].weight.grad.norm()"),
    ),
    wrong(
        "ratio-mse-loss",
        "first_to_last",
        "takes the MSE against one-hot labels instead of the cross-entropy",
        r"your loss is the MSE against one-hot labels.*F\.cross_entropy",
        ("F.cross_entropy(net(X), y).backward()", "F.mse_loss(net(X), F.one_hot(y, 10).float()).backward()"),
    ),
    wrong(
        "ratio-mean-logits",
        "first_to_last",
        "backpropagates the mean of the logits",
        r"your loss is the mean of the logits",
        ("F.cross_entropy(net(X), y).backward()", "net(X).mean().backward()"),
    ),
    valid(
        "ratio-autograd-grad",
        "first_to_last",
        "torch.autograd.grad on the two weights: no .grad, no zero_grad needed",
        ("    net.zero_grad()\n", ""),
        (
            "F.cross_entropy(net(X), y).backward()\n",
            "loss = F.cross_entropy(net(X), y)\n"
            "    first, last = torch.autograd.grad(loss, [layers[0].weight, layers[-1].weight])\n",
        ),
        (RATIO, "return float(torch.linalg.vector_norm(first) / torch.linalg.vector_norm(last))"),
    ),
    valid(
        "ratio-grads-to-none",
        "first_to_last",
        "clears the gradients by hand (p.grad = None)",
        (
            "    net.zero_grad()\n",
            "    for p in net.parameters():\n        p.grad = None\n",
        ),
    ),
]
