"""Lab 7's first check: exchange_bytes, the bytes that cross between AlexNet's two columns per step."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from cudalearn import checks
from cudalearn.chapters.ch07.checks._calls import call_with_hint, require_int, watch
from cudalearn.nn import alexnet
from cudalearn.nn.alexnet import AlexNetConfig


def exchange_experiment(exchange_bytes: Callable, cfg: AlexNetConfig, batch: int, size: int | None) -> dict:
    """Lab 7, in the student's process: exchange_bytes(cfg, batch, size), and the package calls it made.

    size None calls exchange_bytes(cfg, batch), leaving bytes_per_element to its default.
    """
    args = (cfg, batch) if size is None else (cfg, batch, size)
    with watch(alexnet.exchange_bytes) as called:
        got = call_with_hint(exchange_bytes, "exchange_bytes", *args)
    return {"value": got, "called": sorted(set(called))}


def _exchange_hint(got: Any, cfg: AlexNetConfig, batch: int, size: int) -> str:
    """What the usual wrong answers to exchange_bytes look like, recognised from their value."""
    per_layer = alexnet.exchange_bytes(cfg, batch, size)
    total = sum(f + b for f, b in per_layer.values())
    logits = sum(per_layer[alexnet.OUTPUT])
    values = total // (2 * size)  # values that cross forward
    if got == total // 2:
        return "that is half: the gradients cross back in the backward pass, as many bytes as went forward."
    if got == total - logits:
        return (
            "you left out the logits: column 1's half of the output is gathered on column 0's device "
            "for the loss, and its gradient goes back."
        )
    if got == total // 2 - per_layer[alexnet.OUTPUT][0]:
        return "count both directions and the logits gathered for the loss."
    if batch > 1 and got * batch == total:
        return (
            f"that is the count for one image: every image of the batch crosses, multiply by batch ({batch})."
        )
    if got == total + 2 * batch * (cfg.classes - cfg.classes // 2) * size:
        return (
            "you counted all the logits: only column 1's half, cfg.classes // 2 per image, crosses to "
            "column 0 (column 0's half is already there), and its gradient back."
        )
    if size != 4 and got == 2 * values * 4:
        return f"that is the answer for 4-byte elements: multiply by bytes_per_element (here {size})."
    if cfg.exchange != alexnet.EXCHANGE_2012:
        other = cfg.replace(exchange=alexnet.EXCHANGE_2012)
        if got == sum(f + b for f, b in alexnet.exchange_bytes(other, batch, size).values()):
            return (
                f"that is the answer for the 2012 exchange layers {alexnet.EXCHANGE_2012}; this network "
                f"exchanges at cfg.exchange = {cfg.exchange}: loop over cfg.exchange."
            )
    return (
        "at each layer of cfg.exchange the whole input of the layer crosses once forward "
        "(each column sends its half) and its gradient once backward; add the logits."
    )


def check_exchange_bytes(
    exchange_bytes: Callable[[AlexNetConfig, int, int], int],
    cases: Sequence[tuple[AlexNetConfig, int, int]] | None = None,
) -> None:
    """Lab 7: exchange_bytes(cfg, batch, bytes_per_element) = bytes crossing between the columns per step.

    Default cases: the 2012 network (batch 128, float32), the small one, the small one exchanging at
    conv2 and fc7 with 2-byte elements. The answer must be an int and must not call
    `alexnet.exchange_bytes` (the reference it is compared with).
    """
    cases = cases or [
        (AlexNetConfig.original(), 128, 4),
        (AlexNetConfig.small(), 4, 4),
        (AlexNetConfig.small(exchange=("conv2", "fc7")), 3, 2),
    ]
    for cfg, batch, size in cases:
        call = f"exchange_bytes(cfg with exchange={cfg.exchange}, batch={batch}, bytes_per_element={size})"
        out = checks.student_side(exchange_experiment, exchange_bytes, cfg, batch, size)
        if out["called"]:
            raise AssertionError(
                f"{call} called alexnet.exchange_bytes, the package's own answer, which the exercise "
                f"asks you not to use. Hint: add up batch * prod(cfg.input_shape(name)) for each name in "
                f"cfg.exchange, and the logits, yourself."
            )
        got = out["value"]
        require_int(
            got, call, "count with integers: np.prod(...) of each shape and cfg.classes // 2 (not /)."
        )
        expected = sum(f + b for f, b in alexnet.exchange_bytes(cfg, batch, size).values())
        hint = _exchange_hint(got, cfg, batch, size) if got is not None and got != expected else ""
        checks.check_equal(got, expected, name=call, hint=hint)
    cfg, batch = cases[0][:2]  # and once with bytes_per_element left out: float32's 4 bytes
    try:
        got = checks.student_side(exchange_experiment, exchange_bytes, cfg, batch, None)["value"]
    except TypeError as e:
        raise AssertionError(
            f"exchange_bytes(cfg, {batch}) without bytes_per_element raised TypeError: {e}. Hint: the "
            f"default is float32's 4 bytes: keep `bytes_per_element=4` in the signature."
        ) from None
    expected = sum(f + b for f, b in alexnet.exchange_bytes(cfg, batch, 4).values())
    checks.check_equal(
        got,
        expected,
        name=f"exchange_bytes(cfg, {batch}) without bytes_per_element",
        hint="the default is float32's 4 bytes: keep `bytes_per_element=4` in the signature.",
    )
