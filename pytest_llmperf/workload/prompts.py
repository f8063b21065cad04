"""The prompts of a workload, whichever its dataset: the one place that knows the three
(load, sample, and the identity a baseline was recorded on), for the plugin and `llmperf bench`.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pytest_llmperf.metrics.prompt_lengths import length_mismatch
from pytest_llmperf.metrics.records import RequestRecord
from pytest_llmperf.workload.custom_dataset import CustomFile, read_custom, sample_custom
from pytest_llmperf.workload.dataset import ShareGPTFile, TokenCounter, find_dataset, read_sharegpt, sample_requests
from pytest_llmperf.workload.random_align import align, probe
from pytest_llmperf.workload.random_dataset import BuiltinTokenizer, RandomSettings, Tokenizer, sample_random
from pytest_llmperf.workload.requests import SampledRequest
from pytest_llmperf.workload.workload import CUSTOM, RANDOM, SHAREGPT, Workload

Loaded = ShareGPTFile | CustomFile | None  # None: the random dataset (nothing to load)

BUILTIN = "builtin"  # the random dataset's prompts from the built-in tokenizer
SERVER = "server"  # and made to the server's /tokenize counts


def dataset_key(workload: Workload) -> tuple[str, str | None]:
    """What to load for `workload`: its dataset's name and file (None: default places)."""
    return workload.dataset_name, None if workload.dataset_name == RANDOM else workload.dataset_path


def load_dataset(name: str, path: str | None, root: Path) -> Loaded:
    """Find and read `name`'s file (`path` relative to the current folder, then `root`).
    DatasetError (or CustomDatasetError) names the file and what is wrong in it."""
    if name == RANDOM:
        return None
    if name == CUSTOM:
        if path is None:
            raise ValueError("the custom dataset needs its JSONL file")
        return read_custom(find_dataset(path, root=root))
    return read_sharegpt(find_dataset(path, root=root))


def sample_prompts(
    workload: Workload,
    loaded: Loaded,
    count_tokens: TokenCounter | None = None,
    *,
    output_len: int | None = None,
    tokenizer: Tokenizer | None = None,
) -> list[SampledRequest]:
    """`workload.num_prompts` measured prompts, then `workload.warmup` distinct ones."""
    if workload.dataset_name == RANDOM:
        return random_prompts(workload, tokenizer=tokenizer)[0]
    if isinstance(loaded, CustomFile):
        return sample_custom(
            loaded,
            workload.prompts_needed,
            seed=workload.seed,
            max_tokens=workload.max_tokens,
            count_tokens=count_tokens,
        )
    if isinstance(loaded, ShareGPTFile):
        return sample_requests(
            loaded.conversations,
            workload.prompts_needed,
            seed=workload.seed,
            count_tokens=count_tokens,
            output_len=output_len,
        )
    raise ValueError(f"dataset {workload.dataset_name!r}: nothing loaded to sample from")


def random_prompts(
    workload: Workload, *, tokenizer: Tokenizer | None = None, server_count: TokenCounter | None = None
) -> tuple[list[SampledRequest], str | None]:
    """The random dataset's prompts, and what made them to their lengths: None for
    `tokenizer` (the caller names it), SERVER when `server_count` fitted them, else BUILTIN."""
    settings = random_settings(workload)

    def sample(tok: Tokenizer | None) -> list[SampledRequest]:
        return sample_random(workload.num_prompts, settings, seed=workload.seed, tokenizer=tok, extra=workload.warmup)

    if tokenizer is not None:
        return sample(tokenizer), None
    server = probe(server_count) if server_count is not None else None
    if server is None:
        return sample(None), BUILTIN
    built = sample(BuiltinTokenizer(num_special=server.special))  # vLLM's lengths, less its special tokens
    return align(built, server, settings.prefix_len, BuiltinTokenizer.PIECE_CHARS), SERVER


def random_length_mismatch(workload: Workload, records: Iterable[RequestRecord]) -> str | None:
    """For the random dataset's prompts sent as they are (completions): why the server's
    counts are not the lengths meant, or None."""
    if workload.dataset_name != RANDOM or workload.endpoint != "completions":
        return None
    return length_mismatch(records)


def random_settings(workload: Workload) -> RandomSettings:
    return RandomSettings(
        input_len=workload.random_input_len if workload.random_input_len is not None else 1024,
        output_len=workload.max_tokens,
        range_ratio=workload.random_range_ratio or 0.0,
        prefix_len=workload.random_prefix_len or 0,
    )


def dataset_identity(workload: Workload, loaded: Loaded, tokenizer: str = BUILTIN) -> str:
    """Which prompts: a file by name and content hash, or the random dataset's tokenizer
    (its settings are in the workload itself)."""
    if workload.dataset_name == RANDOM or loaded is None:
        return f"random tokenizer:{tokenizer}"
    return f"{loaded.path.name} sha256:{loaded.sha256[:12]}"


def dataset_provenance(workload: Workload, loaded: Loaded, tokenizer: str = BUILTIN) -> dict[str, Any]:
    """The dataset's provenance for results and baselines (file name only, no text)."""
    if workload.dataset_name == RANDOM or loaded is None:
        return {"name": RANDOM, "tokenizer": tokenizer, **random_settings(workload).describe()}
    named = {} if workload.dataset_name == SHAREGPT else {"name": workload.dataset_name}
    return {**named, **loaded.describe(), "path": loaded.path.name}


def describe_loaded(loaded: Loaded) -> str:
    """One line for the session's header: the file and what it holds."""
    if isinstance(loaded, CustomFile):
        return f"{loaded.path}: {len(loaded.prompts)} prompts"
    if isinstance(loaded, ShareGPTFile):
        cut = (
            f" (the file is cut mid-record at byte {loaded.size_bytes}: its {loaded.records} complete records are used)"
        )
        return f"{loaded.path}: {len(loaded.conversations)} conversations" + (cut if loaded.truncated else "")
    return "random: prompts generated from token ids, made to the server's token counts where it has /tokenize"
