"""The report's sections: the verdict matrix, and the provenance table (which GPUs ran each server)."""

from pytest_llmperf.baselines.compare import compare
from pytest_llmperf.report.sections import MatrixCell, provenance_table, verdict_matrix
from tests.unit.report.documents import REGRESSED, REL5, document, gate_entry, run_entry


def test_the_provenance_table_names_each_servers_gpu_slot_and_an_older_documents_docker_host():
    # Documents of sessions that drove several Docker engines name each server's engine.
    runs = [
        run_entry("a", 8, 100.0, provenance={"target": "gpu", "gpu_ids": ["0", "1"], "docker_host": "ssh://gpu-a"}),
        run_entry("b", 8, 90.0, provenance={"target": "gpu", "gpu_ids": ["2", "3"], "docker_host": "ssh://gpu-b"}),
    ]
    header, rows = provenance_table(document(runs, [], ["a", "b"]))
    assert header == ["", "a", "b"]
    assert ["GPU ids (slot)", "0,1", "2,3"] in rows
    assert ["Docker host", "ssh://gpu-a", "ssh://gpu-b"] in rows
    _, plain = provenance_table(document([run_entry("c", 8, 80.0)], [], ["c"]))
    assert [row[0] for row in plain] == ["model", "target"]  # one engine, no slot: no such rows


def test_the_matrix_keeps_the_worse_of_two_tests_cells_and_shows_a_gate_without_verdicts():
    passing = compare("decode_tok_s", 100.0, 101.0, REL5, "higher")
    gates = [
        gate_entry("t::recorded", "a", 1, [], outcome="recorded", message="recorded decode_tok_s"),
        gate_entry("t::one", "b", 8, [passing]),
        gate_entry("t::two", "b", 8, [REGRESSED], outcome="fail"),
    ]
    metrics, rows = verdict_matrix(document([], gates, ["a", "b"]))
    assert metrics == ["decode_tok_s", "run"]  # the failing column first
    assert [(server, c) for server, c, _ in rows] == [("b", 8), ("a", 1)]  # and the failing row
    assert rows[0][2] == {"decode_tok_s": MatrixCell("regressed", "-20.0%", "gate-2")}
    assert rows[1][2] == {"run": MatrixCell("recorded", "recorded", "gate-0")}
