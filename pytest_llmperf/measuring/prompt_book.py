"""The prompts of a session: each dataset loaded once, each model's prompts sampled once
(base and MTP servers of a model see identical input), and what a run's provenance and
workload identity say of them."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pytest_llmperf.baselines.outcome import SetupError
from pytest_llmperf.measuring.measured import MeasuredRun
from pytest_llmperf.options import LlmperfOptions
from pytest_llmperf.servers.endpoint import Endpoint
from pytest_llmperf.util.files import token_counts_dir
from pytest_llmperf.workload.prompts import BUILTIN
from pytest_llmperf.workload.requests import SampledRequest
from pytest_llmperf.workload.workload import Workload

# What a measurer asks for a run's prompts: the endpoint (its model, its /tokenize) and the workload.
Sampler = Callable[[Endpoint, Workload], list[SampledRequest]]


def dataset_source(options: LlmperfOptions, workload: Workload) -> tuple[str, str | None]:
    """The dataset `workload` reads, as (name, file): its own file, else --llmperf-dataset
    when that is its dataset's; None: the default places (or no file)."""
    from pytest_llmperf.workload.prompts import dataset_key

    return source_of(options, *dataset_key(workload))


def source_of(options: LlmperfOptions, name: str, path: str | None) -> tuple[str, str | None]:
    """(name, file) of a dataset a marker names: its own file, else the options' for its dataset."""
    if name == "random":
        return name, None
    return name, options.dataset if path is None and name == options.dataset_name else path


def dataset_option(options: LlmperfOptions) -> str:
    return "--llmperf-dataset" if options.sources.get("llmperf_dataset") == "cli" else "ini option llmperf_dataset"


def load_for_session(options: LlmperfOptions, rootdir: Path, name: str, path: str | None) -> Any:
    """One dataset's file, loaded (None for the random dataset); SetupError says which
    setting named it, what is wrong and the fix."""
    from pytest_llmperf.workload.dataset import DatasetError, DatasetTruncatedWarning, ShareGPTFile
    from pytest_llmperf.workload.prompts import load_dataset

    option = dataset_option(options)
    from_option = path is not None and path == options.dataset and name == options.dataset_name
    given = f"{option} ({path})" if from_option else f"dataset_path={path!r}" if path is not None else "the dataset"
    kind = "a JSONL file of prompts" if name == "custom" else "a ShareGPT V3 JSON file"
    try:
        with warnings.catch_warnings():  # a truncated file is said once, in the session's dataset line
            warnings.simplefilter("ignore", DatasetTruncatedWarning)
            loaded = load_dataset(name, path, rootdir)
    except DatasetError as exc:
        fix = f"point {option if from_option else 'it'} at {kind}" if path is not None else ""
        raise SetupError(f"{given}: {exc}" + (f"; {fix}" if fix and "\n" not in str(exc) else "")) from None
    if isinstance(loaded, ShareGPTFile) and not loaded.conversations:
        raise SetupError(
            f"dataset {loaded.path}: no conversation with two or more turns ({loaded.records} records read), "
            f"nothing to send; point {option} at a ShareGPT V3 JSON file"
        )
    return loaded


