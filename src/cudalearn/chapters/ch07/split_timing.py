"""What the two-column split costs in time: the training step and the grouped convolutions timed (Chapter 7).

`split_step_figures` times a training step of an AlexNet unsplit, in two
columns on one GPU and on two (the stored figure `ch7.split_step`);
`grouped_conv_figures` times each grouped convolution as one and as two
halves (`ch7.grouped_conv`). Both run on GPUs only and time with
`multigpu.step_ms`, which waits for every device before the clock stops.
"""

from __future__ import annotations

import gc

import torch

from cudalearn.dist import multigpu
from cudalearn.nn.alexnet import CONVS, TrainStep


def split_step_figures(cfg, batch: int, steps: int) -> dict:
    """Chapter 7's `ch7.split_step`: a training step timed unsplit, in two columns on one GPU and on two.

    Each row holds `step_ms`'s figures and images/s; the split rows also
    the bytes their step moved between the columns; with two GPUs,
    `copy_gbs` is the speed of a 256 MiB copy from one GPU to the other.
    """
    plans = {
        "unsplit, one GPU": dict(devices=("cuda:0",)),
        "two columns, one GPU": dict(devices=("cuda:0", "cuda:0"), split=True),
    }
    if multigpu.gpu_count() >= 2:
        plans["two columns, two GPUs"] = dict(devices=("cuda:0", "cuda:1"), split=True)
    rows = {}
    for name, kw in plans.items():
        step = TrainStep(cfg, batch, **kw)
        t = multigpu.step_ms(step, step.devices, steps=steps)
        rows[name] = {**t, "images_per_s": batch / (t["median_ms"] * 1e-3)}
        if kw.get("split"):
            step.net.traffic.reset()
            step()
            multigpu.synchronize(step.devices)
            rows[name]["bytes_per_step"] = step.net.traffic.total()
        del step
        gc.collect()
        torch.cuda.empty_cache()
    out = {"batch": batch, "rows": rows}
    if multigpu.gpu_count() >= 2:
        a = torch.empty(2**26, device="cuda:0")  # 256 MiB of float32
        b = torch.empty(2**26, device="cuda:1")
        t = multigpu.step_ms(lambda: b.copy_(a), ("cuda:0", "cuda:1"), steps=10)
        out["copy_gbs"] = 4 * 2**26 / (t["median_ms"] * 1e-3) / 1e9
    return out


def _grouped_conv_ms(c_in: int, c_out: int, h: int, kernel: int, padding: int, batch: int, steps: int):
    """(grouped, as two halves): ms of forward + backward of one groups=2 convolution on cuda:0."""

    def conv(i, o, groups=1):
        return torch.nn.Conv2d(i, o, kernel, 1, padding, groups=groups).to("cuda:0")

    x = torch.randn(batch, c_in, h, h, device="cuda:0", requires_grad=True)
    grouped, left, right = conv(c_in, c_out, 2), conv(c_in // 2, c_out // 2), conv(c_in // 2, c_out // 2)
    a, b = x[:, : c_in // 2], x[:, c_in // 2 :]
    one = multigpu.step_ms(lambda: grouped(x).sum().backward(), ("cuda:0",), steps=steps)["median_ms"]
    two = multigpu.step_ms(lambda: (left(a).sum() + right(b).sum()).backward(), ("cuda:0",), steps=steps)[
        "median_ms"
    ]
    return one, two


def grouped_conv_figures(cfg, batch: int, steps: int = 20) -> dict:
    """Chapter 7's `ch7.grouped_conv`: each grouped convolution timed as one, and as two halves.

    For the convolutions of `cfg` whose columns do not exchange (conv2,
    conv4, conv5 in 2012), on `batch` random inputs on cuda:0: forward +
    backward of one `groups=2` convolution, and of two ordinary
    convolutions of half the channels each (what the two columns run), in
    milliseconds (`step_ms`).
    """
    out: dict = {"batch": batch}
    for name in CONVS[1:]:
        if cfg.groups(name) == 2:
            spec = cfg.convs[CONVS.index(name)]
            c_in, c_out, h = cfg.input_shape(name)[0], cfg.output_shape(name)[0], cfg.input_shape(name)[1]
            one, two = _grouped_conv_ms(c_in, c_out, h, spec.kernel, spec.padding, batch, steps)
            out[name] = {"grouped_ms": one, "halves_ms": two}
    return out
