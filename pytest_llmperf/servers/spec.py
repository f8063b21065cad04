"""ServerSpec: what to serve (model, image, vLLM args, speculative config, env), which
targets turn into a running OpenAI-compatible endpoint."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pytest_llmperf.util.secrets import (
    ALWAYS_SECRET_ENV,
    Secrets,
    is_secret_name,
    redact_args,
    redact_env,
    secret_arg_values,
)

API_KEY_FLAG = "--api-key"  # and the variable vLLM reads the key from without the flag
API_KEY_ENV = "VLLM_API_KEY"


def _without_flag(args: tuple[str, ...], flag: str) -> list[str]:
    """`args` without `flag` and its value (`--flag VALUE` or `--flag=VALUE`)."""
    out: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg == flag:
            skip = True
        elif not arg.startswith(flag + "="):
            out.append(arg)
    return out


@dataclass(frozen=True)
class ServerSpec:
    name: str
    model: str
    image: str = "vllm/vllm-openai:latest"
    args: tuple[str, ...] = ()
    # The server's environment; None passes the caller's value through by name (HF_TOKEN).
    env: Mapping[str, str | None] = field(default_factory=dict)
    speculative_config: Mapping[str, Any] | None = None
    served_model_name: str | None = None
    secret_env: tuple[str, ...] = ()  # more variables whose values are never shown
    sim_args: tuple[str, ...] = ()  # flags for the simulated server only (an injected regression)
    gpus: int | None = None  # GPUs it uses where its args do not say; --llmperf-gpus slots by it

    def __post_init__(self) -> None:
        if not self.name or not self.model:
            raise ValueError("ServerSpec needs a non-empty name and model")
        if self.gpus is not None and (isinstance(self.gpus, bool) or not isinstance(self.gpus, int) or self.gpus < 1):
            raise ValueError(f"ServerSpec {self.name}: gpus= is the number of GPUs it uses, >= 1; got {self.gpus!r}")
        # Accept lists for convenience but keep the spec hashable.
        object.__setattr__(self, "args", tuple(self.args))
        object.__setattr__(self, "secret_env", tuple(self.secret_env))
        object.__setattr__(self, "sim_args", tuple(self.sim_args))
        object.__setattr__(self, "env", dict(self.env))
        if self.speculative_config is not None:
            object.__setattr__(self, "speculative_config", dict(self.speculative_config))

    def __hash__(self) -> int:
        return hash((self.name, self.model, self.image, self.args, self.speculative_json))

    def __repr__(self) -> str:
        """Secret values redacted: a repr reaches tracebacks (`-l`), JUnit XML and `-vv` diffs."""
        shown = {**self.describe(), "secret_env": self.secret_env, "sim_args": self.sim_args}
        return "ServerSpec(" + ", ".join(f"{k}={v!r}" for k, v in shown.items()) + ")"

    @property
    def is_speculative(self) -> bool:
        return bool(self.speculative_config)

    @property
    def speculative_json(self) -> str | None:
        if not self.speculative_config:
            return None
        return json.dumps(self.speculative_config, sort_keys=True, separators=(",", ":"))

    @property
    def model_id(self) -> str:
        """The name clients send in requests."""
        return self.served_model_name or self.model

    def arg(self, flag: str) -> str | None:
        """The value `args` give `flag` (the last one, as in argparse), or None."""
        value = None
        for i, arg in enumerate(self.args):
            if arg == flag and i + 1 < len(self.args):
                value = self.args[i + 1]
            elif arg.startswith(flag + "="):
                value = arg[len(flag) + 1 :]
        return value

    def with_speculative(self, config: Mapping[str, Any], name: str | None = None) -> ServerSpec:
        """The speculative (e.g. MTP) variant of this base spec."""
        method = str(config.get("method", "spec"))
        return replace(self, name=name or f"{self.name}-{method}", speculative_config=dict(config))

    def with_image(self, image: str) -> ServerSpec:
        return replace(self, image=image)

    def vllm_args(self, host: str = "0.0.0.0", port: int = 8000) -> list[str]:
        """The `vllm serve` command line after the program name, without `--api-key` (it
        would show in `ps`; the server gets it as VLLM_API_KEY, `launch_env`)."""
        argv = [self.model, "--host", host, "--port", str(port), *_without_flag(self.args, API_KEY_FLAG)]
        if self.served_model_name:
            argv += ["--served-model-name", self.served_model_name]
        speculative = self.speculative_json
        if speculative is not None:
            argv += ["--speculative-config", speculative]
        return argv

    def launch_env(self) -> dict[str, str]:
        """VLLM_API_KEY for the `--api-key` that `vllm_args` leaves out."""
        key = self.arg(API_KEY_FLAG)
        return {API_KEY_ENV: key} if key is not None else {}

    def secret_names(self) -> set[str]:
        """The variables whose values must never be shown."""
        return {*ALWAYS_SECRET_ENV, API_KEY_ENV, *self.secret_env, *(k for k in self.env if is_secret_name(k))}

    def secret_values(self, environ: Mapping[str, str] | None = None) -> Secrets:
        """The values to scrub from its server's logs: secret env values (given, or from
        `environ`) and secret args' values."""
        import os

        env = {**(os.environ if environ is None else environ), **{k: v for k, v in self.env.items() if v is not None}}
        return Secrets([*(env.get(n) for n in self.secret_names()), *secret_arg_values(self.args)])

    def describe(self) -> dict[str, Any]:
        """A JSON-able description with secret values (env and args) redacted."""
        return {
            "name": self.name,
            "model": self.model,
            "image": self.image,
            "args": redact_args(self.args),
            "speculative_config": dict(self.speculative_config) if self.speculative_config else None,
            "served_model_name": self.served_model_name,
            "env": redact_env(self.env, self.secret_names()),
            **({"gpus": self.gpus} if self.gpus is not None else {}),
        }
