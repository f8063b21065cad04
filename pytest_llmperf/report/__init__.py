"""Reporting: the report document of a session (`document.py`), and every form it takes:
the terminal summary, report.json, summary.md, report.html and its plots, the CI step
summary and JUnit properties, `llmperf compare` and `llmperf history` in words, and a
`Judgement` put in words (`gate_record.py`).

It may import baselines/ and everything under it; nothing of judging/, measuring/,
collecting/ or commands/, which import it (the gate itself imports nothing of it).
"""
