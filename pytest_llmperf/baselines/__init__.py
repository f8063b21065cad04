"""Verdicts and baselines: the noise-aware verdict rule (`compare.py`), tolerances parsed
once into bounds, the baseline files (their layout, validation and store), a typed entry,
the history and its change points, the cross-checks of outputs, and the vocabulary every
judge returns: the gate's `Judgement` and a session's `outcome`.

It may import workload/, servers/, capacity/, metrics/, stats/ and util/; report/, store/,
measuring/ and judging/ import it, never the other way round.
"""
