"""A user's JSONL file of prompts (`vllm bench serve --dataset-name custom`): one object a
line, `{"prompt": "...", "max_tokens": 64}` (max_tokens, or `output_tokens`, optional).
Every bad line is reported at once (an unknown key too: a typo must not change the
workload). Sampling is vLLM's seeded shuffle; prompts go as written, never repeated.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_llmperf.util.values import whole
from pytest_llmperf.workload.dataset import DatasetError, DatasetNotFoundError, TokenCounter
from pytest_llmperf.workload.requests import SampledRequest
from pytest_llmperf.workload.token_counts import approx_count_tokens

KEYS = ("prompt", "max_tokens", "output_tokens")
SHOWN = 10  # bad lines listed in one error; the rest are counted
EXAMPLE = '{"prompt": "...", "max_tokens": 128}'


class CustomDatasetError(DatasetError):
    """The JSONL file cannot be used; the message names the file, each bad line and the fix."""


@dataclass(frozen=True)
class CustomPrompt:
    line: int  # 1-based line number in the file
    prompt: str
    max_tokens: int | None  # None: the workload's


@dataclass
class CustomFile:
    path: Path
    prompts: list[CustomPrompt]
    size_bytes: int
    sha256: str

    def describe(self) -> dict[str, Any]:
        """Provenance for results and baselines (no prompt text)."""
        return {
            "path": str(self.path),
            "sha256": self.sha256,
            "size_bytes": self.size_bytes,
            "prompts": len(self.prompts),
        }


def read_custom(path: str | os.PathLike[str]) -> CustomFile:
    """Load a JSONL prompt file (module docstring for what is an error)."""
    path = Path(path)
    if not path.exists():
        raise DatasetNotFoundError(f"{path}: no such file; point the dataset path at a JSONL file of prompts")
    if not path.is_file():
        raise CustomDatasetError(f"{path}: not a file; point the dataset path at a JSONL file of prompts")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise CustomDatasetError(f"{path}: cannot read: {exc.strerror or exc}; check its permissions") from None
    prompts: list[CustomPrompt] = []
    problems: list[str] = []
    for number, line in enumerate(raw.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            prompt = _prompt(number, line)
        except ValueError as exc:
            problems.append(f"line {number}: {exc}")
        else:
            prompts.append(prompt)
    if problems:
        more = len(problems) - SHOWN
        shown = problems[:SHOWN] + ([f"... and {more} more bad line(s)"] if more > 0 else [])
        raise CustomDatasetError(
            f"{path}: {len(problems)} bad line(s) of {len(prompts) + len(problems)}; each line must be one JSON "
            f"object such as {EXAMPLE} (max_tokens optional):\n  " + "\n  ".join(shown)
        )
    if not prompts:
        raise CustomDatasetError(
            f"{path}: no prompts (the file is empty or blank); write one JSON object per line, such as {EXAMPLE}"
        )
    return CustomFile(path=path, prompts=prompts, size_bytes=len(raw), sha256=hashlib.sha256(raw).hexdigest())


def _prompt(number: int, line: bytes) -> CustomPrompt:
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text (byte {exc.start + 1} of the line); save the file as UTF-8") from None
    try:
        record = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg} at column {exc.colno}); write one complete object per line") from None
    if not isinstance(record, dict):
        raise ValueError(f"expected a JSON object, found {_kind(record)}; write {EXAMPLE}")
    unknown = sorted(set(record) - set(KEYS))
    if unknown:
        raise ValueError(f"unknown key(s) {unknown}; a line takes 'prompt' and optionally 'max_tokens'")
    if "prompt" not in record:
        raise ValueError("no 'prompt'; give the prompt text as 'prompt'")
    prompt = record["prompt"]
    if not isinstance(prompt, str):
        raise ValueError(f"'prompt' must be a string, found {_kind(prompt)}")
    if not prompt.strip():
        raise ValueError("'prompt' is empty; give the prompt text, or delete the line")
    given = [key for key in ("max_tokens", "output_tokens") if key in record]
    if len(given) == 2 and record["max_tokens"] != record["output_tokens"]:
        raise ValueError(
            f"'max_tokens' ({record['max_tokens']!r}) and 'output_tokens' ({record['output_tokens']!r}) differ; "
            "give one of them"
        )
    max_tokens = record[given[0]] if given else None
    if max_tokens is not None and not whole(1).fits(max_tokens):
        raise ValueError(
            f"'{given[0]}' must be a whole number >= 1, found {max_tokens!r}; or leave it out for the "
            "workload's max_tokens"
        )
    return CustomPrompt(number, prompt, max_tokens)


def _kind(value: Any) -> str:
    name = {dict: "an object", list: "an array", str: "a string", bool: "true/false", type(None): "null"}
    text = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
    return f"{name.get(type(value), 'a number')} {text}"


def sample_custom(
    file: CustomFile,
    num_prompts: int,
    *,
    seed: int = 0,
    max_tokens: int = 256,
    count_tokens: TokenCounter | None = None,
) -> list[SampledRequest]:
    """The first `num_prompts` lines after vLLM's seeded shuffle, each with its own
    max_tokens, else `max_tokens`; `count_tokens` gives the prompt lengths."""
    for name, value, least in (("num_prompts", num_prompts, 1), ("max_tokens", max_tokens, 1), ("seed", seed, None)):
        whole(least).require(value, name, DatasetError)
    if num_prompts > len(file.prompts):
        raise DatasetError(
            f"{file.path.name} has {len(file.prompts)} prompts but {num_prompts} are needed; add lines to the file "
            "or ask for fewer prompts (prompts are never repeated)"
        )
    order = list(file.prompts)
    random.Random(seed).shuffle(order)
    chosen = order[:num_prompts]
    counts = list((approx_count_tokens if count_tokens is None else count_tokens)([p.prompt for p in chosen]))
    if len(counts) != len(chosen):
        raise DatasetError(f"token counter returned {len(counts)} counts for {len(chosen)} prompts")
    return [
        SampledRequest(i, p.prompt, int(n), p.max_tokens if p.max_tokens is not None else max_tokens)
        for i, (p, n) in enumerate(zip(chosen, counts))
    ]
