"""The knee of a capacity search in the report: each SLO's value against load from the
document's `capacities`, its limit, the capacity found and the baseline's; drawn as one
SVG per search, listed with the page's other plots."""

import pytest

from pytest_llmperf.baselines.compare import compare
from pytest_llmperf.report import series
from pytest_llmperf.report.html import html_report
from tests.unit.report.documents import REL5, document, gate_entry

TEST = "t.py::test_capacity"


def capacity_document():
    probes = [
        {"load": 1, "outcome": "met", "runs": 1, "values_ms": {"ttft_ms_p99": 120.0, "tpot_ms_p99": 20.0}},
        {"load": 16, "outcome": "broken", "runs": 1, "values_ms": {"ttft_ms_p99": 2600.0, "tpot_ms_p99": 95.0}},
        {"load": 8, "outcome": "met", "runs": 2, "values_ms": {"ttft_ms_p99": 900.0, "tpot_ms_p99": 41.0}},
        {"load": 9, "outcome": "broken", "runs": 2, "values_ms": {"ttft_ms_p99": 2410.0, "tpot_ms_p99": None}},
        {"load": 12, "outcome": "undecided", "runs": 3, "values_ms": {"ttft_ms_p99": 2100.0, "tpot_ms_p99": 70.0}},
    ]
    found = {
        "test": TEST,
        "server": "m",
        "line": "capacity 8 users (8-9): p99 TTFT 2,000 ms exceeded at 9 (2,410 ms); p99 TPOT held; 8 runs, 20 s",
        "capacity": 8,
        "interval": [8, 9],
        "runs": 8,
        "seconds": 20.0,
        "verdict": "capacity 12 -> 8 users, regressed: p99 TTFT 2,000 ms exceeded at 9 (2,410 ms); p99 TPOT held",
        "over": "concurrency",
        "slos": [
            {"name": "ttft_ms_p99", "label": "p99 TTFT", "limit_ms": 2000.0},
            {"name": "tpot_ms_p99", "label": "p99 TPOT", "limit_ms": 80.0},
        ],
        "probes": probes,
        "first_broken": "ttft_ms_p99",
    }
    regressed = compare("capacity", 12.0, 8.0, REL5, "higher", update_command=f"pytest '{TEST}' --update-baselines")
    recorded = [  # the baseline's search, kept in its entry's provenance
        {"load": 8, "outcome": "met", "runs": 1, "values_ms": {"ttft_ms_p99": 600.0, "tpot_ms_p99": 30.0}},
        {"load": 12, "outcome": "met", "runs": 2, "values_ms": {"ttft_ms_p99": 1500.0, "tpot_ms_p99": 52.0}},
        {"load": 13, "outcome": "broken", "runs": 2, "values_ms": {"ttft_ms_p99": 2300.0, "tpot_ms_p99": 60.0}},
    ]
    gate = gate_entry(
        TEST,
        "m",
        16,
        [regressed],
        outcome="fail",
        baseline_provenance={"vllm_version": "0.32.0", "capacity_probes": recorded},
    )
    return document([], [gate], ["m"], capacities=[found])


def test_each_slo_of_a_search_against_load_with_its_limit_the_capacity_and_the_baselines():
    ttft, tpot = series.knees(capacity_document())
    assert (ttft.label, ttft.limit_ms, ttft.first_broken) == ("p99 TTFT", 2000.0, True)
    assert ttft.probes == [
        (1.0, 120.0, "met"),
        (8.0, 900.0, "met"),
        (9.0, 2410.0, "broken"),
        (12.0, 2100.0, "undecided"),
        (16.0, 2600.0, "broken"),
    ]
    assert (ttft.capacity, ttft.baseline_capacity) == (8.0, 12.0)
    assert ttft.baseline_probes == [(8.0, 600.0, "met"), (12.0, 1500.0, "met"), (13.0, 2300.0, "broken")]
    assert (tpot.label, tpot.limit_ms, tpot.first_broken) == ("p99 TPOT", 80.0, False)
    assert [load for load, _, _ in tpot.probes] == [1.0, 8.0, 12.0, 16.0]  # no value at 9: no point


def test_a_search_without_probes_or_a_document_without_searches_has_no_knee():
    doc = capacity_document()
    assert series.knees({**doc, "capacities": [{**doc["capacities"][0], "probes": []}]}) == []
    assert series.knees({**doc, "capacities": [{k: v for k, v in doc["capacities"][0].items() if k != "probes"}]}) == []
    assert series.knees(document([], [], [])) == []


def test_the_knee_plot_draws_the_slo_line_and_the_capacity_and_the_page_lists_it():
    pytest.importorskip("matplotlib")
    from pytest_llmperf.report import plots

    made, errors = plots.render_plots(capacity_document())
    assert errors == []
    (knee,) = made
    assert knee.name == "knee_m_t.py-test_capacity"
    texts = (
        "SLO 2000 ms",
        "SLO 80 ms",
        "capacity 8",
        "baseline capacity 12",
        "baseline's probes",
        "p99 TTFT (broken first)",
    )
    for text in texts:
        assert text in knee.svg, text
    page = html_report(capacity_document(), made)
    assert "Capacity knee: m (t.py::test_capacity)" in page and "plots/knee_m_t.py-test_capacity.svg" in page
