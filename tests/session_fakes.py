"""Fakes a PerfSession takes through its constructor (session.PerfSession's runner=)."""


class FakeRunner:
    """A Runner whose runs and warm-ups are what the test says: `measure_with(endpoint,
    requests, workload, speed)` returns each run's RunResult, `warmup_with(endpoint,
    prompts, config)` each server warm-up's figures (None: none given)."""

    def __init__(self, measure_with=None, warmup_with=None):
        self.measure_with = measure_with
        self.warmup_with = warmup_with

    def measure(self, endpoint, requests, workload, speed, label=""):
        return self.measure_with(endpoint, requests, workload, speed)

    def warmup(self, endpoint, prompts, config):
        return self.warmup_with(endpoint, prompts, config) if self.warmup_with is not None else None
