"""Chapter 8: plain and residual networks, their gradients, training, and the lab 8 checks."""

import numpy as np
import pytest
import torch
from torch import nn

from cudalearn import checks, exercises
from cudalearn.chapters.ch08 import model as resnet
from cudalearn.nn import datasets, training

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # small models: faster on one CPU thread


@pytest.mark.parametrize("conv", [False, True])
def test_residual_block_is_its_plain_twin_plus_the_input(conv):
    torch.manual_seed(0)
    res = resnet.Block(6, skip=True, conv=conv).eval()
    plain = resnet.Block(6, skip=False, conv=conv).eval()
    plain.load_state_dict(res.state_dict())
    x = torch.randn(3, 6, 5, 5) if conv else torch.randn(3, 6)
    with torch.no_grad():
        torch.testing.assert_close(res(x), plain(x) + x)
        torch.testing.assert_close(res.branch(x), plain(x))


def test_make_net_layers_parameters_and_shapes():
    for conv, x in ((False, torch.randn(4, 64)), (True, torch.randn(4, 1, 8, 8))):
        nets = [resnet.make_net(3, skip=s, conv=conv, width=8, inputs=x.shape[1]) for s in (False, True)]
        assert [len(resnet.weight_layers(n)) for n in nets] == [8, 8]
        assert len({sum(p.numel() for p in n.parameters()) for n in nets}) == 1
        assert nets[1](x).shape == (4, 10)
    no_norm = resnet.make_net(2, skip=True, norm=False, width=8)
    assert not any(isinstance(m, nn.BatchNorm1d) for m in no_norm.modules())
    assert all(m.bias is not None for _, m in resnet.weight_layers(no_norm))


def test_gradients_vanish_explode_or_flow():
    data = datasets.digits_split()
    X, y = data.X_train[:64], data.y_train[:64]
    ratio = {}
    for skip in (False, True):
        for norm in (False, True):
            torch.manual_seed(0)
            g = resnet.grad_norms(resnet.make_net(20, skip=skip, norm=norm, width=32), X, y)
            assert g.shape == (42,) and g.dtype == np.float64
            ratio[skip, norm] = g[0] / g[-1]
    assert ratio[False, False] < 1e-6  # plain, no normalisation: vanishing
    assert ratio[False, True] > 1e2  # plain + BatchNorm: exploding towards the input
    assert 1e-2 < ratio[True, False] < 1e2 and 1e-2 < ratio[True, True] < 1e2


def test_grad_norms_survive_float32_underflow():
    # Entries of ~1e-31: nonzero in float32, but their squares (1e-62) underflow; a float32 norm says 0.
    torch.manual_seed(0)
    net = resnet.make_net(1, skip=False, norm=False, width=8)
    with torch.no_grad():
        net[-1].weight.mul_(1e-30)  # scales every gradient below the head by 1e-30
    X, y = torch.randn(16, 64), torch.arange(16) % 10
    norms = resnet.grad_norms(net, X, y)
    first = resnet.weight_layers(net)[0][1].weight.grad
    assert (first != 0).any() and first.norm().item() == 0.0  # what a float32 norm would report
    assert 1e-33 < norms[0] < 1e-27
    expected = first.double().pow(2).sum().sqrt().item()
    assert norms[0] == pytest.approx(expected, rel=1e-12)


def test_plot_grad_norms_leaves_out_what_a_log_axis_cannot_show():
    fig = resnet.plot_grad_norms({"x": [1.0, 0.0, float("inf"), 2.0]})
    (line,) = fig.axes[0].get_lines()
    y = line.get_ydata()
    assert y[0] == 1.0 and y[3] == 2.0 and np.isnan(y[1]) and np.isnan(y[2])


