"""Lab 10, exercise 4: `online_combine`, the online-softmax rule that merges two chunks' (max, sum).

Three small pairs first (a wrong answer matched against `mistakes.combine_mistakes`), then the
chunks' states folded left to right and as a tree must give the two-pass result in float64.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from cudalearn import checks
from cudalearn.chapters.ch10 import mistakes


def _state(x: np.ndarray) -> tuple[float, float]:
    """(max, sum of exp(x - max)) of a chunk, two passes in float64: what a combine must reproduce."""
    m = float(x.max())
    return m, float(np.exp(x - m).sum())


def _answer(combine: Callable, a: tuple, b: tuple) -> tuple[float, float]:
    """combine(*a, *b) as two floats, or an AssertionError saying what it returned."""
    call = f"online_combine({a[0]!r}, {a[1]!r}, {b[0]!r}, {b[1]!r})"
    try:
        got = checks.call_student(combine, "online_combine", *a, *b)
    except (OverflowError, ZeroDivisionError, ValueError) as e:
        raise AssertionError(
            f"`{call}` raised {type(e).__name__}: {e}. With m = max(m_a, m_b), the factors exp(m_a - m) and "
            f"exp(m_b - m) are at most 1: nothing overflows."
        ) from None
    if got is None:
        raise AssertionError(f"`{call}` is None: {checks.NOT_DONE} (Did your function `return m, d`?)")
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        raise AssertionError(f"`{call}` is {got!r}: return a pair (m, d), e.g. `return m, d`.")
    try:
        m, d = float(got[0]), float(got[1])
    except (TypeError, ValueError):
        raise AssertionError(f"`{call}` is {got!r}: m and d must be numbers.") from None
    return m, d


def _same_state(got: tuple, expected: tuple) -> bool:
    """m equal, d within 1e-12 relative (NaN matching NaN, for the mistakes' values)."""
    m_ok = got[0] == expected[0] or (math.isnan(got[0]) and math.isnan(float(expected[0])))
    return m_ok and bool(np.isclose(got[1], expected[1], rtol=1e-12, atol=0, equal_nan=True))


PROBES = (((3.0, 2.0), (5.0, 4.0)), ((5.0, 4.0), (3.0, 2.0)), ((-math.inf, 0.0), (2.5, 1.5)))


def _check_probes(online_combine: Callable) -> None:
    """Raise unless online_combine is right on three small pairs; name the mistake that gives all it gave."""
    answers = []
    for a, b in PROBES:
        m = max(a[0], b[0])
        expected = (m, a[1] * math.exp(a[0] - m) + b[1] * math.exp(b[0] - m))
        answers.append((a, b, expected, _answer(online_combine, a, b)))
    wrong = [(a, b, e, g) for a, b, e, g in answers if not _same_state(g, e)]
    if not wrong:
        return
    a, b, expected, got = wrong[0]
    named = [
        why
        for why in mistakes.combine_mistakes(*PROBES[0])
        if all(_same_state(g, mistakes.combine_mistakes(pa, pb)[why]) for pa, pb, _, g in answers)
    ]
    hint = (
        "m = max(m_a, m_b), d = d_a * exp(m_a - m) + d_b * exp(m_b - m): each sum moved to the new max's "
        "scale, then added."
    )
    if named:
        hint = named[0]
    elif math.isnan(got[0]) or math.isnan(got[1]):
        hint = (
            "NaN: with the empty state (-inf, 0), take m = max(m_a, m_b) first; then exp(m_a - m) is "
            "exp(-inf) = 0, while a difference of two infinities, or 0 * inf, is NaN. " + hint
        )
    call = f"online_combine({a[0]}, {a[1]}, {b[0]}, {b[1]})"
    raise AssertionError(f"`{call}` is {got!r}, expected {expected!r}. Hint: {hint}")


def check_online_combine(
    online_combine: Callable[[float, float, float, float], tuple],
    cases: Sequence[tuple[int, int]] | None = None,
) -> None:
    """Lab 10: online_combine(m_a, d_a, m_b, d_b) -> (m, d), two chunks' state together; cases (n, chunks).

    A state is (m, d) = (max of the chunk, sum of exp(x - m)) (Milakov and
    Gimelshein, 2018). Three small pairs first, then folding the chunks'
    states from (-inf, 0), left to right and as a tree, must give the two-pass
    (max(x), sum(exp(x - max(x)))) in float64: m exactly, d to 1e-12. The
    logits are near 1000, where exp overflows float64.
    """
    _check_probes(online_combine)
    rng = np.random.default_rng(40 + len(cases or ()))
    for n, chunks in cases or [(50, 5), (17, 3), (64, 8)]:
        x = rng.standard_normal(n) * 4 + 1000.0
        cuts = np.sort(rng.choice(np.arange(1, n), chunks - 1, replace=False))
        states = [_state(c) for c in np.split(x, cuts)]
        expected = _state(x)
        left = (-math.inf, 0.0)
        for st in states:
            left = _answer(online_combine, left, st)
        level = states
        while len(level) > 1:
            pairs = [level[i : i + 2] for i in range(0, len(level), 2)]
            level = [_answer(online_combine, *p) if len(p) == 2 else p[0] for p in pairs]
        for order, got in (("left to right from (-inf, 0)", left), ("as a tree, pairs of pairs", level[0])):
            if not _same_state(got, expected):
                raise AssertionError(
                    f"folding the states of {chunks} chunks of {n} logits {order} gives (m, d) = {got!r}, "
                    f"expected the two-pass {expected!r} (m exactly, d to 1e-12). Hint: m = max(m_a, m_b), "
                    f"d = d_a * exp(m_a - m) + d_b * exp(m_b - m); the logits are near 1000, where exp(x) "
                    f"alone overflows even float64."
                )
