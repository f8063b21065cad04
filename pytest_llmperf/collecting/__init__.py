"""The pytest side of the plugin: what `plugin.py`'s hooks delegate to. The session's state
(`state.py`), the marker parsed once (`marker.py`), the collected items ordered, selected,
sharded and grouped (`items.py`), the checks before any server starts (`preflight_hooks.py`),
the `llmperf` fixture (`fixture.py`), and the session's end: reports written, the store's
rows, the terminal summary (`ending.py`).

It may import every room below it (the session, judging, measuring, reporting, the store);
nothing below imports it.
"""
