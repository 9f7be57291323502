"""AlexNet in two columns (Chapter 7): sizes, the split against the unsplit network, bytes, memory, lab."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from cudalearn import checks, exercises
from cudalearn.chapters.ch07 import input_pipeline, step_memory
from cudalearn.chapters.ch07.checks import split_forward as split_checks
from cudalearn.nn import alexnet, datasets, training
from cudalearn.nn.alexnet import (
    EXCHANGE_2012,
    EXCHANGE_EVERY,
    AlexNet,
    AlexNetConfig,
    GroupedLinear,
    TrainStep,
    TwoColumnAlexNet,
)


def test_the_2012_network_has_its_published_sizes():
    cfg = AlexNetConfig.original()
    assert cfg.spatial() == [27, 13, 13, 13, 6]
    assert cfg.spatial(pooled=False) == [55, 27, 13, 13, 13]
    assert cfg.input_shape("fc6") == (9216,)
    assert cfg.n_params() == 60_965_224
    assert cfg.param_count("conv2") == 256 * 48 * 25 + 256  # grouped: each filter reads 48 maps
    assert cfg.param_count("conv3") == 384 * 256 * 9 + 384  # exchanged: each filter reads all 256
    assert cfg.flops("conv1") == 2 * 96 * 363 * 55 * 55
    assert cfg.flops("fc6") == 2 * 9216 * 4096
    every = cfg.replace(exchange=EXCHANGE_EVERY)
    assert every.n_params() == 62_378_344 and every.exchange == EXCHANGE_EVERY


def test_config_is_validated():
    with pytest.raises(ValueError, match="even"):
        AlexNetConfig.small(classes=11)
    with pytest.raises(ValueError, match="exchange"):
        AlexNetConfig.small(exchange=("conv1",))
    with pytest.raises(ValueError, match="activation"):
        AlexNetConfig.small(activation="gelu")
    with pytest.raises(ValueError, match="too small"):
        AlexNetConfig.small(image=8)
    assert AlexNetConfig.small(exchange=("fc7", "conv2")).exchange == ("conv2", "fc7")  # network order


def test_grouped_linear_is_block_diagonal():
    torch.manual_seed(0)
    layer = GroupedLinear(6, 4, groups=2)
    x = torch.randn(3, 6)
    w = torch.zeros(4, 6)
    w[:2, :3], w[2:, 3:] = layer.weight[:2], layer.weight[2:]
    torch.testing.assert_close(layer(x), x @ w.T + layer.bias)


def test_every_layer_can_go_back_to_pytorchs_default_initialisation():
    """Chapter 7's exercise 3: reset_parameters on every module undoes init_weights, GroupedLinear too."""
    net = AlexNet(AlexNetConfig.small(exchange=("conv3",)))  # fc6-fc8 do not exchange: GroupedLinear
    assert any(isinstance(m, GroupedLinear) for m in net.modules())
    for m in net.modules():
        if any(True for _ in m.parameters(recurse=False)):
            assert hasattr(m, "reset_parameters"), f"{type(m).__name__} has no reset_parameters"
            m.reset_parameters()
            assert m.bias.abs().max() > 0, f"{type(m).__name__}: PyTorch's default biases are not zero"
    torch.manual_seed(3)
    a = GroupedLinear(8, 4)
    b = GroupedLinear(8, 4)
    torch.manual_seed(3)
    b.reset_parameters()  # the same draws as the constructor's, in the same order
    torch.testing.assert_close(a.weight, b.weight)
    torch.testing.assert_close(a.bias, b.bias)


@pytest.mark.parametrize("exchange", [EXCHANGE_2012, EXCHANGE_EVERY, (), ("conv2", "fc7")])
@pytest.mark.parametrize("activation", ["relu", "tanh"])
def test_two_columns_compute_the_unsplit_network(exchange, activation):
    cfg = AlexNetConfig.small(exchange=exchange, activation=activation)
    torch.manual_seed(1)
    net = AlexNet(cfg).eval()
    two = TwoColumnAlexNet.from_unsplit(net)
    n = cfg.n_params()
    assert sum(p.numel() for p in net.parameters()) == sum(p.numel() for p in two.parameters()) == n
    x, y = torch.randn(5, 1, 32, 32), torch.randint(0, 10, (5,))
    a, b = net(x), two(x)
    torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5)
    F.cross_entropy(a, y).backward()
    F.cross_entropy(b, y).backward()
    ref, mine = net.column_tensors(grad=True), two.column_tensors(grad=True)
    assert set(ref) == set(mine) and len(ref) == 32
    for key in ref:
        torch.testing.assert_close(mine[key], ref[key], rtol=1e-4, atol=1e-6)
    assert two.traffic.by_layer() == alexnet.exchange_bytes(cfg, 5)


