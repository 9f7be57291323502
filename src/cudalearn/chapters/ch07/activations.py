"""ReLU against tanh on the digits: the steps ratio as a band that a rerun keeps (Chapter 7a)."""

from __future__ import annotations

#: (upper bound of tanh's steps over ReLU's, the words for the band below it), in order.
_BANDS = ((1, "fewer steps than ReLU"), (2, "1 to 2 times ReLU's steps"), (4, "2 to 4 times ReLU's steps"))


def ratio_band(ratio: float) -> str:
    """Chapter 7a: tanh's steps over ReLU's in words, by band (a step more or less keeps the band)."""
    for upper, words in _BANDS:
        if ratio < upper:
            return words
    return "4 or more times ReLU's steps"
