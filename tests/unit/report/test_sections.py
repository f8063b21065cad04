"""The report's provenance table: which host and which GPUs of it ran each server."""

from pytest_llmperf.report.sections import provenance_table
from tests.unit.report.documents import document, run_entry


def test_the_provenance_table_names_each_servers_docker_host_and_gpu_slot():
    runs = [
        run_entry("a", 8, 100.0, provenance={"target": "gpu", "gpu_ids": ["0", "1"], "docker_host": "ssh://gpu-a"}),
        run_entry("b", 8, 90.0, provenance={"target": "gpu", "gpu_ids": ["2", "3"], "docker_host": "ssh://gpu-b"}),
    ]
    header, rows = provenance_table(document(runs, [], ["a", "b"]))
    assert header == ["", "a", "b"]
    assert ["GPU ids (slot)", "0,1", "2,3"] in rows
    assert ["Docker host", "ssh://gpu-a", "ssh://gpu-b"] in rows
    _, plain = provenance_table(document([run_entry("c", 8, 80.0)], [], ["c"]))
    assert [row[0] for row in plain] == ["target"]  # one engine, no slot: no such rows
