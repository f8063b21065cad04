"""What the gate made of one assertion (Judgement) and the record report/ makes of it
(GateRecord): the values the terminal summary, the reports and the plugin read."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_llmperf.baselines.compare import Status, Verdict
from pytest_llmperf.baselines.crosscheck import OutputChange
from pytest_llmperf.baselines.entry import BaselineEntry
from pytest_llmperf.baselines.outcome import Outcome


@dataclass(frozen=True)
class Judgement:
    """What the gate made of one assertion (gate.Gate.judge): report/judgement.py puts it in
    words, the session fails or warns as its outcome says. A recorded, refused or unrecorded
    assertion has its `message`; a judged one its verdicts and what they rest on."""

    nodeid: str
    server: str
    concurrency: int
    baseline: str  # where the entry lives: its file, or what a paired or saved run is judged against
    outcome: Outcome
    message: str = ""  # recorded, refused or not recorded: the whole message
    verdicts: tuple[Verdict, ...] = ()
    title: str = ""  # the verdict table's
    failing: tuple[Verdict, ...] = ()  # the verdicts that fail the test (under --llmperf-inconclusive)
    entry: BaselineEntry | None = None  # judged against (None: none)
    invalid: str | None = None  # why the run cannot be judged
    faults: str | None = None  # failures and stalls within the error budget
    outputs: OutputChange | None = None  # the outputs against the entry's
    checked: bool = False  # the outputs were checked against the entry (it and the run have lines)
    canary: bool = False  # outputs changed beyond --llmperf-changed-outputs
    notes: tuple[str, ...] = ()  # lines under the table (auto repetitions stopped by the budget)
    explain: bool = False  # a failing or improved table: what changed since the baseline is said
    speculative: bool = False  # the decode change may be split by acceptance (a valid speculative run)
    provenance: Mapping[str, Any] = field(default_factory=dict)  # the run's
    figures: Mapping[str, float | None] = field(default_factory=dict)  # the run's

    @property
    def suspect(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.status == Status.SUSPECT]

    @property
    def undecided(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.status == Status.INCONCLUSIVE]


@dataclass
class GateRecord:
    """One assertion's outcome, for the terminal summary and the JSON report."""

    nodeid: str
    server: str
    concurrency: int
    baseline_path: str
    verdicts: list[Verdict] = field(default_factory=list)
    outcome: Outcome = Outcome.PASS
    message: str = ""
    # The baseline entry judged against (None: none), for the reports' plots and blocks.
    baseline_figures: dict[str, float] | None = None
    baseline_provenance: dict[str, Any] | None = None
    # Under a failing or improved table (report/explain.py): changes, decode split, lines.
    changes: list[str] = field(default_factory=list)
    attribution: dict[str, Any] | None = None
    explanation: list[str] = field(default_factory=list)
    # Beside the verdict (report/crosscheck.py): the output canary, and cross-checks not run.
    checks: list[str] = field(default_factory=list)