def test_residual_block_diagram_names_both_paths():
    from cudalearn.chapters.ch08 import figures as residual

    texts = {t.get_text() for t in residual.residual_block(skip=True).axes[0].texts}
    assert "dL/dx = dL/dy (dF/dx + 1)" in texts and "identity shortcut: x" in texts
    assert set(residual.BRANCH) <= texts
    plain = {t.get_text() for t in residual.residual_block(skip=False).axes[0].texts}
    assert "dL/dx = dL/dy dF/dx" in plain and "identity shortcut: x" not in plain


def test_the_plus_one_on_the_jacobian():
    torch.manual_seed(0)
    block = resnet.Block(5, norm=False).double()
    x = torch.randn(1, 5, dtype=torch.float64)
    jy = torch.autograd.functional.jacobian(block, x).reshape(5, 5)
    jf = torch.autograd.functional.jacobian(block.branch, x).reshape(5, 5)
    torch.testing.assert_close(jy - jf, torch.eye(5, dtype=torch.float64))


def test_digits_split():
    d = datasets.digits_split(test=97)
    assert d.X_train.shape == (1700, 64) and d.X_test.shape == (97, 64)
    assert d.X_train.dtype == torch.float32 and d.y_train.dtype == torch.int64
    assert -1.0 <= float(d.X_train.min()) and float(d.X_train.max()) <= 1.0
    assert datasets.digits_split(images=True).X_train.shape[1:] == (1, 8, 8)
    with pytest.raises(ValueError, match="test="):
        datasets.digits_split(test=0)


def test_every_digits_view_reads_the_same_originals():
    images, labels = datasets.originals()
    signed = torch.from_numpy(images * 2 - 1)  # [-1, 1]: exact, the pixels are sixteenths
    d = datasets.digits_split(test=97)
    rows = torch.cat([d.X_train, d.X_test]).reshape(-1, 8, 8)
    assert torch.equal(rows.sum(0), signed.sum(0)) and len(rows) == len(labels)  # a permutation of them
    centred = datasets.shifted_digits(canvas=8, train=5, test=5, seed=2)
    order = np.random.default_rng(2).permutation(len(labels))
    assert torch.equal(centred.X_train[:, 0], signed[order[:5]])
    x, y = datasets.digits_upsampled(16)
    assert x.shape == (len(labels), 1, 16, 16) and y.dtype == torch.int64
    assert abs(float(x.mean())) < 1e-4 and abs(float(x.std()) - 1) < 1e-4


def test_fit_learns_and_reports():
    data = datasets.digits_split(test=300)
    small = datasets.Split(data.X_train[:300], data.y_train[:300], data.X_test, data.y_test)
    torch.manual_seed(0)
    net = resnet.make_net(1, skip=True, width=32)
    hist = training.fit_epochs(net, small, epochs=3, lr=0.05, batch=32)
    assert len(hist.epoch_loss) == 3 and hist.epoch_loss[-1] < hist.epoch_loss[0]
    assert hist.test_acc > 0.5 and 0 <= hist.train_acc <= 1
    assert set(hist.as_dict()) == {"epoch_loss", "train_loss", "train_acc", "test_acc"}
    tiny = datasets.Split(data.X_train[:20], data.y_train[:20], data.X_test, data.y_test)
    hist = training.fit_epochs(
        resnet.make_net(1, skip=False, width=8), tiny, epochs=1, lr=1e-3, batch=64, optimizer="adamw"
    )
    assert np.isfinite(hist.epoch_loss[0])  # a training set smaller than a batch is one batch
    with pytest.raises(ValueError, match="optimizer"):
        training.fit_epochs(net, small, epochs=1, lr=0.1, optimizer="lbfgs")


