"""A residual block's fc1 and fc2 as lab 8's checks read them (residual block, first-to-last ratios)."""

from __future__ import annotations

from typing import Any


def layer_data(layer: Any) -> dict:
    """What a check needs to know of a block's fc1 or fc2: its type and, if a Linear, its parameters."""
    from torch import nn

    if not isinstance(layer, nn.Linear):
        return {"type": type(layer).__name__ if layer is not None else None}
    return {
        "type": "Linear",
        "in": int(layer.in_features),
        "out": int(layer.out_features),
        "weight": layer.weight.detach().clone(),
        "bias": None if layer.bias is None else layer.bias.detach().clone(),
    }


def verify_layers(data: dict, width: int) -> None:
    """Raise unless the experiment found fc1 and fc2, two distinct Linear(width, width)."""
    for name in ("fc1", "fc2"):
        layer = data[name]
        if layer["type"] != "Linear":
            got = "no attribute of that name" if layer["type"] is None else f"a {layer['type']}"
            raise AssertionError(
                f"ResidualBlock({width}) has no `{name}` Linear layer ({got}): create "
                f"`self.{name} = nn.Linear(width, width)` in __init__ (after super().__init__())."
            )
        if (layer["in"], layer["out"]) != (width, width):
            raise AssertionError(
                f"`{name}` is Linear({layer['in']}, {layer['out']}); the block keeps the width: "
                f"use nn.Linear(width, width), here Linear({width}, {width})."
            )
        if layer["bias"] is None:
            raise AssertionError(
                f"`{name}` has no bias (bias=False): the exercise's layers are nn.Linear(width, width), "
                f"which keep their bias. Without biases a deep stack of ReLU blocks can lose every "
                f"activation, and exercise 3's gradients come out exactly 0."
            )
    if data["same_layer"]:
        raise AssertionError(
            "`fc1` and `fc2` are the same layer object: the branch has two layers with their own "
            "weights, so create two nn.Linear(width, width)."
        )
