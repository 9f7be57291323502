"""CPU augmentation overlapping GPU work: JPEG crops decoded per sample, when each batch is ready (Chapter 7).

`JpegCrops` is a data set that does on the CPU, per sample, what the 2012
input pipeline did: decode a JPEG, crop at random, flip. `loader_timeline`
records when a DataLoader's workers made each batch and when the training
step waited for, copied and trained on it; `ideal_loader_schedule` is the
same timeline from a model of the DataLoader, for given CPU and GPU times.
"""

from __future__ import annotations

import io
import time

import numpy as np
import torch


class JpegCrops(torch.utils.data.Dataset):
    """JPEG-compressed photos, decoded and augmented on the CPU per sample, as in 2012 (Chapter 7).

    Item i is decoded from JPEG, cropped at a random `crop` x `crop` window,
    flipped left-right with probability 1/2, and scaled to [-1, 1]: a
    float32 tensor (3, crop, crop) and a label (i % classes). The sources
    are `count` squares of `source` pixels cut from scikit-learn's two
    sample photos. The randomness of item i comes from (seed, i, epoch),
    so a run is reproducible whatever the number of workers. The epoch
    lives in shared memory: a DataLoader's workers keep the copy of the
    data set they got when they started (with `persistent_workers=True`,
    once per loader), and setting `epoch` between passes still reaches them.
    """

    def __init__(
        self, count: int, source: int = 256, crop: int = 227, classes: int = 1000, seed: int = 0
    ) -> None:
        from PIL import Image
        from sklearn.datasets import load_sample_images

        photos = load_sample_images().images
        rng = np.random.default_rng(seed)
        self.jpegs = []
        for i in range(count):
            photo = photos[i % len(photos)]
            top = int(rng.integers(0, photo.shape[0] - source + 1))
            left = int(rng.integers(0, photo.shape[1] - source + 1))
            buf = io.BytesIO()
            Image.fromarray(photo[top : top + source, left : left + source]).save(buf, "JPEG", quality=90)
            self.jpegs.append(buf.getvalue())
        self.source, self.crop, self.classes, self.seed = source, crop, classes, seed
        self._epoch = torch.zeros(1, dtype=torch.int64).share_memory_()  # one value every worker reads

    @property
    def epoch(self) -> int:
        """The pass the random windows are drawn for; set it before a pass, workers see it."""
        return int(self._epoch[0])

    @epoch.setter
    def epoch(self, value: int) -> None:
        self._epoch[0] = value

    def __len__(self) -> int:
        return len(self.jpegs)

    def decode(self, i: int) -> np.ndarray:
        """Item i's photo, decoded: (source, source, 3) uint8."""
        from PIL import Image

        return np.asarray(Image.open(io.BytesIO(self.jpegs[i])).convert("RGB"))

    def window(self, i: int) -> tuple[int, int, bool]:
        """(top, left, flipped) of item i's random crop in this epoch."""
        rng = np.random.default_rng((self.seed, i, self.epoch))
        top, left = (int(v) for v in rng.integers(0, self.source - self.crop + 1, size=2))
        return top, left, bool(rng.integers(0, 2))

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        top, left, flipped = self.window(i)
        patch = self.decode(i)[top : top + self.crop, left : left + self.crop]
        if flipped:
            patch = patch[:, ::-1]
        chw = np.ascontiguousarray(patch.transpose(2, 0, 1))  # channels first
        x = torch.from_numpy(chw).float().div_(127.5).sub_(1.0)
        return x, i % self.classes


class _TimedItems(torch.utils.data.Dataset):
    """A dataset whose batches also carry (worker, start, end) on the shared monotonic clock (Chapter 7)."""

    def __init__(self, dataset: torch.utils.data.Dataset) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitems__(self, indices: list[int]) -> tuple[float, list]:
        return time.perf_counter(), [self.dataset[i] for i in indices]


def _timed_collate(timed: tuple[float, list]) -> tuple[torch.Tensor, torch.Tensor, tuple[int, float, float]]:
    """Collate a batch of `_TimedItems` and stamp who made it and when (-1: the training process)."""
    start, items = timed
    x, y = torch.utils.data.default_collate(items)
    info = torch.utils.data.get_worker_info()
    return x, y, (-1 if info is None else info.id, start, time.perf_counter())


def _clock(cuda: bool):
    """A point in time: a CUDA event recorded on the current stream, or the host clock."""
    if not cuda:
        return time.perf_counter()
    event = torch.cuda.Event(enable_timing=True)
    event.record()
    return event


