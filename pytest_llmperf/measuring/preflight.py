"""Checks before any server starts: datasets hold enough prompts, baseline and published
files load, and under --update-baselines the files to be written can be."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_llmperf.baselines.outcome import SetupError
from pytest_llmperf.baselines.store import PUBLISHED_DIR, BaselineError, BaselineStore
from pytest_llmperf.measuring.prompt_book import dataset_option, dataset_source, load_for_session, source_of
from pytest_llmperf.options import LlmperfOptions
from pytest_llmperf.servers.spec import ServerSpec
from pytest_llmperf.util.files import relative_to, write_problem
from pytest_llmperf.workload.workload import Workload


@dataclass(frozen=True)
class PlannedTest:
    """What one collected test will need, as far as collection can tell."""

    nodeid: str
    servers: tuple[ServerSpec, ...]  # its server, and its base server for a speedup
    workloads: tuple[Workload, ...] = ()  # empty: known only when it runs
    # Without workloads: the (dataset name, file) pairs its marker names (None: the options').
    datasets: tuple[tuple[str, str | None], ...] | None = None


def check_before_start(
    options: LlmperfOptions,
    rootdir: Path,
    plans: Sequence[PlannedTest],
    folders: Sequence[str] | None,
) -> dict[tuple[str, str | None], Any]:
    """Check the datasets and baseline files the `plans` read before any server starts
    (SetupError with the fix); returns the loaded datasets by (name, path), the options' own
    included. `folders`: the baseline folders judged in; None (known once a server runs): all."""
    wanted = {dataset_source(options, w) for plan in plans for w in plan.workloads}
    for plan in plans:
        if plan.workloads:
            continue
        for name, path in plan.datasets or [(options.dataset_name, None)]:
            source = source_of(options, name, path)
            if source != ("custom", None):  # a custom one without its file: its run says so
                wanted.add(source)
    loaded = {key: load_for_session(options, rootdir, *key) for key in sorted(wanted, key=str)}
    _check_prompts(loaded, plans, options)
    store = BaselineStore(rootdir / options.baselines_dir)
    _check_baselines(store, rootdir, plans, folders)
    if options.update_baselines:
        _check_writable(store, rootdir, plans, folders)
    return loaded


def _check_prompts(
    loaded: Mapping[tuple[str, str | None], Any], plans: Sequence[PlannedTest], options: LlmperfOptions
) -> None:
    """Every planned workload's prompts (measured, then warm-up ones) exist: fewer
    cannot be sampled whatever the length filters keep (random makes as many as asked)."""

    def have(workload: Workload) -> int | None:
        dataset = loaded.get(dataset_source(options, workload))
        if dataset is None:
            return None
        return len(dataset.prompts) if workload.dataset_name == "custom" else len(dataset.conversations)

    short = [
        (plan, w, n) for plan in plans for w in plan.workloads if (n := have(w)) is not None and w.prompts_needed > n
    ]
    if not short:
        return
    plan, workload, count = max(short, key=lambda pw: pw[1].prompts_needed)
    dataset = loaded[dataset_source(options, workload)]
    others = len({p.nodeid for p, _, _ in short}) - 1
    setting = dataset_option(options) if workload.dataset_path is None else f"dataset_path={workload.dataset_path!r}"
    custom = workload.dataset_name == "custom"
    what = "prompts" if custom else "conversations"
    fix = f"add lines to the file ({setting})" if custom else f"point {setting} at a larger file"
    raise SetupError(
        f"{plan.nodeid} needs {workload.prompts_needed} prompts at concurrency {workload.concurrency} "
        f"({workload.num_prompts} measured + {workload.warmup} warm-up, profile {workload.profile}) but dataset "
        f"{dataset.path.name} has {count} {what}"
        + (f" ({others} more test(s) need more than it has)" if others else "")
        + f"; lower num_prompts= (or warmup=) in its llmperf marker, run a smaller --llmperf-profile, or {fix}"
    )


def _check_baselines(
    store: BaselineStore, rootdir: Path, plans: Sequence[PlannedTest], folders: Sequence[str] | None
) -> None:
    """Every baseline and published file the planned tests read loads: a corrupt or
    hand-broken one is named before the workload runs, not after."""
    if folders is None:
        folders = (
            sorted(p.name for p in store.root.iterdir() if p.is_dir() and p.name != PUBLISHED_DIR)
            if store.root.is_dir()
            else []
        )
    servers = sorted({spec.name for plan in plans for spec in plan.servers})
    problems = []
    for name in servers:
        for folder in folders:
            try:
                store.load(folder, name)
            except BaselineError as exc:
                problems.append(
                    f"baseline {relative_to(exc.path, rootdir)}: {exc.problem}; the tests of {name} read it: "
                    "fix it, or delete it and record again with --update-baselines"
                )
        try:
            store.load_published(name)
        except BaselineError as exc:
            problems.append(
                f"published figures {relative_to(exc.path, rootdir)}: {exc.problem}; fix it by hand "
                "(hand-curated, never recorded), or delete it"
            )
    if problems:
        raise SetupError("\n".join(problems))


def _check_writable(
    store: BaselineStore, rootdir: Path, plans: Sequence[PlannedTest], folders: Sequence[str] | None
) -> None:
    """Every baseline file --update-baselines will write can be written; `folders` None:
    the baselines folder itself and the files of every folder there."""
    servers = sorted({spec.name for plan in plans for spec in plan.servers})
    checked: list[tuple[str, Path]] = []
    if folders is None:
        checked.append((f"baselines folder {relative_to(store.root, rootdir)}", store.root / "new" / "file"))
        folders = sorted(p.name for p in store.root.iterdir() if p.is_dir()) if store.root.is_dir() else []
    for folder in folders:
        if folder != PUBLISHED_DIR:
            paths = [store.path_for(folder, name) for name in servers]
            checked += [(f"baseline {relative_to(path, rootdir)}", path) for path in paths]
    problems = [f"{what} cannot be written: {why}" for what, path in checked if (why := write_problem(path))]
    if problems:
        raise SetupError("\n".join(problems) + "\n(--update-baselines: found before any server started)")
