"""A Reference overrides only what differs from the base class; StoredBaseline returns
what it finds (an entry, a Refused, or None) and raises nothing."""

from pytest_llmperf.baselines.entry import BaselineEntry
from pytest_llmperf.baselines.store import BaselineStore
from pytest_llmperf.judging.reference import Reference, Refused, StoredBaseline
from pytest_llmperf.measuring.measured import MeasuredRun
from pytest_llmperf.metrics.failures import ErrorBudget
from pytest_llmperf.options import resolve_options
from pytest_llmperf.servers.spec import ServerSpec
from pytest_llmperf.workload.workload import resolve_workload

OPTIONS = resolve_options(lambda dest: {"llmperf_sim": True}.get(dest), lambda name: "")
SERVER = ServerSpec(name="m", model="org/m")
ENTRY = BaselineEntry(workload={}, provenance={}, metrics={"decode_tok_s": {"value": 100.0, "samples": [100.0]}})


def run_of(concurrency=8, max_tokens=256, results=()):
    workload = resolve_workload({"num_prompts": 4, "max_tokens": max_tokens}, concurrency)
    return MeasuredRun(SERVER, workload, list(results), {"decode_tok_s": [100.0]}, {"target": "sim"})


class Fixed(Reference):
    """A reference that changes only its entry."""

    def __init__(self):
        self.options = OPTIONS

    def entry(self, run, base, baseline_folder):
        return ENTRY


def identity(run):
    return {**run.workload.to_dict(), "model": run.server.model}


def test_a_reference_gets_the_base_class_defaults():
    reference, run = Fixed(), run_of()
    assert reference.keeps_history
    assert reference.entry(run, None, "sim") is ENTRY
    assert reference.spread_pools("sim", run, ["decode_tok_s"]) == {}
    assert reference.where(run, "baselines/sim/m.json") == "baselines/sim/m.json"
    assert reference.title(run, "baselines/sim/m.json", "sim") == "m @ concurrency 8 vs baselines/sim/m.json [sim]"
    assert reference.invalid(run, None, ErrorBudget(0.0)) == "no request completed"
    assert reference.update_command("t.py::test_a") == "pytest 't.py::test_a' --llmperf-sim --update-baselines"


def test_stored_baseline_finds_an_entry_none_or_a_refusal(tmp_path):
    store = BaselineStore(tmp_path)
    reference = StoredBaseline(OPTIONS, store, identity)
    run = run_of()
    assert reference.entry(run, None, "sim") is None  # nothing recorded

    store.record("sim", "m", 8, {"decode_tok_s": [100.0]}, identity(run), {"target": "sim"})
    found = reference.entry(run, None, "sim")
    assert isinstance(found, BaselineEntry) and found.figures == {"decode_tok_s": 100.0}

    other = reference.entry(run_of(max_tokens=128), None, "sim")  # only another workload's entry at 8
    assert isinstance(other, Refused) and other.others == 1
    assert any(d.startswith("max_tokens") for d in other.differences)
    message = other.message("baselines/sim/m.json", 8, "pytest --update-baselines")
    assert "baselines/sim/m.json" in message and "pytest --update-baselines" in message