def test_traffic_counts_only_what_changes_column():
    cfg = AlexNetConfig.small(exchange=())
    two = TwoColumnAlexNet(cfg).eval()
    two(torch.randn(2, 1, 32, 32))
    assert two.traffic.by_layer() == {alexnet.OUTPUT: (2 * 5 * 4, 0)}  # forward only: no backward ran
    two.traffic.reset()
    assert two.traffic.total() == 0
    copies = (torch.randn(2, 1, 32, 32),) * 2
    torch.testing.assert_close(two(copies), two(copies[0]))  # a copy per column, or one for both


def test_traffic_records_where_each_send_went():
    """Each forward send's (src column, dst column), so a check can tell directions apart on one CPU."""
    cfg = AlexNetConfig.small(exchange=("conv3",))
    two = TwoColumnAlexNet(cfg)
    logits = two(torch.randn(2, 1, 32, 32))
    half = alexnet.exchange_bytes(cfg, 2)["conv3"][0] // 2
    assert two.traffic.by_route() == {"conv3": {(0, 1): half, (1, 0): half}, alexnet.OUTPUT: {(1, 0): 40}}
    assert logits.grad_fn.next_functions[1][0].route == (1, 0)  # the send's node carries its route
    logits.sum().backward()
    assert two.traffic.by_route()[alexnet.OUTPUT] == {(1, 0): 40}  # the gradient's way back is not a route


def test_exchange_bytes_of_the_2012_network():
    got = alexnet.exchange_bytes(AlexNetConfig.original(), 128)
    assert got["conv3"] == (128 * 256 * 13 * 13 * 4,) * 2
    assert got[alexnet.OUTPUT] == (128 * 500 * 4,) * 2
    assert sum(f + b for f, b in got.values()) == 62_640_128
    half = alexnet.exchange_bytes(AlexNetConfig.original(), 128, bytes_per_element=2)
    assert sum(f + b for f, b in half.values()) == 62_640_128 // 2


def test_default_initialisation_suits_the_activation():
    torch.manual_seed(0)
    relu = AlexNet(AlexNetConfig.original()).layers["fc6"].weight.detach()
    tanh = AlexNet(AlexNetConfig.small(activation="tanh")).layers["fc7"].weight.detach()
    assert abs(float(relu.std()) - (2 / 9216) ** 0.5) < 0.02 * (2 / 9216) ** 0.5  # He: sqrt(2 / fan_in)
    glorot = 5 / 3 * (2 / (128 + 128)) ** 0.5
    assert abs(float(tanh.std()) - glorot) < 0.05 * glorot


@pytest.mark.parametrize("dropout", [0.0, 0.5])
@pytest.mark.parametrize("exchange", [EXCHANGE_2012, EXCHANGE_EVERY])
def test_saved_bytes_prediction_matches_autograd(dropout, exchange):
    cfg = AlexNetConfig.small(dropout=dropout, exchange=exchange, activation="tanh" if dropout else "relu")
    net = AlexNet(cfg).train()
    x, y = torch.randn(6, 1, 32, 32), torch.randint(0, 10, (6,))
    with step_memory.SavedTensors(net) as saved:
        F.cross_entropy(net(x), y)
    predicted = step_memory.alexnet_saved_bytes(cfg, 6, device_type="cpu")
    assert saved.total == sum(predicted.values())
    with step_memory.SavedTensors(net, exclude=(x, y)) as without_batch:
        F.cross_entropy(net(x), y)
    assert without_batch.total == sum(predicted.values()) - predicted["input"] - predicted["labels"]
    assert step_memory.measure_step(net, x, y).activations == saved.total


