"""The doctor's checks of a box, one room per thing checked, and each target kind's list
of them (`sets.py`), which its `TargetKind` carries (kinds.py). `llmperf doctor` and
`--llmperf-doctor` (doctor.py) run a kind's list and print it.

This package may import servers/ and util/ (the engine client, nvidia-smi's parser, the
secrets' redaction), never the options, the kinds or the session.
"""
