"""Lab 7's third check: step_memory, the bytes a training step holds, against what real optimisers hold."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F

from cudalearn import checks
from cudalearn.chapters.ch07.checks._calls import call_with_hint, require_int
from cudalearn.chapters.ch07.step_memory import optimizer_state_bytes, parameter_bytes
from cudalearn.nn.alexnet import AlexNet, AlexNetConfig
from cudalearn.runtime import device

#: the optimisers a network is trained one step with, by the name step_memory is given
_OPTIMIZERS = {
    "sgd": lambda p: torch.optim.SGD(p, lr=0.01),
    "momentum": lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9),
    "adam": lambda p: torch.optim.Adam(p, lr=1e-3),
}


def _real_step_memory(
    cfg: AlexNetConfig, optimizer: str, dtype: torch.dtype
) -> tuple[int, int, dict[str, int]]:
    """(parameters, element size, {weights, gradients, optimizer} bytes) after one real step in `dtype`."""
    torch.manual_seed(0)
    net = AlexNet(cfg.replace(dropout=0.0)).to(dtype)
    opt = _OPTIMIZERS[optimizer](net.parameters())
    x = torch.randn(2, cfg.in_channels, cfg.image, cfg.image, dtype=dtype)
    F.cross_entropy(net(x).float(), torch.tensor([0, 1])).backward()
    opt.step()
    real = {
        "weights": parameter_bytes(net),
        "gradients": sum(p.grad.numel() * p.grad.element_size() for p in net.parameters()),
        "optimizer": optimizer_state_bytes(opt),
    }
    n = sum(p.numel() for p in net.parameters())
    return n, torch.empty((), dtype=dtype).element_size(), real


def check_step_memory(
    step_memory: Callable[[int, str, int], dict[str, int]],
    cases: Sequence[tuple[str, torch.dtype]] | None = None,
    cfg: AlexNetConfig | None = None,
) -> None:
    """Lab 7: step_memory(n_params, optimizer, bytes_per_element) matches what real optimisers hold.

    For each (optimizer, dtype) case, a network is built in that dtype and
    trained one step with the real optimiser; its parameters, gradients and
    optimiser state are counted and compared with the student's answer
    (ints). Default: SGD, momentum and Adam in float32, Adam in float16.
    """
    cfg = cfg or AlexNetConfig.small()
    cases = cases or [
        ("sgd", torch.float32),
        ("momentum", torch.float32),
        ("adam", torch.float32),
        ("adam", torch.float16),
    ]
    for optimizer, dtype in cases:
        with device.one_torch_thread():
            n, size, real = _real_step_memory(cfg, optimizer, dtype)
        call = f"step_memory({n}, {optimizer!r}, {size})"
        got = call_with_hint(step_memory, "step_memory", n, optimizer, size)
        if got is None:
            raise AssertionError(f"`step_memory` returned None: {checks.NOT_DONE}")
        if not isinstance(got, dict) or set(got) != set(real):
            missing = sorted(set(real) - set(got)) if isinstance(got, dict) else []
            raise AssertionError(
                f"{call} should return a dict with the keys {sorted(real)}, got {got!r}."
                + (f" Missing: {missing} (the gradients are as large as the weights)." if missing else "")
            )
        for kind, expected in real.items():
            name = f"{call}[{kind!r}]"
            require_int(got[kind], name, "bytes are whole numbers: multiply ints, do not divide.")
            checks.check_equal(
                got[kind],
                expected,
                name=name,
                hint=(
                    "plain SGD keeps no state, SGD with momentum one buffer per parameter, Adam two "
                    "(its running means of the gradient and of its square); each element takes "
                    "bytes_per_element bytes."
                    if kind == "optimizer"
                    else f"one element of bytes_per_element (here {size}) bytes per parameter."
                ),
            )
    try:  # bytes_per_element left out: float32's 4
        got = call_with_hint(step_memory, "step_memory", 1000, "adam")
    except TypeError as e:
        raise AssertionError(
            f"step_memory(1000, 'adam') without bytes_per_element raised TypeError: {e}. Hint: the "
            f"default is float32's 4 bytes: keep `bytes_per_element=4` in the signature."
        ) from None
    checks.check_equal(
        got,
        {"weights": 4000, "gradients": 4000, "optimizer": 8000},
        name="step_memory(1000, 'adam') without bytes_per_element",
        hint="the default is float32's 4 bytes: keep `bytes_per_element=4` in the signature.",
    )
