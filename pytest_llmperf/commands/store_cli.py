"""`llmperf store` (migrate, push) and `llmperf report --store`: the shared store's
commands. `report` joins every shard of one night into one report and says which shard is
missing or did not finish."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_llmperf.store.protocol import ResultStore

EXIT_OK, EXIT_FAILED, EXIT_INCOMPLETE = 0, 1, 3
STORE_HELP = (
    "the store: postgresql://USER@HOST:PORT/DB (or postgres://), file:///PATH or a plain PATH (a folder, or a "
    "history file ending in .jsonl) (default: env LLMPERF_STORE)"
)


def add_store_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", default=os.environ.get("LLMPERF_STORE") or None, help=STORE_HELP)


def add_commands(sub: Any) -> None:
    store = sub.add_parser("store", help="the shared result store: migrate its schema, push spooled sessions")
    actions = store.add_subparsers(dest="action", required=True, metavar="{migrate,push}")
    migrate = actions.add_parser("migrate", help="bring the store's schema to this version (an empty one: created)")
    add_store_argument(migrate)
    migrate.add_argument("--to", type=int, default=None, help="stop at this schema version")
    migrate.set_defaults(func=cmd_migrate)
    push = actions.add_parser("push", help="write the sessions a lost store left spooled in a report folder")
    push.add_argument("folder", help="a --llmperf-report folder (its store-spool/), or the spool folder itself")
    add_store_argument(push)
    push.set_defaults(func=cmd_push)
    report = sub.add_parser(
        "report",
        help="one report of a night's shards from the store: exit 1 when a verdict failed, 3 when a shard is "
        "missing or did not finish",
    )
    report.add_argument("folder", help="where to write report.html, summary.md and report.json")
    add_store_argument(report)
    report.add_argument("--session-group", required=True, help="the night (the shards' --llmperf-session-group)")
    report.set_defaults(func=cmd_report)
    baselines = sub.add_parser(
        "baselines",
        help="write the baseline files a night's recording shards wrote, from the store (for a pull request)",
    )
    add_store_argument(baselines)
    baselines.add_argument("--session-group", required=True, help="the recorded night (--update-baselines)")
    baselines.add_argument(
        "--write", required=True, metavar="DIR", help="the checkout to write them into (baselines/... under it)"
    )
    baselines.set_defaults(func=cmd_baselines)


def open_store(args: argparse.Namespace) -> ResultStore:
    """The store --store names, by its scheme (a relative path: under the current folder)."""
    from pytest_llmperf.store import scheme

    if not args.store:
        raise ValueError(f"no store given: --store URL, one of {scheme.KNOWN} (or env LLMPERF_STORE)")
    try:
        return scheme.open_store(args.store)
    except ValueError as exc:
        raise ValueError(f"--store: {exc}") from None


def cmd_migrate(args: argparse.Namespace) -> int:
    store = open_store(args)
    applied = store.migrate(to=args.to)
    for name in applied:
        print(f"applied {name}")
    print(f"store {store.shown}: schema version {store.version()}")
    return EXIT_OK


def cmd_push(args: argparse.Namespace) -> int:
    from pytest_llmperf.store.spool import pending, push

    store = open_store(args)
    folder = Path(args.folder)
    if not folder.exists():
        raise ValueError(f"no folder {folder}: give the --llmperf-report folder that holds store-spool/")
    waiting = pending(folder)
    if not waiting:
        print(f"nothing to push: no spooled session under {folder}")
        return EXIT_OK
    store.check()
    done = push(folder, store.write_batch)
    print(f"pushed {done.batches} session(s) to {store.shown}: {done.rows} new row(s)")
    for problem in done.problems:
        print(f"not pushed: {problem}")
    return EXIT_FAILED if done.problems else EXIT_OK


def night(sessions: Sequence[Mapping[str, Any]]) -> tuple[dict[int, Mapping[str, Any]], list[str]]:
    """Each shard's latest finished session, and a line for each shard missing or unfinished."""
    expected = max((int(s["shards"]) for s in sessions), default=0)
    finished: dict[int, Mapping[str, Any]] = {}
    started: dict[int, Mapping[str, Any]] = {}
    for s in sessions:  # by shard, then start: the later attempt wins
        (finished if s["finished_at"] is not None else started)[int(s["shard"])] = s
    problems = []
    for k in range(1, expected + 1):
        if k in finished:
            continue
        if k in started:
            s = started[k]
            problems.append(f"shard {k}/{expected} did not finish: started {s['started_at']} on {s['host']}")
        else:
            problems.append(f"shard {k}/{expected} is missing: no session of it reported")
    return finished, problems


def read_night(
    args: argparse.Namespace,
) -> tuple[ResultStore, list[dict[str, Any]], dict[int, Mapping[str, Any]], list[str]]:
    """The store, the sessions of --session-group (at least one), each shard's latest
    finished one, and a line for each shard missing or unfinished."""
    store = open_store(args)
    sessions = store.sessions(args.session_group)
    if not sessions:
        raise ValueError(f"store {store.shown}: no session in group {args.session_group!r}")
    finished, problems = night(sessions)
    return store, sessions, finished, problems


def cmd_baselines(args: argparse.Namespace) -> int:
    from pytest_llmperf.util.files import atomic_write_text

    store, _, finished, problems = read_night(args)
    root = Path(args.write)
    files: dict[str, tuple[int, str]] = {}
    for k, s in sorted(finished.items()):
        for path, text in store.baseline_files(s["id"]):
            if Path(path).is_absolute() or ".." in Path(path).parts:
                raise ValueError(f"shard {k} wrote {path}, outside its checkout: copy it by hand")
            if path in files and files[path][1] != text:
                raise ValueError(f"shards {files[path][0]} and {k} both wrote {path}, differently: record them apart")
            files[path] = (k, text)
    if not files:
        raise ValueError(f"no baseline file in group {args.session_group!r}: record with --update-baselines")
    for path, (k, text) in sorted(files.items()):
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(target, text)
        print(f"wrote {target} (shard {k})")
    for problem in problems:
        print(f"  {problem}: its baselines are not written")
    return EXIT_INCOMPLETE if problems else EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    from pytest_llmperf.report.document import merge_reports
    from pytest_llmperf.report.folder import write_report_files

    store, sessions, finished, problems = read_night(args)
    documents = {f"shard{k}": s["document"] for k, s in sorted(finished.items())}
    document = merge_reports(documents)
    expected = max(int(s["shards"]) for s in sessions)
    print(f"night {args.session_group}: {len(finished)} of {expected} shard(s) finished")
    for k, s in sorted(finished.items()):
        gates = (s["document"] or {}).get("verdicts", [])
        failed = sum(1 for g in gates if g.get("outcome") == "fail")
        where = f" ({s['ci_job_url']})" if s.get("ci_job_url") else ""
        print(f"  shard {k}/{expected} on {s['host']}: {len(gates)} verdict(s), {failed} failed{where}")
    for problem in problems:
        print(f"  {problem}")
    if document is not None:
        document["session_group"] = args.session_group
        files = write_report_files(document, Path(args.folder))
        print(files.describe())
    failed = any(g.get("outcome") == "fail" for g in (document or {}).get("verdicts", []))
    if problems:
        return EXIT_INCOMPLETE
    return EXIT_FAILED if failed else EXIT_OK
