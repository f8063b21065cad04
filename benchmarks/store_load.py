"""The shared store under a night's load, on a real PostgreSQL.

    python benchmarks/store_load.py                      # 16 writers x 1,000 runs, then the reads
    python benchmarks/store_load.py --writers 4 --runs 100 --series 50 --nights 30   # a quick look

Writes: `--writers` processes, each one shard of one session group, each writing
`--runs` runs through the plugin's own PostgresStore.write_batch (one transaction per
run: the run, its three verdicts and three history lines, as a finished session writes
them), all at once. It prints the rows written, the rows lost (expected minus counted in
the database: must be 0) and the p50/p99 latency of one write.

Reads: a store seeded with `--nights` nightly history lines for each of `--series` series
(a year of 500 by default), then one series read as the gate's confirmation reads it
(PostgresStore.history_lines), and the whole `llmperf history --store` (every series,
change points included) timed.

Size (--size): the seed suite's main command (the simulator, smoke profile) run once
with --llmperf-store, and what its session takes in the store, per table: rows and bytes.

Without --store it starts a throwaway PostgreSQL from Debian's binaries
(tests/postgres/server.py) and removes it after. Run it alone on the machine.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import io
import json
import multiprocessing
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from pytest_llmperf.commands.cli import main as llmperf  # noqa: E402
from pytest_llmperf.store.postgres import PostgresStore  # noqa: E402
from pytest_llmperf.store.rows import history_rows  # noqa: E402

METRICS = ("decode_tok_s", "tpot_ms", "acceptance_rate")


def session(group: str, shard: int, shards: int) -> dict:
    return {
        "id": uuid.uuid4().hex,
        "session_group": group,
        "shard": shard,
        "shards": shards,
        "host": f"gpu-box-{shard}",
        "ci_job_url": None,
        "git_commit": "0" * 40,
        "target": "gpu",
        "image": "vllm/vllm-openai:nightly",
        "started_at": dt.datetime.now(dt.timezone.utc).isoformat(),
        "report_dir": f"/artifacts/shard-{shard}",
    }


def batch(info: dict, position: int) -> dict:
    server = f"server-{position % 8}"
    date = dt.datetime.now(dt.timezone.utc).isoformat()
    lines = [
        {
            "date": date,
            "server": server,
            "concurrency": 8,
            "metric": m,
            "value": 100.0 + position % 7,
            "outcome": "pass",
            "target": "gpu",
            "workload": f"w{position}",
        }
        for m in METRICS
    ]
    return {
        "session": info,
        "finished_at": date,
        "exit_status": 0,
        "document": None,
        "runs": [
            {
                "position": position,
                "server": server,
                "concurrency": 8,
                "workload_identity": {"n": position},
                "repetitions": 3,
                "summary": {m: 100.0 for m in METRICS},
                "samples": {m: [99.0, 100.0, 101.0] for m in METRICS},
                "provenance": {"image": info["image"]},
                "artifact": info["report_dir"],
            }
        ],
        "verdicts": [
            {
                "test": f"test_{position}",
                "metric": m,
                "server": server,
                "concurrency": 8,
                "baseline": 100.0,
                "measured": 100.5,
                "change": 0.005,
                "noise": 0.01,
                "allowed": "-5%",
                "outcome": "pass",
            }
            for m in METRICS
        ],
        "history": history_rows(lines),
    }


def writer(args: tuple[str, str, int, int, int]) -> list[float]:
    url, group, shard, shards, runs = args
    store = PostgresStore(url)
    info = session(group, shard, shards)
    store.start_session(info)
    latencies = []
    for position in range(runs):
        started = time.perf_counter()
        store.write_batch(batch(info, position))
        latencies.append(time.perf_counter() - started)
    return latencies


def count(url: str, sql: str, params: tuple = ()) -> int:
    import psycopg

    with psycopg.connect(url) as conn:
        return int(conn.execute(sql, params).fetchone()[0])


def write_load(url: str, writers: int, runs: int) -> None:
    group = f"load-{uuid.uuid4().hex[:8]}"
    started = time.perf_counter()
    with multiprocessing.get_context("spawn").Pool(writers) as pool:
        latencies = [
            s
            for shard in pool.map(writer, [(url, group, k, writers, runs) for k in range(1, writers + 1)])
            for s in shard
        ]
    wall = time.perf_counter() - started
    per_run = 1 + 2 * len(METRICS)  # the run, its verdicts, its history lines
    expected = writers * runs * per_run
    where = "session_id IN (SELECT id FROM llmperf_sessions WHERE session_group = %s)"
    counted = sum(
        count(url, f"SELECT count(*) FROM {t} WHERE {where}", (group,))
        for t in ("llmperf_runs", "llmperf_verdicts", "llmperf_history")
    )
    q = statistics.quantiles(latencies, n=100)
    print(f"writes: {writers} processes x {runs} runs, one transaction per run ({per_run} rows), in {wall:.1f} s")
    print(f"  rows written {counted} of {expected}; rows lost {expected - counted}")
    print(f"  write latency p50 {q[49] * 1000:.1f} ms, p99 {q[98] * 1000:.1f} ms ({len(latencies) / wall:.0f} runs/s)")


def seed(url: str, series: int, nights: int) -> None:
    import psycopg

    start = dt.datetime(2025, 12, 1, 2, 0, tzinfo=dt.timezone.utc)
    with psycopg.connect(url) as conn:
        ids = [uuid.uuid4().hex for _ in range(nights)]
        with conn.cursor() as cur:
            with cur.copy(
                "COPY llmperf_sessions (id, session_group, shard, shards, started_at, finished_at) FROM STDIN"
            ) as copy:
                for night, sid in enumerate(ids):
                    when = start + dt.timedelta(days=night)
                    copy.write_row((sid, f"night-{night}", 1, 1, when, when))
            with cur.copy(
                "COPY llmperf_history (session_id, target, server, concurrency, metric, workload, "
                "recorded_at, value, outcome, line) FROM STDIN"
            ) as copy:
                for s in range(series):
                    server, metric = f"server-{s // len(METRICS)}", METRICS[s % len(METRICS)]
                    for night, sid in enumerate(ids):
                        when = (start + dt.timedelta(days=night)).isoformat()
                        value = (
                            100.0 + (3.0 if night > nights * 2 // 3 and s % 50 == 0 else 0.0) + (night * 7919 % 13) / 13
                        )
                        line = {
                            "date": when,
                            "server": server,
                            "concurrency": 8,
                            "metric": metric,
                            "value": value,
                            "outcome": "pass",
                            "target": "gpu-seeded",
                            "workload": "w",
                        }
                        copy.write_row(
                            (sid, "gpu-seeded", server, 8, metric, "w", when, value, "pass", json.dumps(line))
                        )
        conn.execute("ANALYZE")


def read_load(url: str, series: int, nights: int) -> None:
    started = time.perf_counter()
    seed(url, series, nights)
    print(
        f"reads: a store seeded with {nights} nights x {series} series ({series * nights} history lines) "
        f"in {time.perf_counter() - started:.1f} s"
    )
    store = PostgresStore(url)
    times = []
    for s in range(20):
        server, metric = f"server-{s * 7 % (series // len(METRICS))}", METRICS[s % len(METRICS)]
        t0 = time.perf_counter()
        lines = store.history_lines(target="gpu-seeded", servers=[server], metrics=[metric])
        times.append(time.perf_counter() - t0)
        assert len(lines) == nights, len(lines)
    print(
        f"  one series ({nights} lines): median {statistics.median(times) * 1000:.1f} ms, "
        f"slowest {max(times) * 1000:.1f} ms of 20 reads (a fresh connection each)"
    )
    out = io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(out):
        code = llmperf(["history", "--store", url])
    elapsed = time.perf_counter() - t0
    flagged = sum(1 for line in out.getvalue().splitlines() if "change" in line.lower())
    print(
        f"  llmperf history --store (every series, change points included): {elapsed:.1f} s, exit {code}, "
        f"{len(out.getvalue().splitlines())} lines printed, {flagged} mention a change"
    )


def size(url: str) -> None:
    import subprocess

    import psycopg

    root = Path(__file__).resolve().parents[1]
    group = f"size-{uuid.uuid4().hex[:8]}"
    from repeat_main_command import MAIN_COMMAND

    command = [*MAIN_COMMAND, "--llmperf-store", url, "--llmperf-session-group", group]
    done = subprocess.run(command, cwd=root, capture_output=True, text=True)
    print(f"size: the main command with --llmperf-store: {done.stdout.strip().splitlines()[-1]}")
    tables = ("llmperf_sessions", "llmperf_runs", "llmperf_verdicts", "llmperf_history")
    with psycopg.connect(url) as conn:
        (sid,) = conn.execute("SELECT id FROM llmperf_sessions WHERE session_group = %s", (group,)).fetchone()
        total = 0
        for table in tables:
            key = "id" if table == "llmperf_sessions" else "session_id"
            rows, size = conn.execute(
                f"SELECT count(*), coalesce(sum(pg_column_size(t.*)), 0) FROM {table} t WHERE {key} = %s", (sid,)
            ).fetchone()
            total += size
            print(f"  {table}: {rows} row(s), {size / 1024:.1f} KiB")
        print(f"  one session of the seed suite: {total / 1024:.1f} KiB of row data (indexes aside)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--store", default=os.environ.get("LLMPERF_STORE"), help="a postgresql:// URL (default: a throwaway server)"
    )
    parser.add_argument("--writers", type=int, default=16)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--series", type=int, default=500)
    parser.add_argument("--nights", type=int, default=365)
    parser.add_argument("--size", action="store_true", help="only the seed suite's session size (about 150 s)")
    args = parser.parse_args()
    server = None
    url = args.store
    if url is None:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from tests.postgres.server import remove_server, start_server

        server = start_server()
        if server is None:
            print("no PostgreSQL binaries: apt-get install postgresql, or give --store", file=sys.stderr)
            return 1
        import psycopg

        with psycopg.connect(server.url("postgres"), autocommit=True) as conn:
            conn.execute("CREATE DATABASE store_load")
        url = server.url("store_load")
    try:
        print(f"store_load: PostgreSQL, {os.cpu_count()} CPU(s), {dt.date.today()}")
        PostgresStore(url).check()
        if args.size:
            size(url)
        else:
            write_load(url, args.writers, args.runs)
            read_load(url, args.series, args.nights)
    finally:
        if server is not None:
            remove_server(server)
    return 0


if __name__ == "__main__":
    sys.exit(main())