def test_adamw_decays_the_weights_as_pytorch_s_adamw_does():
    """AdamW with no weight decay would be Adam: without one given, it gets torch.optim.AdamW's default."""
    w = torch.nn.Parameter(torch.ones(3))
    default = torch.optim.AdamW([torch.nn.Parameter(torch.ones(1))]).defaults["weight_decay"]
    adamw = training.make_optimizer([w], "adamw", lr=0.1)
    assert adamw.param_groups[0]["weight_decay"] == default == training.ADAMW_WEIGHT_DECAY > 0
    assert (
        training.make_optimizer([w], "adamw", lr=0.1, weight_decay=0.05).param_groups[0]["weight_decay"]
        == 0.05
    )
    assert training.make_optimizer([w], "adamw", lr=0.1, weight_decay=0).param_groups[0]["weight_decay"] == 0
    assert training.make_optimizer([w], "sgd", lr=0.1).param_groups[0]["weight_decay"] == 0
    w.grad = torch.zeros(3)  # no gradient: only the decoupled decay moves the weights, by lr * decay
    adamw.step()
    assert torch.allclose(w.detach(), torch.full((3,), 1 - 0.1 * default))


def test_compare_depths_and_plots():
    data = datasets.digits_split(test=200)
    small = datasets.Split(data.X_train[:128], data.y_train[:128], data.X_test, data.y_test)
    res = resnet.compare_depths(
        {"a": (1, False), "b": (2, True)}, small, seeds=[0, 1], width=8, epochs=1, lr=0.05
    )
    assert list(res) == ["a", "b"] and res["b"]["layers"] == 6 and len(res["a"]["runs"]) == 2
    assert res["a"]["test_acc"] == pytest.approx(np.mean([r["test_acc"] for r in res["a"]["runs"]]))
    fig = resnet.plot_histories(res)
    fig2 = resnet.plot_grad_norms({"x": [1.0, 0.0, 2.0]})
    assert fig.axes and fig2.axes


class _Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(width, width), nn.Linear(width, width)

    def forward(self, x):
        return x + self.fc2(torch.relu(self.fc1(x)))


def _first_to_last(net, X, y):
    layers = [m for m in net.modules() if isinstance(m, nn.Linear)]
    net.zero_grad()
    nn.functional.cross_entropy(net(X), y).backward()
    return (layers[0].weight.grad.norm() / layers[-1].weight.grad.norm()).item()


def _input_gradient(branch, x, g):
    xr = x.detach().clone().requires_grad_(True)
    return torch.autograd.grad(branch(xr), xr, grad_outputs=g)[0] + g


def test_lab8_checks_pass_on_solutions():
    exercises.check_residual_block(_Block)
    exercises.check_input_gradient(_input_gradient, cases=["mlp", "tanh", "zero", "conv"])
    exercises.check_first_to_last(_first_to_last, _Block, blocks=30, width=16)


def test_lab8_checks_catch_mistakes():
    class NoSkip(_Block):
        def forward(self, x):
            return self.fc2(torch.relu(self.fc1(x)))

    class Stub(nn.Module):
        def __init__(self, width):
            super().__init__()
            raise NotImplementedError()

    with pytest.raises(AssertionError, match=r"\+ x` is missing"):
        exercises.check_residual_block(NoSkip)
    with pytest.raises(AssertionError, match=checks.NOT_DONE[:20]):
        exercises.check_residual_block(Stub)
    with pytest.raises(AssertionError, match=r"\+1 term"):
        exercises.check_input_gradient(lambda b, x, g: _input_gradient(b, x, g) - g)
    with pytest.raises(AssertionError, match="upside down"):
        exercises.check_first_to_last(lambda *a: 1 / _first_to_last(*a), _Block)


