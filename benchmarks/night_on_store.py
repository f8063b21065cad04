"""The seed suite as a night of three shard processes on one PostgreSQL store, against one
unsharded run: the issue's check, printed.

    python benchmarks/night_on_store.py            # about 6 minutes on 2 cores

1. `pytest tests/perf --llmperf-sim --llmperf-profile smoke --llmperf-report DIR`, once,
   unsharded: its verdicts.
2. The same command with `--llmperf-shard K/3 --llmperf-store URL --llmperf-session-group
   G1` as three concurrent processes, then `llmperf report --store URL --session-group G1`:
   its exit status, and each test's outcome and each judged metric's status against step 1.
3. Again as G2, with shard 1's process killed (SIGKILL) once its session is in the store:
   `llmperf report`'s exit status and what it says.

The store is a throwaway PostgreSQL from Debian's binaries (tests/postgres/server.py).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from repeat_main_command import MAIN_COMMAND as COMMAND  # noqa: E402


def llmperf(*args: str) -> tuple[int, str]:
    done = subprocess.run(
        [sys.executable, "-m", "pytest_llmperf.commands.cli", *args], cwd=ROOT, capture_output=True, text=True
    )
    return done.returncode, done.stdout + done.stderr


def verdicts(report: Path) -> dict[tuple[str, str], str]:
    document = json.loads((report / "report.json").read_text())
    out = {}
    for gate in document["verdicts"]:
        out[(gate["test"], "(test)")] = gate["outcome"]
        for verdict in gate["verdicts"]:
            out[(gate["test"], verdict["metric"])] = verdict["status"]
    return out


def shards(url: str, group: str, kill: int | None = None) -> list[int]:
    processes = [
        subprocess.Popen(
            [*COMMAND, f"--llmperf-shard={k}/3", "--llmperf-store", url, "--llmperf-session-group", group],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for k in (1, 2, 3)
    ]
    if kill is not None:
        import psycopg

        while True:
            with psycopg.connect(url) as conn:
                row = conn.execute(
                    "SELECT count(*) FROM llmperf_sessions WHERE session_group = %s AND shard = %s", (group, kill)
                ).fetchone()
            if row[0]:
                break
            time.sleep(0.2)
        time.sleep(5)  # its first server is up and measuring
        processes[kill - 1].send_signal(signal.SIGKILL)
    codes = []
    for k, process in enumerate(processes, start=1):
        out, _ = process.communicate()
        tail = out.strip().splitlines()[-1] if out.strip() else ""
        print(f"  shard {k}/3: exit {process.returncode}: {tail}")
        codes.append(process.returncode)
    return codes


def main() -> int:
    import psycopg

    from tests.postgres.server import remove_server, start_server

    server = start_server()
    if server is None:
        print("no PostgreSQL binaries: apt-get install postgresql", file=sys.stderr)
        return 1
    try:
        with psycopg.connect(server.url("postgres"), autocommit=True) as conn:
            conn.execute("CREATE DATABASE night")
        url = server.url("night")
        with tempfile.TemporaryDirectory() as folder:
            whole, night = Path(folder) / "whole", Path(folder) / "night"
            started = time.perf_counter()
            done = subprocess.run([*COMMAND, "--llmperf-report", str(whole)], cwd=ROOT, capture_output=True, text=True)
            print(
                f"1. unsharded: exit {done.returncode}: {done.stdout.strip().splitlines()[-1]} "
                f"({time.perf_counter() - started:.0f} s)"
            )
            print("2. three shards at once on the store, night g1:")
            started = time.perf_counter()
            shards(url, "g1")
            print(f"   ({time.perf_counter() - started:.0f} s for the three)")
            code, said = llmperf("report", str(night), "--store", url, "--session-group", "g1")
            print(f"   llmperf report --session-group g1: exit {code}")
            print("\n".join(f"     {line}" for line in said.strip().splitlines()))
            ours, theirs = verdicts(whole), verdicts(night)
            same = sum(1 for key in ours if theirs.get(key) == ours[key])
            tests = sum(1 for key in ours if key[1] == "(test)")
            print(
                f"   {same} of {len(ours)} verdicts the same as the unsharded run's ({tests} tests' outcomes and "
                f"{len(ours) - tests} judged metrics); in only one: {sorted(set(ours) ^ set(theirs))}"
            )
            for key in sorted(ours):
                if key in theirs and theirs[key] != ours[key]:
                    print(f"     differs: {key[0]} {key[1]}: unsharded {ours[key]}, sharded {theirs[key]}")
            print("3. night g2, shard 1 killed once its session is in the store:")
            shards(url, "g2", kill=1)
            code, said = llmperf("report", str(Path(folder) / "night2"), "--store", url, "--session-group", "g2")
            print(f"   llmperf report --session-group g2: exit {code}")
            print("\n".join(f"     {line}" for line in said.strip().splitlines()))
    finally:
        remove_server(server)
    return 0


if __name__ == "__main__":
    sys.exit(main())
