"""The circular moving-block bootstrap: resamples of n ordered units in blocks, so units
that share state (requests sent in one wave) stay together."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

RESAMPLES = 1000
SEED = 20261201
MIN_BLOCKS = 3


def block_length(n: int, concurrency: int | None) -> int:
    """Requests per bootstrap block: one wave (`concurrency`), but at least MIN_BLOCKS blocks."""
    c = max(1, int(concurrency or 1))
    return max(1, min(c, n // MIN_BLOCKS))


def block_count(n: int, concurrency: int | None) -> int:
    """How many blocks n requests make: the bootstrap's independent units."""
    return -(-n // block_length(n, concurrency)) if n else 0


def block_indices(n: int, length: int, resamples: int, rng: np.random.Generator) -> NDArray[Any]:
    """`resamples` rows of n indices into 0..n-1, each row made of blocks of `length`
    consecutive indices (wrapping round) from random starts."""
    blocks = -(-n // length)
    starts = rng.integers(0, n, size=(resamples, blocks))
    idx = (starts[:, :, None] + np.arange(length)) % n
    return idx.reshape(resamples, -1)[:, :n]