def test_lab8_checks_catch_what_the_numbers_hide():
    """Right numbers, wrong way: autograd doing the + 1, a missing zero_grad, a detached skip, a tensor."""

    def autograd_plus_one(branch, x, g):
        xr = x.detach().clone().requires_grad_(True)
        return torch.autograd.grad(branch(xr) + xr, xr, grad_outputs=g)[0]

    def no_zero_grad(net, X, y):
        layers = [m for m in net.modules() if isinstance(m, nn.Linear)]
        nn.functional.cross_entropy(net(X), y).backward()
        return (layers[0].weight.grad.norm() / layers[-1].weight.grad.norm()).item()

    class DetachedSkip(_Block):
        def forward(self, x):
            return x.detach() + self.fc2(torch.relu(self.fc1(x)))

    for case in ("mlp", "zero"):
        with pytest.raises(AssertionError, match=r"autograd added the\s+`\+ 1`"):
            exercises.check_input_gradient(autograd_plus_one, cases=[case])
    with pytest.raises(AssertionError, match="zero_grad"):
        exercises.check_first_to_last(no_zero_grad, _Block, blocks=2, width=8)
    with pytest.raises(AssertionError, match="Python float"):
        exercises.check_first_to_last(lambda *a: torch.tensor(_first_to_last(*a)), _Block, blocks=2, width=8)
    with pytest.raises(AssertionError, match=r"misses its \+1 term"):
        exercises.check_residual_block(DetachedSkip)


def test_lab8_experiments_return_only_data():
    """What crosses back from the student's process under `cudalearn grade`: tensors, numbers, strings."""
    from cudalearn.chapters.ch08.checks import first_to_last, input_gradient, residual_block

    def plain(v):
        if isinstance(v, dict):
            return all(isinstance(k, str) and plain(x) for k, x in v.items())
        if isinstance(v, (list, tuple)):
            return all(plain(x) for x in v)
        return v is None or isinstance(v, (bool, int, float, str, torch.Tensor))

    assert plain(residual_block.block_experiment(_Block, 4, (2,), 0))
    assert plain(input_gradient.input_gradient_experiment(_input_gradient, "conv", 3))
    assert plain(first_to_last.small_ratio_experiment(_first_to_last, 0))
    assert plain(first_to_last.deep_ratio_experiment(_first_to_last, _Block, 2, 4, 0))


@pytest.mark.parametrize("raised", [AttributeError, "SubmissionError"])
def test_lab8_first_to_last_survives_a_block_that_raises(raised):
    """A ResidualBlock whose code raises costs exercise 1 only: the course's block stands in (exercise 3).

    Under `cudalearn grade` the student's exception comes back rebuilt: a builtin type or SubmissionError.
    """
    from cudalearn.grading.errors import SubmissionError

    error = SubmissionError if raised == "SubmissionError" else raised

    class Typo(_Block):
        def forward(self, x):
            raise error("'ResidualBlock' object has no attribute 'fc_1'")

    class HardCoded(nn.Module):
        def __init__(self, width):
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(8, 8), nn.Linear(8, 8)

        def forward(self, x):
            return x + self.fc2(torch.relu(self.fc1(x)))

    with pytest.raises(error):
        exercises.check_residual_block(Typo)
    exercises.check_first_to_last(_first_to_last, Typo, blocks=30, width=16)
    with pytest.raises(AssertionError, match=r"`fc1` is Linear\(8, 8\).*Linear\(5, 5\)"):
        exercises.check_residual_block(HardCoded)  # the designed message, not torch's shape error
    exercises.check_first_to_last(_first_to_last, HardCoded, blocks=30, width=16)


def test_lab8_block_without_bias_fails_exercise_1_and_nan_is_named():
    """bias=False fails exercise 1 by name; a 0/0 ratio is reported as nan, gradients exactly 0."""

    class NoBias(_Block):
        def __init__(self, width):
            super().__init__(width)
            self.fc1, self.fc2 = nn.Linear(width, width, bias=False), nn.Linear(width, width, bias=False)

    with pytest.raises(AssertionError, match=r"`fc1` has no bias"):
        exercises.check_residual_block(NoBias)
    exercises.check_first_to_last(_first_to_last, NoBias)  # the course's block stands in

    def nan_ratio(net, X, y):
        return float("nan") if len(list(net.modules())) > 10 else _first_to_last(net, X, y)

    with pytest.raises(AssertionError, match=r"returned nan: 0/0.*exactly 0"):
        exercises.check_first_to_last(nan_ratio, _Block, blocks=30, width=16)