class PromptBook:
    """The session's datasets and sampled prompts; `requests_for` is the default Sampler."""

    def __init__(
        self,
        options: LlmperfOptions,
        rootdir: Path,
        datasets: Mapping[tuple[str, str | None], Any] | None = None,
        log: Callable[[str], None] = lambda msg: None,
    ) -> None:
        self.options = options
        self.rootdir = rootdir
        self.log = log
        # The loaded datasets by (name, path) (check_before_start's), others loaded on first use.
        self.datasets: dict[tuple[str, str | None], Any] = dict(datasets or {})
        self.token_count_source = ""
        # (model, dataset, its settings, seed, count): the prompts, for every server of the model.
        self._requests: dict[tuple[Any, ...], list[SampledRequest]] = {}
        # The random dataset's prompts by key: what made them to their lengths (prompts.SERVER, BUILTIN).
        self._made_by: dict[tuple[Any, ...], str | None] = {}

    def dataset_for(self, workload: Workload) -> Any:
        """The loaded dataset of `workload` (None: the random dataset's, nothing to load)."""
        key = dataset_source(self.options, workload)
        if key not in self.datasets:  # check_before_start loads those it can plan; the rest here
            if key[0] != "random":
                self.log(f"loading dataset {key[0]} {key[1] or '(default places)'}")
            self.datasets[key] = load_for_session(self.options, self.rootdir, *key)
        return self.datasets[key]

    def requests_for(self, endpoint: Endpoint, workload: Workload) -> list[SampledRequest]:
        """The same prompts for every server of a model: base and MTP see identical input."""
        key = self.key(endpoint.model, workload)
        if key not in self._requests:
            self._requests[key] = self._sample(key, endpoint, workload)
        return self._requests[key]

    def _sample(self, key: tuple[Any, ...], endpoint: Endpoint, workload: Workload) -> list[SampledRequest]:
        from pytest_llmperf.workload.dataset import DatasetError, NotEnoughPromptsError
        from pytest_llmperf.workload.prompts import random_prompts, sample_prompts
        from pytest_llmperf.workload.token_counts import token_counter_for

        dataset = self.dataset_for(workload)
        counter, source = token_counter_for(
            endpoint.base_url,
            endpoint.model,
            cache_dir=token_counts_dir(),
            dataset_id=dataset.sha256 if dataset is not None else "random",
        )
        if dataset is None:  # the random dataset: made to the server's counts where it has /tokenize
            requests, self._made_by[key] = random_prompts(
                workload, server_count=counter if source == "server" else None
            )
            return requests
        self.token_count_source = source
        where = f"{endpoint.model} @ concurrency {workload.concurrency}"
        try:
            return sample_prompts(workload, dataset, counter)
        except NotEnoughPromptsError as exc:
            # Only the server's token counts tell how many pass the length filters.
            raise SetupError(
                f"{where}: {workload.prompts_needed} prompts needed ({workload.num_prompts} measured + "
                f"{workload.warmup} warm-up) but only {exc.kept} of {exc.available} conversations in "
                f"{dataset.path.name} pass the length filters ({exc.filters}; tokens counted by {source}); "
                "lower num_prompts= (or warmup=) in the llmperf marker, run a smaller --llmperf-profile, or "
                "point --llmperf-dataset at a larger file"
            ) from None
        except DatasetError as exc:
            raise SetupError(f"{where}: {exc}") from None

    def key(self, model: str, workload: Workload) -> tuple[Any, ...]:
        """The prompts' key: the same prompts for every server of a model."""
        settings = (workload.random_input_len, workload.random_range_ratio, workload.random_prefix_len)
        per_request = workload.max_tokens if workload.per_request_max_tokens else None
        source = dataset_source(self.options, workload)
        return (model, source, settings, per_request, workload.seed, workload.prompts_needed)

    def provenance(self, model: str, workload: Workload) -> dict[str, Any]:
        """What a run's provenance says of its prompts (file name only: baselines are
        committed); empty when the dataset was never loaded here."""
        from pytest_llmperf.workload.prompts import dataset_provenance

        key = dataset_source(self.options, workload)
        if key not in self.datasets and workload.dataset_name != "random":
            return {}
        made_by = self._made_by.get(self.key(model, workload)) or BUILTIN
        info: dict[str, Any] = {"dataset": dataset_provenance(workload, self.datasets.get(key), made_by)}
        if workload.dataset_name != "random":
            info["prompt_length_source"] = self.token_count_source  # server /tokenize or approx
        return info

    def workload_identity(self, run: MeasuredRun) -> dict[str, Any]:
        """What must match for two runs to be comparable (hardware aside)."""
        from pytest_llmperf.workload.prompts import dataset_identity

        identity = dict(run.workload.to_dict())
        identity["model"] = run.server.model
        key = dataset_source(self.options, run.workload)
        if key in self.datasets or run.workload.dataset_name == "random":
            made_by = run.provenance.get("dataset", {}).get("tokenizer", BUILTIN)
            identity["dataset"] = dataset_identity(run.workload, self.datasets.get(key), made_by)
        if "clock_speed" in run.provenance:
            identity["clock_speed"] = run.provenance["clock_speed"]
        return identity
