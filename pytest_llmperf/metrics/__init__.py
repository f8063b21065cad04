"""Figures: the metric registry (one row per metric: `registry.py`, `rows.py`), a run's
summary in real time, Prometheus deltas, goodput, concurrency, failures, the steady
window and the cross-checks of token counts and prompt lengths.

It may import stats/ and util/ only.
"""
