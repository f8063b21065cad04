"""Collecting: the pytest side of the plugin, what `plugin.py`'s hooks delegate to, over
the collected tests. The session's state (`state.py`), the marker parsed once
(`marker.py`), the collected items ordered, selected, sharded and grouped (`items.py`),
the checks before any server starts (`checks.py`), the `llmperf` fixture (`fixture.py`),
the session's start and end (`starting.py`, `ending.py`); and the plain values they use:
the test order (`ordering.py`), servers by name (`selection.py`), shards (`shard.py`), the
GPU plan (`plan.py`), pytest-xdist (`xdist_support.py`), the target built
(`targets.py`), the metric names a test asserts (`asserted_names.py`).

It may import every room below it (commands' doctor and store, judging/, measuring/, the
vocabulary at the root, report/, store/, baselines/ and under); nothing below imports it.
Inside, each layer imports only those below it (pyproject.toml's contract).
"""
