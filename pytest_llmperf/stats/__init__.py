"""Pure statistics (quantiles, medians, spreads, the error of a change, the block
bootstrap), importing nothing of the plugin."""