def loader_timeline(
    dataset: torch.utils.data.Dataset,
    step,
    device: str | torch.device,
    *,
    batch: int,
    workers: int = 0,
    pinned: bool = False,
    passes: int = 2,
) -> dict:
    """When each batch was made, waited for, copied and trained on, in the last of `passes` (Chapter 7).

    `step(x, y)` trains on one batch. Times are milliseconds from the start
    of the timed pass: `made` by a loader worker (or by the training
    process, worker -1), `wait` in the training loop for the next batch,
    `copy` and `step` on the device (CUDA events on a GPU, the clock on
    the CPU). Earlier passes start the workers and warm up.
    """
    device = torch.device(device)
    cuda = device.type == "cuda"
    loader = torch.utils.data.DataLoader(
        _TimedItems(dataset),
        batch_size=batch,
        num_workers=workers,
        pin_memory=pinned,
        persistent_workers=workers > 0,
        collate_fn=_timed_collate,
    )
    for _ in range(passes):
        if cuda:
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        rows, marks = [], []
        it = iter(loader)
        if cuda:  # the device is idle: the origin event completes at about the host time read next
            origin = torch.cuda.Event(enable_timing=True)
            origin.record()
            t_origin = time.perf_counter()
        while True:
            asked = time.perf_counter()
            try:
                xb, yb, (worker, made0, made1) = next(it)
            except StopIteration:
                break
            got = time.perf_counter()
            mark = [_clock(cuda)]
            xb, yb = xb.to(device, non_blocking=pinned), yb.to(device, non_blocking=pinned)
            mark.append(_clock(cuda))
            step(xb, yb)
            mark.append(_clock(cuda))
            marks.append(mark)
            rows.append({"worker": worker, "made": [made0, made1], "wait": [asked, got]})
        if cuda:
            torch.cuda.synchronize(device)
        end = time.perf_counter()
    ms = lambda t: (t - t0) * 1e3  # noqa: E731
    for row, m in zip(rows, marks, strict=True):
        if cuda:
            c0, c1, s1 = (t_origin + origin.elapsed_time(e) / 1e3 for e in m)
        else:
            c0, c1, s1 = m
        row["made"] = [ms(t) for t in row["made"]]
        row["wait"] = [ms(t) for t in row["wait"]]
        row["copy"], row["step"] = [ms(c0), ms(c1)], [ms(c1), ms(s1)]
    return {"workers": workers, "pinned": pinned, "batch": batch, "pass_ms": ms(end), "batches": rows}


def ideal_loader_schedule(
    cpu_ms: float, gpu_ms: float, *, workers: int, batches: int, prefetch: int = 2
) -> dict:
    """The pass `loader_timeline` would record if a batch took `cpu_ms` to make, `gpu_ms` to train.

    A model of PyTorch's DataLoader (Chapter 7): batch i goes to worker
    i % workers (0 workers: the training process makes it, after queuing
    the previous step); at most `prefetch` x workers batches are
    requested ahead; the loop takes the batches in order; the device runs
    one step at a time. Copies are taken as free. Same format as
    `loader_timeline`.
    """
    rows, got, gpu_free, free = [], [], 0.0, [0.0] * max(workers, 1)
    for i in range(batches):
        if workers == 0:
            start = got[-1] if got else 0.0
            made = [start, start + cpu_ms]
        else:
            w = i % workers
            asked = got[i - prefetch * workers] if i >= prefetch * workers else 0.0
            start = max(free[w], asked)
            made = [start, start + cpu_ms]
            free[w] = made[1]
        asked_at = got[-1] if got else 0.0
        got.append(max(made[1], asked_at))
        step = [max(got[-1], gpu_free), max(got[-1], gpu_free) + gpu_ms]
        gpu_free = step[1]
        worker = -1 if workers == 0 else i % workers
        rows.append({"worker": worker, "made": made, "wait": [asked_at, got[-1]],
                     "copy": [got[-1]] * 2, "step": step})  # fmt: skip
    return {"workers": workers, "pinned": workers > 0, "batch": None, "pass_ms": gpu_free,
            "batches": rows}  # fmt: skip


def batch_make_ms(timeline: dict) -> tuple[float, float]:
    """Chapter 7a: median ms to make a batch: (a worker, overlapped pass; the process alone, serial pass)."""
    made = {
        k: [r["made"][1] - r["made"][0] for r in timeline[k]["batches"]] for k in ("serial", "overlapped")
    }
    return float(np.median(made["overlapped"])), float(np.median(made["serial"]))
