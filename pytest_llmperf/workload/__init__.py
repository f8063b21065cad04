"""Workloads: the datasets (ShareGPT, random, a user's JSONL) sampled as vLLM samples
them, the streaming client and its HTTP/1.1 protocol, the runner, its dispatch and
workers, and a run's raw result.

It may import metrics/, stats/ and util/; never servers/ (its sibling) or anything above.
"""
