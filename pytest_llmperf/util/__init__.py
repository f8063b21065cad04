"""Small helpers with one home each: files and caches, secrets, server HTTP pages.

The bottom layer: nothing here imports anything else of pytest_llmperf, and `sim/`
(self-contained) does not import this.
"""
