"""The store's pure parts: the session's group and CI job from the CI's variables, the URL
as messages show it, a finished session's batch, and the spool."""

from __future__ import annotations

import json

from pytest_llmperf.store.postgres import is_postgres, shown
from pytest_llmperf.store.rows import finish_batch
from pytest_llmperf.store.session_info import ci_job_url, default_group, new_session
from pytest_llmperf.store.spool import pending, push, spool, spool_folder

GITHUB = {"GITHUB_RUN_ID": "912", "GITHUB_RUN_ATTEMPT": "2", "GITHUB_REPOSITORY": "org/suite"}


def test_the_group_is_the_ci_runs_id_and_a_session_outside_ci_is_its_own_group() -> None:
    assert default_group(GITHUB) == "912-2"
    assert default_group({"BUILDKITE_BUILD_ID": "b-7"}) == "b-7"
    assert default_group({"CI_PIPELINE_ID": "55"}) == "55"
    assert default_group({}) is None
    alone = new_session(group=None, shard=None, target="sim", image=None, git_commit=None, report_dir=None, env={})
    assert alone.session_group == alone.id and (alone.shard, alone.shards) == (1, 1)
    given = new_session(
        group="night", shard=(2, 8), target="gpu", image="i", git_commit="c", report_dir=None, env=GITHUB
    )
    assert (given.session_group, given.shard, given.shards) == ("night", 2, 8)
    assert given.ci_job_url == "https://github.com/org/suite/actions/runs/912"
    assert ci_job_url({"BUILDKITE_BUILD_URL": "https://bk/1"}) == "https://bk/1"


def test_the_url_is_shown_without_its_password() -> None:
    assert shown("postgresql://u:p%40ss@h:5432/db?sslmode=require") == "postgresql://u:***@h:5432/db?sslmode=require"
    assert shown("postgresql://h/db?password=x&user=u") == "postgresql://h/db?password=***&user=u"
    assert shown("postgresql://u@h/db") == "postgresql://u@h/db"
    assert is_postgres("postgres://h/db") and not is_postgres("sqlite:///x.db") and not is_postgres(None)


def test_a_batch_keeps_summaries_verdicts_and_history_and_leaves_raw_records_out() -> None:
    document = {
        "runs": [
            {
                "server": {"name": "m"},
                "workload": {"concurrency": 8},
                "samples": {"tpot_ms": [5.0, 5.1]},
                "requests": ["0 12 48 48 0.0201 0.0052"],
                "summary": {"tpot_ms": 5.05},
                "provenance": {"image_digest": "sha256:ab"},
                "results": [{"records": ["raw"]}],
            }
        ],
        "verdicts": [
            {
                "test": "t",
                "server": "m",
                "concurrency": 8,
                "outcome": "pass",
                "verdicts": [
                    {
                        "metric": "tpot_ms",
                        "baseline": 5.0,
                        "measured": 5.05,
                        "change": {"absolute": 0.05, "relative": 0.01},
                        "noise": 0.1,
                        "allowed": "+10%",
                        "status": "pass",
                    }
                ],
            }
        ],
        "history": [
            {
                "date": "2026-12-04",
                "server": "m",
                "concurrency": 8,
                "metric": "tpot_ms",
                "value": 5.05,
                "outcome": "pass",
                "target": "gpu",
            }
        ],
    }
    batch = finish_batch(
        {"id": "s", "report_dir": "/artifacts/r"},
        document,
        document["history"],
        0,
        "now",
        [("baselines/gpu/m.json", "{}")],
    )
    assert json.loads(json.dumps(batch)) == batch  # plain: it can be spooled as it is
    assert "results" not in batch["document"]["runs"][0] and "history" not in batch["document"]
    (run,) = batch["runs"]
    assert (run["server"], run["concurrency"], run["repetitions"], run["artifact"]) == ("m", 8, 2, "/artifacts/r")
    assert run["requests"] == ["0 12 48 48 0.0201 0.0052"]  # what the rule pairs stays without the raw records
    (verdict,) = batch["verdicts"]
    assert (verdict["metric"], verdict["change"], verdict["allowed"], verdict["outcome"]) == (
        "tpot_ms",
        0.01,
        "+10%",
        "pass",
    )
    assert batch["history"][0]["line"]["value"] == 5.05 and batch["digest"] == "sha256:ab"
    assert batch["baselines"] == [{"path": "baselines/gpu/m.json", "content": "{}"}]


def test_a_spooled_batch_is_pushed_once_and_one_that_fails_stays(tmp_path) -> None:  # type: ignore[no-untyped-def]
    folder = spool_folder("report", tmp_path)
    assert folder == tmp_path / "report" / "store-spool"
    assert spool_folder("out.json", tmp_path) == tmp_path / "store-spool"
    assert spool_folder(None, tmp_path) == tmp_path / ".llmperf" / "store-spool"
    spool({"session": {"id": "a"}}, folder)
    spool({"session": {"id": "b"}}, folder)
    written = []

    def write(batch):  # type: ignore[no-untyped-def]
        if batch["session"]["id"] == "b":
            raise RuntimeError("store lost")
        written.append(batch["session"]["id"])
        return 3

    try:
        push(tmp_path / "report", write)
    except RuntimeError:
        pass
    assert written == ["a"] and [p.name for p in pending(tmp_path / "report")] == ["b.json"]
    assert (folder / "pushed" / "a.json").exists()
