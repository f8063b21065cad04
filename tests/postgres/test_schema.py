"""The store's schema on a real PostgreSQL: migrations from empty and from version 1."""

from __future__ import annotations

import psycopg
import pytest

from pytest_llmperf.store.postgres import LATEST, PostgresStore, StoreError


def test_an_empty_database_is_migrated_to_the_latest_version(store_url: str) -> None:
    store = PostgresStore(store_url)
    assert store.version() == 0
    assert store.migrate() == ["0001_initial", "0002_history_series"]
    assert store.version() == LATEST == 2
    assert store.migrate() == []  # nothing twice


def test_version_1_with_rows_migrates_to_2_and_keeps_them(store_url: str) -> None:
    store = PostgresStore(store_url)
    store.migrate(to=1)
    with psycopg.connect(store_url) as conn:
        conn.execute(
            "INSERT INTO llmperf_sessions (id, session_group, shard, shards, started_at) "
            "VALUES ('s1', 'g', 1, 1, now())"
        )
        conn.execute(
            "INSERT INTO llmperf_history (session_id, target, server, concurrency, metric, value, outcome, line, "
            "recorded_at) VALUES ('s1', 'sim', 'a', 1, 'tpot_ms', 5.0, 'pass', '{}', now())"
        )
    assert store.check() == 2
    with psycopg.connect(store_url) as conn:
        rows = conn.execute("SELECT series, value FROM llmperf_history_series").fetchall()
    assert rows == [("sim/a/c1/tpot_ms", 5.0)]


def test_a_newer_schema_is_refused(store_url: str) -> None:
    store = PostgresStore(store_url)
    store.migrate()
    with psycopg.connect(store_url) as conn:
        conn.execute("INSERT INTO llmperf_schema (version, name) VALUES (99, 'future')")
    with pytest.raises(StoreError, match="schema is version 99.*upgrade pytest-llmperf"):
        store.check()


def test_an_unreachable_store_names_the_url_without_its_password(postgres_server) -> None:  # type: ignore[no-untyped-def]
    url = f"postgresql://postgres:s3cret-pw@127.0.0.1:{postgres_server.port + 1}/nothing"
    with pytest.raises(StoreError) as caught:
        PostgresStore(url, connect_timeout=2).check()
    assert "s3cret-pw" not in str(caught.value)
    assert f"postgresql://postgres:***@127.0.0.1:{postgres_server.port + 1}/nothing" in str(caught.value)


def test_two_shards_writing_one_group_at_once_lose_nothing(store_url: str) -> None:
    import threading

    from pytest_llmperf.store.rows import history_rows

    PostgresStore(store_url).check()

    def shard(k: int) -> None:
        store = PostgresStore(store_url)
        session = {"id": f"s{k}", "session_group": "night", "shard": k, "shards": 2, "started_at": "2026-12-04T02:00Z"}
        store.start_session(session)
        for i in range(40):
            line = {
                "date": f"2026-12-04T02:{i:02d}Z",
                "server": f"m{k}",
                "concurrency": 1,
                "metric": "tpot_ms",
                "value": 5.0 + i,
                "outcome": "pass",
                "target": "gpu",
                "workload": f"w{i}",
            }
            store.write_batch(
                {
                    "session": session,
                    "finished_at": "2026-12-04T03:00Z",
                    "exit_status": 0,
                    "document": {"verdicts": []},
                    "runs": [],
                    "verdicts": [],
                    "history": history_rows([line]),
                }
            )

    threads = [threading.Thread(target=shard, args=(k,)) for k in (1, 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with psycopg.connect(store_url) as conn:
        assert conn.execute("SELECT count(*) FROM llmperf_history").fetchone()[0] == 80
        assert conn.execute("SELECT count(*) FROM llmperf_sessions WHERE session_group = 'night'").fetchone()[0] == 2
