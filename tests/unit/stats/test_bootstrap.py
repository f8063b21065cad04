"""The circular moving-block bootstrap's blocks and indices (stats/bootstrap.py)."""

import numpy as np
import pytest

from pytest_llmperf.stats.bootstrap import block_count, block_indices, block_length


@pytest.mark.parametrize("n, concurrency, length", [(97, 32, 32), (30, 32, 10), (16, 1, 1), (2, 8, 1)])
def test_blocks_are_one_wave_but_at_least_three(n, concurrency, length):
    assert block_length(n, concurrency) == length


def test_block_count_is_the_blocks_n_requests_fill():
    assert (block_count(97, 32), block_count(30, 32), block_count(0, 8)) == (4, 3, 0)


def test_block_indices_are_runs_of_consecutive_indices_wrapping_round():
    idx = block_indices(10, 4, 50, np.random.default_rng(0))
    assert idx.shape == (50, 10) and idx.min() >= 0 and idx.max() <= 9
    for row in idx:
        for start in (0, 4):  # the first two blocks are whole
            assert all((row[start + k] - row[start]) % 10 == k for k in range(4))
