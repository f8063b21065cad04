"""The Hugging Face cache: the folder present and writable, its free space, and each
model's size in it (an interrupted download found)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from pytest_llmperf.doctor_checks.check import FAIL, GIB, OK, SKIP, WARN, Check


def model_cache_dir(hf_cache: Path, model: str) -> Path:
    """Where the hub keeps a model under the HF home: hub/models--Org--Name."""
    return hf_cache / "hub" / ("models--" + model.replace("/", "--"))


def cached_model_size(hf_cache: Path, model: str) -> tuple[int, int, int] | None:
    """(bytes, snapshots, dangling links) of a model in the cache (each blob once); None when not cached."""
    snapshots = model_cache_dir(hf_cache, model) / "snapshots"
    if not snapshots.is_dir():
        return None
    seen: set[str] = set()
    total = dangling = 0
    revisions = [p for p in snapshots.iterdir() if p.is_dir()]
    for revision in revisions:
        for path in revision.rglob("*"):
            try:
                real = os.path.realpath(path)
                if real in seen or not os.path.isfile(real):
                    dangling += not os.path.exists(real)
                    continue
                seen.add(real)
                total += os.path.getsize(real)
            except OSError:
                dangling += 1
    if not revisions:
        return None
    return total, len(revisions), dangling


def check_hf_cache(
    hf_cache: str,
    models: Sequence[str],
    environ: Mapping[str, str],
    *,
    remote_engine: bool = False,
    local: bool = False,
) -> list[Check]:
    """The cache folder: present (missing is a warning for `local`), writable (really
    written: as root the mode bits say nothing), its free space; each model's size."""
    from pytest_llmperf.servers.docker import engine_host

    name = "Hugging Face cache"
    if remote_engine:
        host = engine_host(environ.get("DOCKER_HOST"))
        return [Check(name, SKIP, f"{hf_cache} is a path on {host} (DOCKER_HOST): not checked from here")]
    path = Path(hf_cache).expanduser()
    if not path.exists():
        parent = next((p for p in path.parents if p.exists()), None)
        if parent is not None and not parent.is_dir():
            detail = f"{path} cannot exist: {parent} is a file"
            fix = "give a folder with --hf-cache / --llmperf-hf-cache"
        elif local:
            detail = f"{path} does not exist yet: vLLM creates it at its first download"
            return [Check(name, WARN, detail, f"`mkdir -p {path}` and download the models first")]
        else:
            detail = f"{path} does not exist (Docker would create it owned by root)"
            fix = f"`mkdir -p {path}`, or give another folder with --hf-cache / --llmperf-hf-cache"
        return [Check(name, FAIL, detail, fix)]
    if not path.is_dir():
        return [Check(name, FAIL, f"{path} is not a folder", "give a folder with --hf-cache / --llmperf-hf-cache")]
    try:  # really write: as root, permission bits say nothing (a read-only mount still refuses)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".llmperf-doctor-"):
            pass
    except OSError as exc:
        return [
            Check(
                name,
                FAIL,
                f"{path} is not writable: {exc.strerror or exc}",
                f"make it writable for the server (`chown -R $USER {path}`, or remount it read-write), or give "
                "another folder with --hf-cache / --llmperf-hf-cache",
            )
        ]
    free = shutil.disk_usage(path).free
    checks = [Check(name, OK, f"{path} exists and is writable; {free / GIB:.1f} GiB free")]
    for model in models:
        checks.append(_model_check(path, model, free))
    return checks


def _model_check(path: Path, model: str, free: int) -> Check:
    name = f"model {model}"
    found = cached_model_size(path, model)
    if found is None:
        return Check(
            name,
            WARN,
            f"not in the cache: the first server start downloads it (size unknown here; {free / GIB:.1f} GiB free)",
            f"download it first (`huggingface-cli download {model} --cache-dir {path / 'hub'}`) so a run "
            "does not wait on it, and check its size on the hub against the free space",
        )
    size, revisions, dangling = found
    detail = f"cached: {size / GIB:.1f} GiB in {revisions} snapshot(s); {free / GIB:.1f} GiB free"
    if dangling:
        return Check(
            name,
            FAIL,
            f"{detail}; {dangling} snapshot file(s) point at missing blobs (an interrupted download)",
            f"finish the download (`huggingface-cli download {model}`) or delete {model_cache_dir(path, model)}",
        )
    if free < size:
        return Check(
            name,
            WARN,
            f"{detail}: less free space than the model's size, so a new revision could not be downloaded",
            f"free disk space on {path}'s filesystem, or give a larger folder with --llmperf-hf-cache",
        )
    return Check(name, OK, detail)
