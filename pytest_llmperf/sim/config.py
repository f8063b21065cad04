"""SimConfig: everything one simulated server needs, and vLLM's command-line shape.

`from_vllm_argv` accepts what `vllm serve` accepts (MODEL first, or --model), keeps
the flags that matter to the simulation and ignores the others with a log line, so
a container can run the simulator with the exact arguments it would give vLLM. Our
own knobs travel as `--sim-*` flags.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field, replace
from typing import Any

from pytest_llmperf.sim.profiles import Profile, profile_by_name, resolve_profile

log = logging.getLogger("pytest_llmperf.sim")

# The knobs settable as --sim-<name with dashes>: (value parser, meaning). The parser
# reads this table and `--help` prints it, so a flag is never accepted unexplained.
_SIM_FLAGS: dict[str, tuple[type, str]] = {
    "speed": (float, "every cost divided by it; ratios (speedup, acceptance) unchanged (default 1: real time)"),
    "profile": (str, "timing profile: qwen3.6-35b-a3b-fp8, qwen3.6-27b-fp8, generic (default: from the model)"),
    "acceptance_scale": (float, "regression knob: per-position acceptance rates times this (default 1)"),
    "acceptance_spread": (float, "per-request predictability spread in logits; 0: i.i.d. draws (default: profile's)"),
    "step_time_scale": (float, "regression knob: every step cost times this (default 1)"),
    "prefill_time_scale": (float, "regression knob: the cost of each prompt token prefilled times this (default 1)"),
    "max_prefill_seqs": (int, "regression knob: prompts one engine step prefills at most (default: --max-num-seqs)"),
    "prefill_budget": (int, "regression knob: prompt tokens one engine step prefills at most (default 8192)"),
    "run_noise": (float, "per start, step costs times exp(N(0, this)); 0.01 = 1 % (default 0)"),
    "acceptance_noise": (float, "per start, acceptance rates times 1 + N(0, this) (default 0)"),
    "noise_seed": (int, "seeds both per-start draws (default: a new draw every start)"),
    "crash_after_requests": (int, "fault: the request after this many kills the engine"),
    "crash_after_seconds": (float, "fault: the engine dies this many real seconds after start"),
    "crash_exit": (bool, "fault: the process exits with code 1 when the engine dies, as vLLM does"),
    "error_rate": (float, "fault: fraction of requests answered 500"),
    "stall_seconds": (float, "fault: a stream pauses this long ..."),
    "stall_after_chunks": (int, "... after this many token chunks (default 1)"),
    "malformed_chunk_after": (int, "fault: one broken data: line after this many token chunks"),
    "reset_after_chunks": (int, "fault: the connection is dropped after this many token chunks"),
    "fault_request_rate": (float, "fraction of requests the stream faults hit (default 1)"),
    "slow_start_seconds": (float, "fault: /health and generation answer 503 this long after start"),
    "eos_only_rate": (float, "fraction of prompts answered with one EOS token, never with ignore_eos"),
    "burst_chunks": (int, "a stream's chunks are written this many at a time, as a buffering proxy (default 1)"),
    "reasoning_share": (float, "with --reasoning-parser qwen3: share of each reply spent reasoning"),
    "early_stop_rate": (float, "fraction of prompts that stop with EOS at half their length"),
    "changed_output_rate": (float, "fraction of prompts answered with another text, same length and timing"),
    "usage_offset": (int, "usage reports this many more completion tokens than generated (negative: fewer)"),
    "prompt_word_tokens": (int, "tokens each prompt word costs in /tokenize and usage, 1 to 8 (default 1)"),
    "no_tokenize": (bool, "/tokenize answers 404, as a server without it"),
    "counter_scale": (float, "vllm:generation_tokens_total counts this times what was generated (default 1)"),
}


def sim_flags_help() -> list[str]:
    """One line per --sim-* flag: the flag, its value's type and its meaning, from _SIM_FLAGS."""
    flags = {
        f"--sim-{key.replace('_', '-')}" + ("" if t is bool else f" {'NAME' if t is str else t.__name__.upper()}"): m
        for key, (t, m) in _SIM_FLAGS.items()
    }
    width = max(map(len, flags))
    return [f"  {flag.ljust(width)}  {meaning}" for flag, meaning in flags.items()]