def test_saved_bytes_of_the_2012_network_and_limits():
    cuda = step_memory.alexnet_saved_bytes(AlexNetConfig.original(), 128)
    cpu = step_memory.alexnet_saved_bytes(AlexNetConfig.original(), 128, device_type="cpu")
    assert cuda["conv1"] == 128 * (96 * 55 * 55 * 4 + 96 * 27 * 27 * 12)
    assert cpu["fc6"] - cuda["fc6"] == 128 * 4096 * 3  # dropout masks: float32 on the CPU, bool on a GPU
    with pytest.raises(ValueError, match="fully connected"):
        step_memory.alexnet_saved_bytes(AlexNetConfig.small(exchange=("conv3", "fc6")), 2)


def test_static_bytes_match_real_optimisers():
    net = AlexNet(AlexNetConfig.small(dropout=0.0))
    n = sum(p.numel() for p in net.parameters())
    for name, opt in (
        ("sgd", torch.optim.SGD(net.parameters(), lr=0.1)),
        ("momentum", torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)),
        ("adam", torch.optim.Adam(net.parameters())),
    ):
        F.cross_entropy(net(torch.randn(2, 1, 32, 32)), torch.tensor([1, 2])).backward()
        opt.step()
        mem = step_memory.static_bytes(n, name)
        assert mem.weights == step_memory.parameter_bytes(net) == 4 * n
        assert mem.optimizer == step_memory.optimizer_state_bytes(opt)
    assert "total" in str(mem) and mem.total == mem.static
    with pytest.raises(ValueError, match="optimizer"):
        step_memory.static_bytes(10, "lion")
    assert step_memory.fmt_bytes(3 * 2**30) == "3.00 GiB" and step_memory.fmt_bytes(1536 * 2**10) == "1.5 MiB"


def test_train_step_variants_agree_on_the_cpu():
    cfg = AlexNetConfig.small(dropout=0.0)
    grads = {}
    for name, kw in {"plain": {}, "checkpoint": {"checkpoint": True}, "split": {"split": True}}.items():
        step = TrainStep(cfg, 4, ("cpu", "cpu") if kw.get("split") else ("cpu",), **kw)
        loss = step()
        assert torch.isfinite(loss)
        grads[name] = step.net.column_tensors(grad=True)
    for name in ("checkpoint", "split"):
        assert alexnet.max_abs_difference(grads["plain"], grads[name]) < 1e-5, name
    low = TrainStep(cfg, 4, ("cpu",), amp=torch.bfloat16)
    assert torch.isfinite(low()) and next(low.net.parameters()).dtype == torch.float32


def test_digits_fit_and_accuracy():
    x, y = datasets.digits_upsampled(32)
    assert x.shape == (1797, 1, 32, 32) and y.dtype == torch.int64
    assert abs(float(x.mean())) < 1e-5 and abs(float(x.std()) - 1) < 1e-4
    torch.manual_seed(0)
    net = AlexNet(AlexNetConfig.small())
    losses = training.fit_steps(net, x[:64], y[:64], steps=3, batch=8)
    assert len(losses) == 3 and all(np.isfinite(losses))
    assert len(training.fit_steps(net, x[:64], y[:64], steps=50, batch=8, target=100.0, window=2)) == 2
    assert 0 <= training.model_accuracy(net, x[:100], y[:100]) <= 1 and net.training


