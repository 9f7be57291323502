"""Where AlexNet's two columns run: two GPUs, one, or the CPU, the fallback said in a sentence (Chapter 7).

`place_columns(2)` gives two GPUs when the process has them, else both
columns on one GPU, else the CPU, and says which in one sentence; asking
for two GPUs on a one-GPU machine (a Colab runtime) gives that sentence and
the fallback, never a crash (`strict=True` turns it into
`multigpu.NotEnoughGPUs`).
"""

from __future__ import annotations

from dataclasses import dataclass

from cudalearn.dist import multigpu


@dataclass(frozen=True)
class Placement:
    """Where the two columns run: `devices[c]` for column c; `kind` and a sentence (Chapter 7)."""

    devices: tuple[str, str]
    kind: str  # 'two GPUs', 'one GPU' or 'CPU'
    note: str

    def __str__(self) -> str:
        return self.note


def _gpu_name(i: int) -> str:
    """GPU i's name as PyTorch gives it, or 'GPU i' where it cannot (Chapter 7)."""
    import torch

    try:
        return torch.cuda.get_device_name(i)
    except (RuntimeError, AssertionError):
        return f"GPU {i}"


def place_columns(want: int = 2, *, gpus: int | None = None, strict: bool = False) -> Placement:
    """Devices for the two columns: `want` GPUs (1 or 2) if there are that many, else the best fallback.

    `gpus` pretends the machine has that many GPUs (to show the fallbacks
    anywhere). With fewer GPUs than asked for, `strict=True` raises
    `NotEnoughGPUs` with the same sentence instead of falling back.
    """
    if want not in (1, 2):
        raise ValueError(f"want is 1 or 2 GPUs (one per column at most), not {want}")
    have = multigpu.gpu_count() if gpus is None else gpus
    if have >= 2 and want == 2:
        names = f"{_gpu_name(0)} and {_gpu_name(1)}" if gpus is None else "two GPUs"
        return Placement(
            ("cuda:0", "cuda:1"),
            "two GPUs",
            f"Two GPUs ({names}): column 0 on cuda:0, column 1 on cuda:1; activations cross between "
            "them at the exchange layers.",
        )
    if have >= 1:
        note = (
            "One GPU asked for: both columns on cuda:0; the exchanges copy nothing, "
            "but their bytes are still counted."
        )
        if want == 2:
            name = f" ({_gpu_name(0)})" if gpus is None else ""
            note = (
                f"You asked for two GPUs, but this process can use only {have}{name}. "
                "Falling back to one GPU: both columns "
                "run on cuda:0 and compute exactly the same thing; the exchanges copy nothing, but their "
                "bytes are still counted. (A Colab runtime has one GPU; a second needs a machine with two.)"
            )
            if strict:
                raise multigpu.NotEnoughGPUs(note)
        return Placement(("cuda:0", "cuda:0"), "one GPU", note)
    note = (
        "No GPU in this process: both columns run on the CPU and compute exactly the same thing; the "
        "exchanges copy nothing, but their bytes are still counted."
    )
    if strict:
        raise multigpu.NotEnoughGPUs(note)
    return Placement(("cpu", "cpu"), "CPU", note)