# The --reasoning-parser names whose streams the simulator writes (vLLM's qwen3 parser:
# the reply starts inside its reasoning, `</think>` ends it).
REASONING_PARSERS = ("qwen3",)

# vLLM flags that take no value (so the next word is not swallowed when ignoring them).
_VLLM_BOOL_FLAGS = {
    "--enforce-eager",
    "--trust-remote-code",
    "--disable-log-requests",
    "--enable-prefix-caching",
    "--no-enable-prefix-caching",
    "--enable-chunked-prefill",
    "--no-enable-chunked-prefill",
    "--enable-auto-tool-choice",
    "--disable-frontend-multiprocessing",
    "--enable-log-requests",
    "--disable-fastapi-docs",
    "--enable-prompt-tokens-details",
    "--enable-server-load-tracking",
    "--disable-uvicorn-access-log",
    "--enable-expert-parallel",
    "--async-scheduling",
}


@dataclass
class SimConfig:
    model: str = "sim-model"
    served_model_name: str | None = None
    max_num_seqs: int = 256
    max_model_len: int = 8192
    speculative_config: dict[str, Any] | None = None
    profile: Profile | None = None  # None: resolved from the model name
    speed: float = 1.0  # every cost is divided by this
    seed: int = 0
    host: str = "127.0.0.1"
    port: int = 0  # 0: pick a free port
    # Regression knobs: scale the acceptance rates / the step time.
    acceptance_scale: float = 1.0
    acceptance_spread: float | None = None  # None: the profile's
    step_time_scale: float = 1.0
    prefill_time_scale: float = 1.0  # the prefill part of a step's cost only: moves TTFT's knee, not decode alone
    # Regression knobs of the scheduler (docs/sim.md, "The knee"): the prompts one engine step
    # prefills at most (None: no limit but --max-num-seqs), and the prompt tokens it prefills
    # at most (vLLM's chunked-prefill token budget; None: the profile's, 8192), both taken in
    # arrival order.
    max_prefill_seqs: int | None = None
    prefill_budget: int | None = None
    # Noise between server starts: each start draws a step-time factor exp(N(0, run_noise))
    # and an acceptance factor 1 + N(0, acceptance_noise), from `noise_seed` (None: a new
    # draw every start, as a real server's clocks and state would give).
    run_noise: float = 0.0
    acceptance_noise: float = 0.0
    noise_seed: int | None = None
    # Faults.
    crash_after_requests: int | None = None  # engine dies when this many have been received
    crash_after_seconds: float | None = None  # engine dies this long after start
    crash_exit: bool = False  # and the CLI process exits (code 1), as vLLM does
    error_rate: float = 0.0  # fraction of requests answered 500
    stall_seconds: float = 0.0  # a stream pauses this long ...
    stall_after_chunks: int = 1  # ... after this many chunks
    malformed_chunk_after: int | None = None  # one broken `data:` line after this many chunks
    reset_after_chunks: int | None = None  # connection dropped after this many chunks
    fault_request_rate: float = 1.0  # fraction of requests the stream faults hit
    slow_start_seconds: float = 0.0  # /health answers 503 this long after start
    burst_chunks: int = 1  # a stream's chunks are written this many at a time (a buffering proxy)
    # Replies: the fraction of requests answered with one EOS token (empty text,
    # finish_reason stop, completion_tokens 1), drawn per prompt, never with ignore_eos.
    eos_only_rate: float = 0.0
    # Cross-check faults (docs/sim.md): the fraction of prompts that stop with EOS at half
    # their length (an image that stops early), and of prompts whose text differs at the
    # same length and timing (an image whose outputs changed), each its own draw per prompt;
    # usage reporting `usage_offset` more completion tokens than generated (a negative
    # offset: fewer, never below 0), and vllm:generation_tokens_total counting
    # `counter_scale` times what was generated.
    early_stop_rate: float = 0.0
    changed_output_rate: float = 0.0
    usage_offset: int = 0
    counter_scale: float = 1.0
    # Tokens each word of a prompt costs, in /tokenize and in usage (prompts only): 2 counts
    # the random dataset's made-up words about as a real model's tokenizer does.
    prompt_word_tokens: int = 1
    no_tokenize: bool = False  # /tokenize answers 404, as an OpenAI-compatible server without it
    disable_log_stats: bool = False  # engine counters exist but never move
    # Reasoning (vLLM's --reasoning-parser; chat only): each reply spends `reasoning_share`
    # of its natural length reasoning (None: the profile's), streamed as `delta.reasoning`,
    # then `</think>` and the answer as `delta.content`.
    reasoning_parser: str | None = None
    reasoning_share: float | None = None
    ignored_args: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.profile is None:
            self.profile = resolve_profile(self.model)
        elif isinstance(self.profile, str):
            self.profile = profile_by_name(self.profile)
        if isinstance(self.speculative_config, str):
            self.speculative_config = _parse_spec_json(self.speculative_config)
        self.validate()

    def validate(self) -> None:
        def bad(msg: str) -> None:
            raise ValueError(f"SimConfig: {msg}")

        if not self.model:
            bad("model must be a non-empty name")
        if self.max_num_seqs < 1:
            bad(f"max_num_seqs must be >= 1, got {self.max_num_seqs}")
        if self.max_model_len < 2:
            bad(f"max_model_len must be >= 2, got {self.max_model_len}")
        if not self.speed > 0:
            bad(f"speed must be > 0 (a factor dividing every cost), got {self.speed}")
        if not self.step_time_scale > 0:
            bad(f"step_time_scale must be > 0, got {self.step_time_scale}")
        if not self.prefill_time_scale > 0:
            bad(f"prefill_time_scale must be > 0, got {self.prefill_time_scale}")
        if self.max_prefill_seqs is not None and self.max_prefill_seqs < 1:
            bad(f"max_prefill_seqs must be >= 1 prompt per engine step (unset: no limit), got {self.max_prefill_seqs}")
        if self.prefill_budget is not None and self.prefill_budget < 1:
            bad(f"prefill_budget must be >= 1 prompt token per engine step (unset: 8192), got {self.prefill_budget}")
        if not 0 <= self.acceptance_scale <= 10:
            bad(f"acceptance_scale must be in [0, 10], got {self.acceptance_scale}")
        if self.burst_chunks < 1:
            bad(f"burst_chunks must be >= 1 (1: every chunk written when made), got {self.burst_chunks}")
        for name in ("run_noise", "acceptance_noise"):
            if not 0 <= getattr(self, name) <= 1:
                bad(f"{name} must be a relative spread in [0, 1] (0.01 = 1 %), got {getattr(self, name)}")
        if not 0 <= self.counter_scale <= 10:
            bad(f"counter_scale must be in [0, 10] (1: the counter counts what it generated), got {self.counter_scale}")
        if not 1 <= self.prompt_word_tokens <= 8:
            bad(f"prompt_word_tokens must be 1 to 8 (1: a word piece is one token), got {self.prompt_word_tokens}")
        for name in ("error_rate", "fault_request_rate", "eos_only_rate", "early_stop_rate", "changed_output_rate"):
            v = getattr(self, name)
            if not 0 <= v <= 1:
                bad(f"{name} must be a fraction in [0, 1], got {v}")
        for name in ("stall_seconds", "slow_start_seconds"):
            if getattr(self, name) < 0:
                bad(f"{name} must be >= 0, got {getattr(self, name)}")
        for name in ("crash_after_requests", "crash_after_seconds", "malformed_chunk_after", "reset_after_chunks"):
            v = getattr(self, name)
            if v is not None and v < 0:
                bad(f"{name} must be >= 0 or None, got {v}")
        if self.reasoning_parser is not None and self.reasoning_parser not in REASONING_PARSERS:
            bad(
                f"--reasoning-parser {self.reasoning_parser!r} is not simulated: the simulator writes the "
                f"streams of vLLM's {', '.join(REASONING_PARSERS)} parser (give --reasoning-parser qwen3)"
            )
        if self.reasoning_share is not None:
            if self.reasoning_parser is None:
                bad(
                    "--sim-reasoning-share needs --reasoning-parser qwen3: without a reasoning parser vLLM's "
                    "chat stream has no reasoning field"
                )
            if not 0 <= self.reasoning_share <= 1:
                bad(f"reasoning_share must be a fraction in [0, 1] of each reply, got {self.reasoning_share}")
        if self.stall_after_chunks < 0:
            bad(f"stall_after_chunks must be >= 0, got {self.stall_after_chunks}")
        if self.speculative_config is not None:
            k = self.speculative_config.get("num_speculative_tokens")
            if not isinstance(k, int) or isinstance(k, bool) or k < 1:
                bad(f"speculative_config needs an integer num_speculative_tokens >= 1, got {k!r}")

    # -- derived -------------------------------------------------------------------------
    @property
    def model_id(self) -> str:
        return self.served_model_name or self.model

    @property
    def resolved_profile(self) -> Profile:
        """The profile: `profile` as resolved on init, or the model name's if it was unset since."""
        return self.profile if self.profile is not None else resolve_profile(self.model)

    @property
    def resolved_reasoning_share(self) -> float | None:
        """The share of each chat reply spent reasoning; None without a reasoning parser."""
        if self.reasoning_parser is None:
            return None
        return self.reasoning_share if self.reasoning_share is not None else self.resolved_profile.reasoning_share

    @property
    def num_speculative_tokens(self) -> int:
        return int(self.speculative_config["num_speculative_tokens"]) if self.speculative_config else 0

    def with_(self, **changes: Any) -> SimConfig:
        return replace(self, **changes)

    # -- vLLM command line ---------------------------------------------------------------
    @classmethod
    def from_vllm_argv(cls, argv: list[str]) -> SimConfig:
        """Parse `vllm serve` arguments (MODEL --host --port ...) plus --sim-* flags."""
        args = list(argv)
        if args and args[0] == "serve":
            args = args[1:]
        kw: dict[str, Any] = {}
        ignored: list[str] = []
        i = 0
        while i < len(args):
            word = args[i]
            if not word.startswith("--"):
                if "model" in kw:
                    raise ValueError(f"unexpected argument {word!r}: the model is already {kw['model']!r}")
                kw["model"] = word
                i += 1
                continue
            name, eq, inline = word.partition("=")

            def value(name: str = name, eq: str = eq, inline: str = inline) -> str:
                """The flag's value (--flag=v or --flag v); moves i past it."""
                nonlocal i
                if eq:
                    i += 1
                    return inline
                if i + 1 >= len(args):
                    raise ValueError(f"{name} needs a value")
                i += 2
                return args[i - 1]

            if name == "--model":
                kw["model"] = value()
            elif name == "--host":
                kw["host"] = value()
            elif name == "--port":
                kw["port"] = _int(name, value())
            elif name == "--max-num-seqs":
                kw["max_num_seqs"] = _int(name, value())
            elif name == "--max-model-len":
                kw["max_model_len"] = _parse_len(value())
            elif name == "--speculative-config":
                kw["speculative_config"] = _parse_spec_json(value())
            elif name == "--served-model-name":
                kw["served_model_name"] = value()
                # vLLM accepts several names; the first is the one reported.
                while i < len(args) and not args[i].startswith("--"):
                    i += 1
            elif name == "--seed":
                kw["seed"] = _int(name, value())
            elif name == "--reasoning-parser":
                kw["reasoning_parser"] = value()
            elif name == "--disable-log-stats":
                kw["disable_log_stats"] = True
                i += 1
            elif name.startswith("--sim-"):
                key = name[len("--sim-") :].replace("-", "_")
                if key not in _SIM_FLAGS:
                    known = ", ".join("--sim-" + k.replace("_", "-") for k in _SIM_FLAGS)
                    raise ValueError(f"unknown simulator flag {name}; known: {known}")
                typ = _SIM_FLAGS[key][0]
                if typ is bool:
                    kw[key] = True
                    i += 1
                else:
                    raw = value()
                    try:
                        kw[key] = typ(raw)
                    except ValueError:
                        raise ValueError(f"{name} expects a {typ.__name__}, got {raw!r}") from None
            else:
                # Unknown vLLM flag: skip it and its value, if it has one.
                if (
                    eq
                    or name in _VLLM_BOOL_FLAGS
                    or name.startswith("--no-")
                    or i + 1 >= len(args)
                    or args[i + 1].startswith("--")
                ):
                    i += 1
                else:
                    i += 2
                # The flag alone: a value may be a secret (--api-key KEY), and the simulator
                # knows no rule for which ones are.
                ignored.append(name)
        if "model" not in kw:
            raise ValueError("no model given: vLLM's shape is MODEL [--flags] (or --model MODEL)")
        for item in ignored:
            log.info("sim: ignoring vLLM argument %s (no effect on the simulation)", item)
        return cls(ignored_args=ignored, **kw)

    def to_vllm_argv(self) -> list[str]:
        """The argument list that `from_vllm_argv` turns back into this config."""
        argv = [self.model, "--host", self.host, "--port", str(self.port), "--max-num-seqs", str(self.max_num_seqs)]
        argv += ["--max-model-len", str(self.max_model_len), "--seed", str(self.seed)]
        if self.served_model_name:
            argv += ["--served-model-name", self.served_model_name]
        if self.speculative_config:
            argv += ["--speculative-config", json.dumps(self.speculative_config, separators=(",", ":"))]
        if self.disable_log_stats:
            argv.append("--disable-log-stats")
        if self.reasoning_parser is not None:
            argv += ["--reasoning-parser", self.reasoning_parser]
        defaults = SimConfig(model=self.model)
        for key, (typ, _) in _SIM_FLAGS.items():
            v = getattr(self, key)
            if key == "profile":
                if v.name != resolve_profile(self.model).name:
                    argv += ["--sim-profile", v.name]
                continue
            if v is None or v == getattr(defaults, key):
                continue
            flag = "--sim-" + key.replace("_", "-")
            argv += [flag] if typ is bool else [flag, repr(v) if typ is float else str(v)]
        return argv


def _int(name: str, raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{name} expects an integer, got {raw!r}") from None


def _parse_len(raw: str) -> int:
    """vLLM accepts 65536, 64k, 64K (x1000 / x1024 differ: k=1000, K=1024)."""
    mult = {"k": 1000, "K": 1024, "m": 1_000_000, "M": 1024 * 1024}.get(raw[-1:], 1)
    try:
        return int(float(raw[:-1] if mult != 1 else raw) * mult)
    except ValueError:
        raise ValueError(f"--max-model-len expects a length like 65536 or 64k, got {raw!r}") from None


def _parse_spec_json(raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--speculative-config is not valid JSON ({exc.msg}): {raw!r}") from None
    if not isinstance(value, dict):
        raise ValueError(f"--speculative-config must be a JSON object, got {raw!r}")
    return value


__all__ = ["SimConfig", "sim_flags_help"]
