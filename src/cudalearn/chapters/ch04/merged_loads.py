"""The tracer's counts redone for the loads the compiler merged into 128-bit ones (Chapter 4).

The tracer sees the source: one 4-byte shared read per step `k`. The compiler merges a thread's four
reads of neighbouring, 16-byte-aligned words into one 128-bit load (`LDS.128`). `merged_read` finds
such reads in a trace and costs each merged one with the same bank model (a request of 16-byte
elements), with the hardware's floor of 2 wavefronts for a 128-bit load.
"""

from __future__ import annotations

import math

from cudalearn.trace import SharedRequest

MIN_WAVEFRONTS_128 = 2  # a 128-bit load takes at least 2 wavefronts, even with one address for all lanes


def line_of(report, text: str) -> int:
    """The number of the traced source line that contains `text` (Chapter 4)."""
    return next(line for line, stats in report.by_line.items() if text in stats.source)


def mergeable(four) -> bool:
    """Whether every lane's four successive reads are neighbouring words from a 16-byte boundary."""
    first = four[0].addresses
    steps = {tuple(r.addresses[i] - first[i] for r in four) for i in range(len(first))}
    return steps == {(0, 4, 8, 12)} and all(a % 16 == 0 for a in first)


def merged_read(report, text: str, array: str) -> tuple[float, float, float]:
    """(instructions, wavefronts, conflicts) per traced read of `array` on the line with `text`.

    A thread's four successive reads count as one 128-bit load if they are mergeable in every warp of
    block 0, else as traced; averaged over the warps of block 0 (Chapter 4)."""
    line, warps = line_of(report, text), math.prod(report.blockdim) // 32
    fours = [
        [report.shared_request(line, w, occurrence=k, array=array, store=False) for k in range(4)]
        for w in range(warps)
    ]
    if all(mergeable(four) for four in fours):
        wide = [SharedRequest(array, False, 16, f[0].lanes, f[0].addresses) for f in fours]  # 16 bytes a lane
        waves = sum(max(r.wavefronts, MIN_WAVEFRONTS_128) for r in wide)
        conflicts = sum(r.bank_conflicts for r in wide)
        return 1 / 4, waves / warps / 4, conflicts / warps / 4
    return 1, sum(f[0].wavefronts for f in fours) / warps, sum(f[0].bank_conflicts for f in fours) / warps
