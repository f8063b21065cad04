"""Value parsers shared by `llmperf`'s flags, the plugin's options and the marker's check.
A `Value` reads text before checking it; `check` takes a Python value as it is.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

T = TypeVar("T")


class BadValue(ValueError, argparse.ArgumentTypeError):
    """A refused value: "expected TAKES, got VALUE[; why]"; argparse shows it as the usage error."""

    def __init__(self, takes: str, got: Any, why: str = "") -> None:
        self.takes, self.more = takes, f"; {why}" if why else ""
        super().__init__(f"expected {takes}, got {got!r}{self.more}")


@dataclass(frozen=True)
class Value(Generic[T]):
    takes: str  # what it accepts, for messages: "a whole number >= 1"
    fits: Callable[[Any], bool]  # a value as it is; may raise ValueError saying why not
    read: Callable[[str], Any] = str  # text -> the value `fits` checks (ValueError: unreadable)

    def __call__(self, raw: Any) -> T:
        """From text (stripped, then read), or a value already of its type."""
        try:
            value = self.read(raw.strip()) if isinstance(raw, str) else raw
        except ValueError:
            raise BadValue(self.takes, raw) from None
        return self.check(value, raw)

    def check(self, value: Any, shown: Any = None) -> T:
        """`value` as it is, nothing read from text; BadValue naming `shown` (else the value)."""
        try:
            ok, why = self.fits(value), ""
        except ValueError as exc:
            ok, why = False, str(exc)
        if not ok:
            raise BadValue(self.takes, value if shown is None else shown, why)
        return cast(T, value)

    def require(self, value: Any, name: str, error: type[Exception] = ValueError) -> T:
        """A function's argument as it is, else `error`("NAME must be TAKES, got VALUE")."""
        if not self.fits(value):
            raise error(f"{name} must be {self.takes}, got {value!r}")
        return cast(T, value)


def is_number(value: Any) -> bool:
    """An int or a float, not a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def whole(least: int | None = None) -> Value[int]:
    """A whole number >= `least` (None: any); 12.5, True and "3" given as values are refused."""
    return Value(
        "a whole number" + ("" if least is None else f" >= {least}"),
        lambda v: isinstance(v, int) and not isinstance(v, bool) and (least is None or v >= least),
        int,
    )


def or_word(value: Value[T], word: str, note: str = "") -> Value[T | str]:
    """`value`, or `word` (text in any case): "a whole number >= 0, or 'wave' (one per stream)"."""
    return Value(
        f"{value.takes}, or {word!r}" + (f" {note}" if note else ""),
        lambda v: v == word or value.fits(v),
        lambda text: word if text.lower() == word else value.read(text),
    )


def one_of(names: tuple[str, ...], takes: str = "") -> Value[str]:
    return Value(takes or f"one of {', '.join(names)}", names.__contains__)


# Text words of a switch, lower-cased.
SWITCH_WORDS = {
    **dict.fromkeys(("1", "true", "yes", "on"), True),
    **dict.fromkeys(("0", "false", "no", "off", ""), False),
}
SWITCH: Value[bool] = Value("True or False", lambda v: isinstance(v, bool), lambda t: SWITCH_WORDS.get(t.lower(), t))
POSITIVE: Value[float] = Value("a number > 0", lambda v: is_number(v) and v > 0, float)
# A verdict's confidence (docs/verdicts.md).
CONFIDENCE: Value[float] = Value(
    "a confidence between 0.5 and 0.999 (e.g. 0.95)", lambda v: is_number(v) and 0.5 <= v <= 0.999, float
)
# A time cap: None (text: none or 0) is no cap.
TIME_CAP: Value[float | None] = Value(
    "a number of seconds > 0, or None for no cap",
    lambda v: v is None or (is_number(v) and 0 < v < math.inf),
    lambda t: None if t.lower() in ("none", "0") else float(t),
)
DURATION_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def _duration(text: str) -> float:
    match = re.fullmatch(r"(\d+(?:\.\d*)?|\.\d+)\s*([smhd]?)", text.lower())
    if not match:
        raise ValueError(text)
    return float(match.group(1)) * DURATION_UNITS[match.group(2) or "s"]


DURATION: Value[float] = Value(
    "a duration > 0 such as 30m, 24h, 2d or 3600 (seconds)", lambda v: is_number(v) and v > 0, _duration
)
