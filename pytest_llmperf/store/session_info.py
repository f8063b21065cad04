"""What the store records about one session: its id, the night it belongs to (the session
group, from --llmperf-session-group or the CI's run id), its shard, host and CI job."""

from __future__ import annotations

import datetime as _dt
import os
import socket
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

# The CI variables that name one pipeline run, which all its jobs (the shards) share.
GROUP_VARIABLES = ("GITHUB_RUN_ID", "BUILDKITE_BUILD_ID", "CI_PIPELINE_ID")


def default_group(env: Mapping[str, str]) -> str | None:
    """The CI run's id (GitHub Actions, Buildkite, GitLab), with the attempt on GitHub so a
    re-run is its own night; None outside CI."""
    for name in GROUP_VARIABLES:
        value = env.get(name, "").strip()
        if value:
            attempt = env.get("GITHUB_RUN_ATTEMPT", "").strip() if name == "GITHUB_RUN_ID" else ""
            return f"{value}-{attempt}" if attempt else value
    return None


def ci_job_url(env: Mapping[str, str]) -> str | None:
    """The URL of this CI job, where the CI environment gives one."""
    if env.get("GITHUB_RUN_ID") and env.get("GITHUB_REPOSITORY"):
        server = env.get("GITHUB_SERVER_URL", "https://github.com").rstrip("/")
        return f"{server}/{env['GITHUB_REPOSITORY']}/actions/runs/{env['GITHUB_RUN_ID']}"
    return env.get("BUILDKITE_BUILD_URL") or env.get("CI_JOB_URL") or None


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class SessionInfo:
    id: str
    session_group: str
    shard: int
    shards: int
    host: str
    ci_job_url: str | None
    git_commit: str | None
    target: str | None
    image: str | None
    started_at: str
    report_dir: str | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def label(self) -> str:
        return f"shard {self.shard}/{self.shards} on {self.host}"


def new_session(
    *,
    group: str | None,
    shard: tuple[int, int] | None,
    target: str | None,
    image: str | None,
    git_commit: str | None,
    report_dir: str | None,
    env: Mapping[str, str] | None = None,
) -> SessionInfo:
    """This session's record: a fresh id; the group given, else the CI run's, else its own id."""
    env = os.environ if env is None else env
    session_id = uuid.uuid4().hex
    k, n = shard or (1, 1)
    return SessionInfo(
        id=session_id,
        session_group=group or default_group(env) or session_id,
        shard=k,
        shards=n,
        host=socket.gethostname(),
        ci_job_url=ci_job_url(env),
        git_commit=git_commit,
        target=target,
        image=image,
        started_at=now(),
        report_dir=report_dir,
    )
