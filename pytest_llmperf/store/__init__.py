"""Where a session's results go past its own report folder: the history JSONL beside the
baselines (the default, baselines/history.py), or one PostgreSQL database that every shard
of a night writes to (`--llmperf-store postgresql://...`)."""
