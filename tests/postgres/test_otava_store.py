"""Apache Otava's own PostgreSQL importer, configured by docs/examples/otava.yaml, reads
the store's history view and finds the change point `llmperf history --store` reports."""

from __future__ import annotations

import datetime as dt
import uuid
from pathlib import Path

import pytest

from pytest_llmperf.baselines import drift
from pytest_llmperf.commands.cli import main as llmperf
from pytest_llmperf.store.postgres import PostgresStore
from pytest_llmperf.store.rows import history_rows

otava_config = pytest.importorskip("otava.config")
from otava.analysis import compute_change_points_orig  # noqa: E402,F401  (Otava's detector is installed)
from otava.data_selector import DataSelector  # noqa: E402
from otava.importer import PostgresImporter  # noqa: E402
from otava.postgres import Postgres, PostgresConfig  # noqa: E402
from otava.series import AnalysisOptions  # noqa: E402

OTAVA_YAML = Path(__file__).resolve().parents[2] / "docs" / "examples" / "otava.yaml"
TEST = "llmperf"
TARGET, SERVER, METRIC = "gpu-h200", "qwen3.6-27b-fp8-mtp", "decode_tok_s"


# Otava's selector reads the last 365 days: the nights end yesterday.
FIRST = dt.datetime.now(dt.timezone.utc).replace(hour=2, minute=0, second=0, microsecond=0) - dt.timedelta(days=33)


def night(store: PostgresStore, day: int, value: float) -> None:
    when = (FIRST + dt.timedelta(days=day)).isoformat()
    line = {
        "date": when,
        "server": SERVER,
        "concurrency": 8,
        "metric": METRIC,
        "value": value,
        "outcome": "pass",
        "target": TARGET,
        "workload": "w",
    }
    session = {
        "id": uuid.uuid4().hex,
        "session_group": f"night-{day}",
        "shard": 1,
        "shards": 1,
        "host": "box",
        "ci_job_url": None,
        "git_commit": f"c{day}",
        "target": "gpu",
        "image": "img",
        "started_at": when,
        "report_dir": None,
    }
    store.write_batch(
        {
            "session": session,
            "finished_at": when,
            "exit_status": 0,
            "document": None,
            "runs": [],
            "verdicts": [],
            "history": history_rows([line]),
        }
    )


def test_otava_reads_the_store_with_the_docs_config_and_finds_llmperf_histories_change_point(
    store_url, postgres_server, capsys
) -> None:  # type: ignore[no-untyped-def]
    store = PostgresStore(store_url)
    store.check()
    wiggle = [0.4, -0.3, 0.1, -0.5, 0.2, 0.0, 0.3, -0.2]
    values = [100 + wiggle[d % 8] for d in range(20)] + [92 + wiggle[d % 8] for d in range(20, 32)]
    for day, value in enumerate(values):
        night(store, day, value)

    capsys.readouterr()
    assert llmperf(["history", "--store", store_url, "--server", SERVER]) == 0
    shown = capsys.readouterr().out
    (ours,) = drift.change_points([line["value"] for line in store.history_lines(target=TARGET)])
    changed = (FIRST + dt.timedelta(days=20)).date()
    assert ours.index == 20 and changed.isoformat() in shown  # night 20's date, as llmperf history prints it

    config = otava_config.load_config_from_file(str(OTAVA_YAML))
    test = config.tests[TEST]
    dbname = store_url.rsplit("/", 1)[1]
    importer = PostgresImporter(Postgres(PostgresConfig("127.0.0.1", postgres_server.port, "postgres", "", dbname)))
    selector = DataSelector()  # Otava's --branch: the series
    selector.branch = f"{TARGET}/{SERVER}/c8/{METRIC}"
    series = importer.fetch_data(test, selector)
    options = AnalysisOptions()
    options.orig_edivisive, options.max_pvalue, options.min_magnitude = True, drift.PVALUE, drift.MIN_CHANGE
    points = [cp for group in series.analyze(options).change_points_by_time for cp in group.changes]
    assert [dt.datetime.fromtimestamp(series.time[cp.index], dt.timezone.utc).date() for cp in points] == [changed]
