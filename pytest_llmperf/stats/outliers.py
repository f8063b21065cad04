"""What is set aside as not the thing measured: an event among one cell's values between
sessions, and a disturbed run among one series' history.

They are two rules because they judge two things. A value is an event when it lies far
from the others in robust standard deviations (the Hampel identifier), which needs the
values to spread. A run's own noise is wild when it is many times the series' median
noise: the noises of a quiet series are often all equal, their robust spread 0, and the
Hampel identifier would then set nothing aside.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

EVENT = 8.0  # robust standard deviations (1.4826 MAD) from the median beyond which a value is an event
NOISY = 5.0  # a run this many times the series' median noise measured a disturbed box


def without_events(values: Sequence[float], least: int) -> list[float]:
    """`values` less those more than EVENT robust standard deviations from their median (the
    Hampel identifier); all of them when that would leave fewer than `least` or the MAD is 0."""
    centre = statistics.median(values)
    robust_sd = 1.4826 * statistics.median(abs(v - centre) for v in values)
    if robust_sd <= 0:
        return list(values)
    kept = [v for v in values if abs(v - centre) <= EVENT * robust_sd]
    return kept if len(kept) >= least else list(values)


def noise_bound(noises: Sequence[float]) -> float:
    """The noise over which a run measured a disturbed box: NOISY times the median of `noises`."""
    return NOISY * statistics.median(noises)
