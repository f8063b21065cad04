"""Measuring: runs, repetitions, warm-ups and fresh starts (`measurer.py`), the checks
before any server starts (`preflight.py`), the session's prompts (`prompt_book.py`),
whether a run can be judged at all (`validity.py`) and the measured run a test gets
(`measured.py`).

It knows nothing of verdicts: it may import report/, store/, baselines/' files and
vocabulary, workload/, servers/, metrics/, stats/ and util/, never judging/ or the verdict
rule (`baselines/compare.py`, a contract of its own), collecting/ or commands/.
"""
