"""Pure statistics: quantiles, medians, spreads and their pooling, the error of a change,
error propagation, the block bootstrap. Imports nothing of the plugin; the verdict rule
(baselines/compare.py) and the paired request-level estimators (metrics/uncertainty.py)
build on it."""