def test_jpeg_crops_are_random_windows_and_reproducible():
    photos = input_pipeline.JpegCrops(6, source=40, crop=32, classes=4, seed=3)
    assert len(photos) == 6
    flips = set()
    for i in range(6):
        x, label = photos[i]
        assert x.shape == (3, 32, 32) and x.dtype == torch.float32 and label == i % 4
        top, left, flipped = photos.window(i)
        flips.add(flipped)
        patch = photos.decode(i)[top : top + 32, left : left + 32]
        patch = patch[:, ::-1] if flipped else patch
        expected = patch.transpose(2, 0, 1).astype(np.float32) / np.float32(127.5) - np.float32(1.0)
        checks.check_close(x, expected, name=f"photos[{i}]", rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(photos[i][0], x)  # the same item twice: the same augmentation
    assert flips == {True, False}
    first = [photos.window(i) for i in range(6)]
    photos.epoch = 1
    assert [photos.window(i) for i in range(6)] != first  # a new epoch, new windows


def test_a_new_epoch_reaches_persistent_workers():
    # Persistent workers keep the data set they started with: the epoch must still reach them (book 07a).
    photos = input_pipeline.JpegCrops(4, source=40, crop=32)
    loader = torch.utils.data.DataLoader(photos, batch_size=2, num_workers=2, persistent_workers=True)
    first = torch.cat([x for x, _ in loader])
    photos.epoch = 1
    second = torch.cat([x for x, _ in loader])  # the same worker processes as the first pass
    alone = torch.cat([x for x, _ in torch.utils.data.DataLoader(photos, batch_size=2)])
    assert not torch.equal(first, second), "the workers drew epoch 0's windows again"
    torch.testing.assert_close(second, alone, rtol=0, atol=0)


# The lab's checks ----------------------------------------------------------------


def _exchange_bytes(cfg, batch, size=4):
    values = sum(int(np.prod(cfg.input_shape(name))) for name in cfg.exchange) + cfg.classes // 2
    return 2 * batch * values * size


def test_check_exchange_bytes_accepts_the_answer_and_explains_mistakes():
    exercises.check_exchange_bytes(_exchange_bytes)
    with pytest.raises(AssertionError, match="not done yet"):
        exercises.check_exchange_bytes(lambda *a: (_ for _ in ()).throw(NotImplementedError()))
    with pytest.raises(AssertionError, match="backward pass"):
        exercises.check_exchange_bytes(lambda c, b, s=4: _exchange_bytes(c, b, s) // 2)
    with pytest.raises(AssertionError, match="2012 exchange layers"):  # hard-coded to the 2012 pattern
        exercises.check_exchange_bytes(
            lambda c, b, s=4: _exchange_bytes(c.replace(exchange=EXCHANGE_2012), b, s)
        )
    with pytest.raises(AssertionError, match="4-byte elements"):
        exercises.check_exchange_bytes(lambda c, b, s=4: _exchange_bytes(c, b, 4))
    # the one int rule (checks.answer_types.is_int): a NumPy integer passes, a float or a bool does not
    exercises.check_exchange_bytes(lambda c, b, s=4: np.int64(_exchange_bytes(c, b, s)))
    with pytest.raises(AssertionError, match="a float, where an int is asked for"):
        exercises.check_exchange_bytes(lambda c, b, s=4: float(_exchange_bytes(c, b, s)))
    with pytest.raises(AssertionError, match="numpy.float64, where an int is asked for"):
        exercises.check_exchange_bytes(lambda c, b, s=4: np.float64(_exchange_bytes(c, b, s)))
    from cudalearn.nn.alexnet import exchange_bytes as bound  # a binding the check cannot replace

    with pytest.raises(AssertionError, match="called alexnet.exchange_bytes"):
        exercises.check_exchange_bytes(lambda c, b, s=4: sum(f + g for f, g in bound(c, b, s).values()))


def _split_forward(net, x):
    h = [x.to(d) for d in net.devices]
    for name in alexnet.LAYERS:
        if name in net.cfg.exchange:
            h = [torch.cat([net.send(h[0], 0, c, name), net.send(h[1], 1, c, name)], 1) for c in (0, 1)]
        h = [net.stage(name, c, h[c]) for c in (0, 1)]
    return torch.cat([h[0], net.send(h[1], 1, 0, alexnet.OUTPUT)], 1)


def test_check_split_forward_accepts_the_answer_and_catches_shortcuts():
    exercises.check_split_forward(_split_forward)
    exercises.check_split_forward(_split_forward, AlexNetConfig.small(exchange=()), batch=2)
    with pytest.raises(AssertionError, match="net.stage and net.send"):
        exercises.check_split_forward(lambda net, x: net(x))
    with pytest.raises(AssertionError, match="net.stage and net.send"):
        exercises.check_split_forward(lambda net, x: TwoColumnAlexNet.forward(net, x))

    def sends_too_much(net, x):
        for name in alexnet.LAYERS[1:]:
            net.send(torch.zeros(2, 2), 0, 1, name)  # a useless extra transfer at every layer
        return _split_forward(net, x)

    with pytest.raises(AssertionError, match="do not exchange"):
        exercises.check_split_forward(sends_too_much)

    def fixed_2012(net, x):
        net.cfg = net.cfg.replace(exchange=EXCHANGE_2012)
        return _split_forward(net, x)

    with pytest.raises(AssertionError, match=r"exchanges at \('conv2', 'fc7'\)"):
        exercises.check_split_forward(fixed_2012)
    with pytest.raises(AssertionError, match="not done yet"):
        exercises.check_split_forward(lambda net, x: None)
    with pytest.raises(AssertionError, match="without a gradient"):
        exercises.check_split_forward(lambda net, x: _split_forward(net, x).detach())


def test_check_split_forward_catches_device_mixups_that_compute_the_right_numbers_on_one_cpu():
    """Logits gathered on column 1, sends to the wrong column, images not moved: right on a CPU only."""

    def forward(net, x, *, start=None, gather=None):
        h = start(net, x) if start else [x.to(dev) for dev in net.devices]
        for name in alexnet.LAYERS:
            if name in net.cfg.exchange:
                h = [torch.cat([net.send(h[0], 0, c, name), net.send(h[1], 1, c, name)], 1) for c in (0, 1)]
            h = [net.stage(name, c, h[c]) for c in (0, 1)]
        if gather:
            return gather(net, h)
        return torch.cat([h[0], net.send(h[1], 1, 0, alexnet.OUTPUT)], dim=1)

    on_column_1 = {"gather": lambda net, h: torch.cat([net.send(h[0], 0, 1, alexnet.OUTPUT), h[1]], dim=1)}
    cases = [
        (on_column_1, r"gathered with sends \['0->1'\]"),
        ({"start": lambda net, x: [x, x]}, r"column 0 and 1 computed on the images x as they came"),
        ({"start": lambda net, x: [x.to(net.devices[0]), x]}, r"column 1 computed on the images x"),
    ]
    for kwargs, match in cases:
        with pytest.raises(AssertionError, match=match):
            exercises.check_split_forward(lambda net, x, kw=kwargs: forward(net, x, **kw))

    def swapped(net, x):  # net.send(t, dst, src, ...): right bytes and routes, each half at the wrong column
        h = [x.to(dev) for dev in net.devices]
        for name in alexnet.LAYERS:
            if name in net.cfg.exchange:
                h = [torch.cat([net.send(h[0], c, 0, name), net.send(h[1], c, 1, name)], 1) for c in (0, 1)]
            h = [net.stage(name, c, h[c]) for c in (0, 1)]
        return torch.cat([h[0], net.send(h[1], 1, 0, alexnet.OUTPUT)], dim=1)

    with pytest.raises(AssertionError, match=r"delivers t to column \d, but column \d used the result"):
        exercises.check_split_forward(swapped)
    exercises.check_split_forward(forward)  # and the right answer, written this way, passes


def test_check_split_forward_sends_only_plain_data_across():
    """Under `cudalearn grade` only data crosses: the experiment's result holds no model or config."""
    got = split_checks.split_experiment(_split_forward, AlexNetConfig.small(), 2, 0)
    allowed = (str, int, float, bool, type(None), torch.Tensor)

    def plain(v):
        if isinstance(v, dict):
            return all(isinstance(k, str) and plain(x) for k, x in v.items())
        if isinstance(v, (list, tuple)):
            return all(plain(x) for x in v)
        return isinstance(v, allowed)

    assert plain(got), got.keys()


def test_check_step_memory():
    def answer(n, optimizer, size=4):
        w = n * size
        buffers = {"sgd": 0, "momentum": 1, "adam": 2}[optimizer]
        return {"weights": w, "gradients": w, "optimizer": buffers * w}

    exercises.check_step_memory(answer)
    exercises.check_step_memory(answer, cases=[("adam", torch.bfloat16)])
    with pytest.raises(AssertionError, match="Adam two"):
        exercises.check_step_memory(lambda n, o, s=4: {**answer(n, o, s), "optimizer": n * s})
    with pytest.raises(AssertionError, match="keys"):
        exercises.check_step_memory(lambda n, o, s=4: {"weights": n * s})
    with pytest.raises(AssertionError, match="a float"):
        exercises.check_step_memory(lambda n, o, s=4: {k: v * 1.0 for k, v in answer(n, o, s).items()})
    with pytest.raises(AssertionError, match=r"here 2\)"):
        exercises.check_step_memory(lambda n, o, s=4: answer(n, o, 4))


# The loader's timeline and the chapter's figures ------------------------------


def test_ideal_loader_schedule_starts_empty_and_reaches_the_larger_of_the_two_times():
    serial = input_pipeline.ideal_loader_schedule(10.0, 3.0, workers=0, batches=5)
    assert serial["pass_ms"] == pytest.approx(5 * 10.0 + 3.0)  # each step hides behind the next batch
    short = input_pipeline.ideal_loader_schedule(170.0, 20.0, workers=8, batches=12)
    assert short["pass_ms"] == pytest.approx(2 * 170.0 + 4 * 20.0)  # two rounds; four steps after the last
    assert [r["worker"] for r in short["batches"]] == [i % 8 for i in range(12)]
    for r in short["batches"]:
        assert r["made"][1] <= r["wait"][1] <= r["step"][0] < r["step"][1]
    long = input_pipeline.ideal_loader_schedule(170.0, 20.0, workers=8, batches=2000)
    assert long["pass_ms"] / 2000 == pytest.approx(max(170.0 / 8, 20.0), rel=0.02)
    gpu_bound = input_pipeline.ideal_loader_schedule(10.0, 20.0, workers=8, batches=2000)
    assert gpu_bound["pass_ms"] / 2000 == pytest.approx(20.0, rel=0.01)


@pytest.mark.parametrize("workers", [0, 2])
def test_loader_timeline_records_every_batch_in_order(workers):
    photos = input_pipeline.JpegCrops(8, source=40, crop=32)
    seen = []
    tl = input_pipeline.loader_timeline(
        photos, lambda x, y: seen.append(x.shape), "cpu", batch=2, workers=workers
    )
    assert len(tl["batches"]) == 4 and len(seen) == 4 * 2  # two passes, four batches each
    assert {r["worker"] for r in tl["batches"]} == ({-1} if workers == 0 else {0, 1})
    ends = [r["step"][1] for r in tl["batches"]]
    assert ends == sorted(ends) and ends[-1] <= tl["pass_ms"]
    for r in tl["batches"]:
        assert r["made"][0] <= r["made"][1] <= r["wait"][1] + 1e-6 <= r["copy"][0] + 1e-6
        assert r["copy"][1] <= r["step"][0] <= r["step"][1]


def _cross_arrows(fig):
    from matplotlib.patches import FancyArrowPatch

    from cudalearn.chapters.ch07.figures.alexnet import CROSS

    return sum(
        isinstance(p, FancyArrowPatch) and matplotlib.colors.same_color(p.get_edgecolor(), CROSS)
        for p in fig.axes[0].patches
    )


@pytest.mark.parametrize("exchange", [EXCHANGE_2012, EXCHANGE_EVERY, ("fc7",)])
def test_two_columns_draws_one_crossing_arrow_per_column_and_exchange(exchange):
    from cudalearn.chapters.ch07.figures import alexnet as drawn

    fig = drawn.two_columns(AlexNetConfig.original(exchange=exchange))
    assert _cross_arrows(fig) == 2 * len(exchange) + 1  # both directions per exchange, and the logits
    plt.close(fig)


def test_memory_and_loader_figures_draw_what_they_are_given():
    from cudalearn.chapters.ch07.figures import loader
    from cudalearn.chapters.ch07.figures import memory as memory_figures

    mem = step_memory.static_bytes(1000, "momentum")
    mem.activations = 4000
    plt.close(memory_figures.step_bytes(mem, 4, 10_000, "a card"))
    run = {"fits": True, "held": {"cuda:0": 100}, "peak": {"cuda:0": 300}, "ms": 2.0}
    oom = {"batch": 8, "cap_bytes": 250, "free": {"float32, unsplit": run, "smaller batch": run},
           "capped": {"float32, unsplit": {"fits": False}, "smaller batch": {"fits": True}}}  # fmt: skip
    fig = memory_figures.oom_remedies(oom)
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels[0] == "float32, unsplit" and len(labels) == 2  # the baseline on top
    assert any("OUT OF MEMORY" in t.get_text() for t in fig.axes[0].texts)
    plt.close(fig)
    ideal = input_pipeline.ideal_loader_schedule(10.0, 3.0, workers=2, batches=4)
    fig = loader.timelines(
        {"a": ideal, "b": input_pipeline.ideal_loader_schedule(10.0, 3.0, workers=0, batches=4)}
    )
    assert len(fig.axes) == 2
    plt.close(fig)
