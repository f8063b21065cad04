"""Judging: one pytest session's runs judged against a reference. The session wires a
measurer to a gate (`session.py`); a test's assertions (`assertions.py`), paired A/B
(`paired.py`) and `llmperf compare` (`saved_reference.py`) are references the gate
(`gate.py`) judges with; under it, the history's lines (`history_log.py`), another run
when the verdict wants one (`more_runs.py`), unused entries (`unused.py`), the stored
reference (`reference.py`) and the noise of a change (`noise.py`).

It may import measuring/ and everything below it (report/, store/, baselines/, workload/,
servers/, metrics/, stats/, util/), never collecting/, commands/ or the plugin. Inside,
each layer imports only those below it (pyproject.toml's contract).
"""
