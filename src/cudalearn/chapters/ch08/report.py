"""Chapter 8's training tables, and the degradation each of them must show (book cells that train or show).

`compare_depths` (in `model`) returns {network: {"layers", "skip", "train_loss", "test_acc", "runs", ...}}
for one run, on this machine or from a stored GPU run; `show_table` prints it and `check_depth_result`
raises when it no longer shows what the chapter's prose says about it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

#: The loss of a classifier that guesses among the 10 digits: ln 10.
CHANCE_LOSS = math.log(10)


def show_table(results: Mapping[str, dict], where: str) -> None:
    """Print one line per network: layers, final training loss and test accuracy, each a mean over the
    seeds with the lowest and highest seed's value beside it, since a mean can hide a failed run (Ch. 8)."""
    seeds = len(next(iter(results.values()))["runs"])
    print(where)
    print(f"means over {seeds} seed(s)" + (", then the lowest and highest seed's" if seeds > 1 else ""))
    print(f"{'network':15s} {'layers':>6s} {'train loss':>10s} {'':15s} {'test accuracy':>13s}")
    for name in sorted(results, key=lambda n: (results[n]["layers"], results[n]["skip"])):
        r = results[name]
        loss, acc = ([run[k] for run in r["runs"]] for k in ("train_loss", "test_acc"))
        loss_range = f"{min(loss):.4f}-{max(loss):.4f}" if seeds > 1 else ""
        acc_range = f"{min(acc):.3f}-{max(acc):.3f}" if seeds > 1 else ""
        means = f"{r['train_loss']:10.4f} {loss_range:>15s} {r['test_acc']:13.3f}"
        print(f"{name:15s} {r['layers']:6d} {means}  {acc_range}")


def check_depth_result(results: Mapping[str, dict], margin: float) -> None:
    """He et al.'s degradation, as the text states it: the deep plain net trains worse (Chapter 8).

    The deep plain network's training loss is over 5 times the shallow one's and the deep residual one's,
    the medium plain one (when trained) is already worse than the shallow one, and the deep residual
    network's test accuracy is within `margin` of the shallow one's or better.
    """
    loss = {name: r["train_loss"] for name, r in results.items()}
    assert loss["deep plain"] > 5 * loss["shallow plain"], "the deep plain net should train worse"
    if "medium plain" in loss:
        assert loss["medium plain"] > loss["shallow plain"], "the medium plain net should already be worse"
    assert loss["deep plain"] > 5 * loss["deep residual"], "the deep residual net should train better"
    acc = {name: r["test_acc"] for name, r in results.items()}
    assert acc["deep residual"] > acc["shallow plain"] - margin, "the deep residual net should not lose"
