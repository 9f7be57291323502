"""A warp request's cost: a shared one's wavefronts, a global one's 32-byte sectors (Chapters 2-4)."""

from cudalearn.trace.model import NUM_BANKS


def wavefronts(items, base, itemsize):
    """(wavefronts, ideal) of one shared request: max distinct words in a bank, ceil(words / 32)."""
    if itemsize == 4:
        words = {(base + off) >> 2 for _, off in items}
    else:
        words = set()
        for _, off in items:
            a = base + off
            words.update(range(a >> 2, ((a + itemsize - 1) >> 2) + 1))
    per_bank = [0] * NUM_BANKS
    for w in words:
        per_bank[w % NUM_BANKS] += 1
    return max(per_bank), -(-len(words) // NUM_BANKS)


def sectors_touched(items, itemsize):
    """Distinct 32-byte sectors touched by one global request."""
    if itemsize <= 4:
        return len({off >> 5 for _, off in items})
    sectors = set()
    for _, off in items:
        sectors.update(range(off >> 5, ((off + itemsize - 1) >> 5) + 1))
    return len(sectors)
