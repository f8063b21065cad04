"""Secrets: which names and values are secret, and their redaction, one rule for every
place that shows or writes data."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

REDACTED = "***"

# Variables that hold a Hugging Face token whether or not a spec names them.
ALWAYS_SECRET_ENV = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")

# Words of a name split at anything but letters and digits ("max_tokens": a count, not a secret).
_SECRET_WORDS = frozenset(
    {
        "TOKEN",
        "SECRET",
        "SECRETS",
        "PASSWORD",
        "PASSWD",
        "CREDENTIAL",
        "CREDENTIALS",
        "AUTH",
        "AUTHORIZATION",
        "COOKIE",
        "APIKEY",
    }
)
_SECRET_WORD_ENDS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "APIKEY")  # "HFTOKEN", "DBPASSWORD"
_SECRET_WORD_STARTS = ("SECRET", "PASSW")  # "SECRETKEY", "PASSWORDFILE"
_SECRET_INFIXES = ("API_KEY", "ACCESS_KEY", "PRIVATE_KEY")
_SECRET_VALUE = re.compile(
    r"\bhf_[A-Za-z0-9]{20,}"  # Hugging Face token
    r"|\bsk-[A-Za-z0-9_-]{16,}"  # OpenAI-style key
    r"|\bgh[pousr]_[A-Za-z0-9]{20,}"  # GitHub token
    r"|\bAKIA[0-9A-Z]{16}\b"  # AWS access key id
    r"|(?i:\bbearer\s+[A-Za-z0-9._~+/-]{8,})"
    r"|(?i:(token|secret|password|api_key)=(?!\*\*\*)\S+)"
)
# The userinfo of a URL ("http://user:password@host"), up to its "@".
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)(?!\*\*\*@)[^\s/?#@]+@")


def is_secret_name(name: str) -> bool:
    """Whether a variable, key or flag name says its value is secret: HF_TOKEN, api_key,
    --api-key, DB_PASSWORD, Authorization; not max_tokens or tokenizer."""
    upper = re.sub(r"[^A-Z0-9]+", "_", str(name).upper())  # "--api-key" -> "_API_KEY"
    if any(infix in upper for infix in _SECRET_INFIXES):
        return True
    words = [w for w in upper.split("_") if w]
    return any(w in _SECRET_WORDS or w.endswith(_SECRET_WORD_ENDS) or w.startswith(_SECRET_WORD_STARTS) for w in words)


def looks_like_secret(text: str) -> bool:
    """Whether a value has the shape of a credential (hf_..., sk-..., "Bearer ...", ...)."""
    return bool(_SECRET_VALUE.search(text))


def redact_env(env: Mapping[str, str | None], secret_names: Iterable[str] = ()) -> dict[str, str | None]:
    """`env` with the value of each secret name (by `is_secret_name`, or listed in
    `secret_names`) shown as REDACTED; None (passed through by name) stays None."""
    listed = set(secret_names)
    return {
        k: (REDACTED if v is not None and (k in listed or is_secret_name(k)) else v) for k, v in sorted(env.items())
    }


def redact_args(args: Sequence[str]) -> list[str]:
    """A command line with secret values shown as REDACTED: the value after a secret flag
    (`--api-key KEY`, `--api-key=KEY`) and any argument that looks like a credential."""
    out: list[str] = []
    hide_next = False
    for arg in args:
        flag, eq, _ = arg.partition("=")
        if hide_next and not arg.startswith("--"):
            out.append(REDACTED)
            hide_next = False
            continue
        hide_next = False
        if arg.startswith("-") and is_secret_name(flag.lstrip("-")):
            out.append(f"{flag}={REDACTED}" if eq else arg)
            hide_next = not eq
        else:
            out.append(REDACTED if looks_like_secret(arg) else arg)
    return out


def secret_arg_values(args: Sequence[str]) -> list[str]:
    """The values `redact_args` hides, to scrub from text that may quote them (a server's log)."""
    values = []
    for arg, shown in zip(args, redact_args(args)):
        if shown == arg:
            continue
        flag, eq, value = arg.partition("=")
        values.append(value if eq and shown == f"{flag}={REDACTED}" else arg)
    return values


def redact_text(text: str, secrets: Iterable[str]) -> str:
    """Free text (a server's log) with secret values, credential-shaped words and URL
    userinfo shown as REDACTED."""
    return redact_url(_SECRET_VALUE.sub(REDACTED, redact(text, secrets)))


def redact_url(text: str) -> str:
    """`text` with the userinfo of every URL in it shown as REDACTED:
    "http://user:pw@host:8000" -> "http://***@host:8000"."""
    return _URL_USERINFO.sub(r"\1" + REDACTED + "@", text)


def has_userinfo(url: str) -> bool:
    """Whether a URL carries credentials before its host ("http://user:pw@host")."""
    return redact_url(url) != url


def strip_secrets(value: Any) -> Any:
    """`value` (nested) without keys that name or hold secrets (one holding REDACTED or None
    is kept: a secret was set), credential-looking list items shown as REDACTED."""
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if is_secret_name(k) and v not in (REDACTED, None):
                continue
            if isinstance(v, str) and looks_like_secret(v):
                continue
            out[str(k)] = strip_secrets(v)
        return out
    if isinstance(value, (list, tuple)):
        return [REDACTED if isinstance(v, str) and looks_like_secret(v) else strip_secrets(v) for v in value]
    return value


class Secrets:
    """Secret values to scrub from text. Its repr never shows them."""

    def __init__(self, values: Iterable[str | None] = ()) -> None:
        # Longest first so a secret that contains another is replaced whole.
        self._values = sorted({v for v in values if v}, key=len, reverse=True)

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"Secrets(<{len(self._values)} redacted>)"


def redact(text: str, secrets: Iterable[str]) -> str:
    """`text` with every occurrence of every secret value replaced by REDACTED."""
    for value in secrets:
        if value:
            text = text.replace(value, REDACTED)
    return text


class RedactedEnv(dict[str, str]):
    """An environment to hand to a process or container; its repr masks the values of
    secret names, so `pytest -l` (locals in tracebacks) cannot print them."""

    def __init__(self, values: Mapping[str, str], secret_names: Iterable[str]) -> None:
        super().__init__(values)
        self.secret_names = frozenset(secret_names)

    def __repr__(self) -> str:
        shown = {k: (REDACTED if k in self.secret_names else v) for k, v in self.items()}
        return f"RedactedEnv({shown!r})"

    __str__ = __repr__
