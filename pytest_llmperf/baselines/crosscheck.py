"""A run's outputs against its baseline's, prompt by prompt over the prompts both completed.

Output lengths or the EOS share moved beyond their bounds make the run invalid (an image
that stops early reads as faster); changed output texts are reported, and gated only
under --llmperf-changed-outputs (greedy decoding is not bit-exact across batch shapes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_llmperf.metrics.crosscheck import OutputRow, decode_outputs
from pytest_llmperf.metrics.failures import ErrorBudget
from pytest_llmperf.metrics.uncertainty import Row, decode_rows

LENGTH_BOUND = 0.05  # relative change of the output tokens over the shared prompts
EOS_BOUND = 0.10  # change of the share of replies that ended with EOS
MIN_SHARED = 10  # fewer shared prompts than this: lengths and EOS are not judged


@dataclass(frozen=True)
class OutputChange:
    """The measured run's outputs against the baseline's, over the prompts both completed."""

    shared: int  # prompts completed in both runs
    baseline_tokens: int  # their output tokens in the baseline run
    measured_tokens: int  # and in the measured run
    finish_compared: int | None = None  # shared prompts with a finish reason on both sides
    baseline_stops: int | None = None
    measured_stops: int | None = None
    compared: int | None = None  # shared prompts with a text hash on both sides (None: no output lines)
    changed: int | None = None  # of those, the prompts whose text differs
    changed_indices: tuple[int, ...] = ()  # the first few, for the message

    @property
    def length_change(self) -> float | None:
        """Relative change of the output tokens (-0.5: half as many)."""
        if not self.baseline_tokens:
            return None
        return (self.measured_tokens - self.baseline_tokens) / self.baseline_tokens

    @property
    def eos_change(self) -> float | None:
        """Change of the EOS share, in shares (0.3: 30 points more replies ended with EOS)."""
        if not self.finish_compared or self.baseline_stops is None or self.measured_stops is None:
            return None
        return (self.measured_stops - self.baseline_stops) / self.finish_compared

    @property
    def judged(self) -> bool:
        return self.shared >= MIN_SHARED

    @property
    def lengths_moved(self) -> bool:
        change = self.length_change
        return self.judged and change is not None and abs(change) > LENGTH_BOUND

    @property
    def eos_moved(self) -> bool:
        change = self.eos_change
        return self.judged and change is not None and abs(change) > EOS_BOUND

    def changed_beyond(self, budget: ErrorBudget | None) -> bool:
        """More changed texts than `budget` allows (--llmperf-changed-outputs; None: never)."""
        if budget is None or not self.compared:
            return False
        return not budget.allows(self.changed or 0, self.compared)

    def to_dict(self) -> dict[str, Any]:
        return {
            "shared": self.shared,
            "baseline_tokens": self.baseline_tokens,
            "measured_tokens": self.measured_tokens,
            "length_change": self.length_change,
            "finish_compared": self.finish_compared,
            "baseline_stops": self.baseline_stops,
            "measured_stops": self.measured_stops,
            "eos_change": self.eos_change,
            "compared": self.compared,
            "changed": self.changed,
            "changed_indices": list(self.changed_indices),
        }


def compare_outputs(
    entry: Mapping[str, Any], rows: Sequence[Row], outputs: Sequence[OutputRow], shown: int = 5
) -> OutputChange | None:
    """The measured run's request `rows` and `outputs` against the baseline `entry`'s; None
    when the entry has no request lines or no prompt was completed by both runs."""
    if "requests" not in entry:
        return None
    base_tokens = {row[0]: row[2] for row in decode_rows(entry["requests"])}
    tokens = {row[0]: row[2] for row in rows}
    shared = sorted(set(base_tokens) & set(tokens))
    if not shared:
        return None
    change = OutputChange(
        shared=len(shared),
        baseline_tokens=sum(base_tokens[i] for i in shared),
        measured_tokens=sum(tokens[i] for i in shared),
    )
    if "outputs" not in entry:
        return change
    base_out = {i: (finish, digest) for i, finish, digest in decode_outputs(entry["outputs"])}
    mine = {i: (finish, digest) for i, finish, digest in outputs}
    both = [i for i in shared if i in base_out and i in mine]
    finished = [i for i in both if base_out[i][0] != "-" and mine[i][0] != "-"]
    changed = [i for i in both if base_out[i][1] != mine[i][1]]
    return OutputChange(
        shared=change.shared,
        baseline_tokens=change.baseline_tokens,
        measured_tokens=change.measured_tokens,
        finish_compared=len(finished),
        baseline_stops=sum(1 for i in finished if base_out[i][0] == "stop"),
        measured_stops=sum(1 for i in finished if mine[i][0] == "stop"),
        compared=len(both),
        changed=len(changed),
        changed_indices=tuple(changed[:shown]),
    )


def output_change_reason(change: OutputChange | None) -> str | None:
    """Why a run whose output lengths or EOS share moved against the baseline's cannot be
    judged; None when they agree (or too few prompts were shared to tell)."""
    if change is None or not (change.lengths_moved or change.eos_moved):
        return None
    parts = []
    length = change.length_change
    if length is not None:
        parts.append(
            f"{change.measured_tokens:,} output tokens against the baseline's {change.baseline_tokens:,} "
            f"({length:+.1%}, bound {LENGTH_BOUND:.0%})"
        )
    eos = change.eos_change
    if eos is not None and change.finish_compared:
        parts.append(
            f"{change.measured_stops} of {change.finish_compared} replies ended with EOS against the "
            f"baseline's {change.baseline_stops} ({eos * 100:+.0f} points, bound {EOS_BOUND * 100:.0f})"
        )
    shorter = (length or 0.0) < 0 or (eos or 0.0) > 0
    how = (
        "the server stops early: shorter replies do less work, which reads as faster per request"
        if shorter
        else "the server's replies run longer: more work per request, which reads as slower"
    )
    return (
        f"outputs changed length on the {change.shared} prompts both runs completed: {'; '.join(parts)}; "
        f"{how}, not a change of the engine; if the new lengths are right (a new chat template or "
        "tokenizer), re-record with --update-baselines, else the image has a correctness problem"
    )
