"""The `llmperf` command line: `bench`, `show`, `compare` and the rest (`cli.py`), the
shared store's commands (`store_cli.py`) and `llmperf doctor` (`doctor.py`).

`cli.py` sits at the top with the plugin and may import every room below. `store_cli.py`
and `doctor.py` sit just below the plugin's rooms (collecting/), which run doctor's
checks for `--llmperf-doctor`: they may import judging/ and everything under it, never
collecting/ or the plugin.
"""
