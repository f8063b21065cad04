"""Servers: a `ServerSpec`, and the targets that start it (the simulator, Docker, a local
vLLM, an external endpoint) into an `Endpoint`, their pool, readiness, provenance and
teardown.

It may import sim/ (to start the simulated server), metrics/, stats/ and util/; never
workload/ (its sibling) or anything above.
"""
