"""Where a session's results go past its own report folder: the history JSONL beside the
baselines (the default, baselines/history.py), or one store every shard of a night writes
to (`--llmperf-store URL`), opened from its URL's scheme (scheme.py) behind one protocol
(protocol.py): a PostgreSQL database (postgres.py) or history files (files.py)."""
