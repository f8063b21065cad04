"""A metric is one registry row: a row added to a copy of the registry (put in force with
`registry.using`) is gated by default, judged by the gate, and shown in the terminal
tables, the JUnit properties and the report, with no other module told of it."""

import pytest

from pytest_llmperf import ServerSpec
from pytest_llmperf.baselines.outcome import PerfFailure
from pytest_llmperf.judging.session import PerfSession
from pytest_llmperf.metrics.registry import (
    REGISTRY,
    Direction,
    Metric,
    Scaling,
    Tolerance,
    UnknownMetric,
    is_known,
    metric,
    using,
)
from pytest_llmperf.options import resolve_options
from pytest_llmperf.report.ci import junit_properties
from pytest_llmperf.report.document import build_report
from pytest_llmperf.report.html import html_report
from pytest_llmperf.report.markdown import markdown_summary
from pytest_llmperf.report.terminal import measured_table, terminal_lines
from pytest_llmperf.workload.workload import resolve_workload
from tests.session_fakes import FakeRunner
from tests.unit.judging.test_session import FakeTarget, make_result

NAME = "output_tokens_per_request"
ROW = Metric(
    NAME,
    Direction.HIGHER,
    "tokens",
    Scaling.NONE,
    1,
    "output tokens per completed request",
    Tolerance("relative", 0.05),
    gated=True,
    column="out tok/req",
    key=True,
    derive=lambda figures: (figures["total_output_tokens"] or 0) / (figures["completed"] or 1),
)
EXTENDED = REGISTRY.with_rows(ROW)
SERVER = ServerSpec(name="m", model="org/m")
WORKLOAD = resolve_workload({"num_prompts": 4}, 8)
TEST = "tests/test_x.py::test_decode[8]"


def session(tmp_path, tokens: int, **cli) -> PerfSession:
    values = {"llmperf_sim": True, "llmperf_repetitions": "1", **cli}
    options = resolve_options(lambda d: values.get(d), lambda n: "")
    return PerfSession(
        options,
        FakeTarget(),
        tmp_path,
        runner=FakeRunner(lambda endpoint, requests, workload, speed: make_result(100.0, tokens=tokens)),
        prompts=lambda endpoint, workload: [],
        server_down=lambda endpoint: None,
    )


def test_the_copy_has_the_row_and_the_registry_in_force_outside_using_does_not():
    with using(EXTENDED):
        assert metric(NAME) is ROW and NAME in EXTENDED.gated(speculative=False, slos=False)
    assert not is_known(NAME) and NAME not in REGISTRY.by_name
    with pytest.raises(UnknownMetric):
        metric(NAME)


def test_a_row_added_to_a_copy_is_gated_tabled_and_reported(tmp_path):
    with using(EXTENDED):
        recorder = session(tmp_path, 100, llmperf_update_baselines=True)
        recorder.bind(recorder.run(SERVER, WORKLOAD), TEST).assert_no_regression()
        recorder.finish()
        assert NAME in recorder.gates[-1].message  # recorded beside the gated decode figure

        shorter = session(tmp_path, 80)  # the same decode speed, 20 % fewer tokens per request
        run = shorter.bind(shorter.run(SERVER, WORKLOAD), TEST)
        with pytest.raises(PerfFailure) as failure:
            run.assert_no_regression()  # no names: what the registry gates on this run
        gate = shorter.gates[-1]
        statuses = {v.metric: str(v.status) for v in gate.verdicts}
        assert statuses == {"steady_decode_tok_s": "pass", NAME: "regressed"}
        assert NAME in str(failure.value) and "100.0" in str(failure.value) and "80.0" in str(failure.value)

        doc = build_report(shorter)
        header, *rows = measured_table(doc["runs"])
        assert "out tok/req" in header and "80.0" in rows[-1]
        summary = "\n".join(terminal_lines(doc))
        assert "out tok/req" in summary and NAME in summary and "REGRESSED" in summary.upper()

        properties = dict(
            junit_properties(
                [(SERVER.name, 8, run.figures)],
                [(g.server, g.concurrency, str(g.outcome), g.verdicts) for g in shorter.gates],
            )
        )
        assert properties[f"llmperf.m@8.{NAME}"] == "80.0"
        assert properties[f"llmperf.m@8.{NAME}.verdict"] == "regressed"
        assert properties[f"llmperf.m@8.{NAME}.baseline"] == "100.0"

        for page in (markdown_summary(doc), html_report(doc)):
            assert "out tok/req" in page and NAME in page and "80.0" in page
