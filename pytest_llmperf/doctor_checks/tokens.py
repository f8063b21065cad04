"""The tokens the servers pass through from this environment: set or not."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pytest_llmperf.doctor_checks.check import FAIL, OK, Check


def check_tokens(names: Sequence[str], environ: Mapping[str, str]) -> list[Check]:
    checks = []
    for token in names:
        if environ.get(token):
            checks.append(Check(token, OK, "set (passed to the server by name, shown as ***)"))
        else:
            checks.append(
                Check(
                    token,
                    FAIL,
                    "not set, but a server passes it through from this environment (gated models need it)",
                    f"`export {token}=hf_...` (a read token from https://huggingface.co/settings/tokens)",
                )
            )
    return checks
