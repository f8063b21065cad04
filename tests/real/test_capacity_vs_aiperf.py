"""The plugin's capacity search against a peer's own on the real vLLM CPU build: NVIDIA
AIPerf 0.13.0's `--search-recipe max-concurrency-under-sla` (its default smooth isotonic
search: doubles the concurrency until the SLA fails, then probes inside the gap; a
warm-up at each concurrency left out), on a server started with the same flags, the
same random workload (input and output lengths, ignore_eos, prompt count) and the same
SLO, p90 TTFT, on both sides. Both must find a capacity, and they must agree within one
search step. The plugin runs as a user runs it: `pytest --llmperf-local <the prepared
venv's python>` on a capacity test (what `--llmperf-real-cpu` runs).

AIPerf comes from its own venv, prepared by `scripts/aiperf_venv.sh` (`.ci/setup_real_vllm.sh`
runs it); without it this test skips and says so, unless LLMPERF_REQUIRE_REAL_VLLM=1.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from real_vllm_helpers import MAX_MODEL_LEN, MODEL_ID, SERVED_NAME, report, serve

from pytest_llmperf.servers.spec import ServerSpec

pytest_plugins = ["pytester"]
pytestmark = [pytest.mark.slow, pytest.mark.real_vllm]

AIPERF_VERSION = "0.13.0"

# The workload of both searches: short outputs keep a probe near 25 s on two shared cores;
# 48 prompts leave 40 or more after the plugin's opening wave up to 8 users, what a load
# needs to be decided met at p90 when every request meets the SLO (above 8, the server's
# --max-num-seqs, requests queue for a slot and the SLO breaks).
INPUT_LEN = 64
OUTPUT_LEN = 16
NUM_PROMPTS = 48
SEED = 1
MAX_NUM_SEQS = 8
# p90 TTFT limit, chosen on two cores shared with other work so the capacity lands
# mid-range. There the plugin read p90 TTFT 910-930 ms at 3 users, 1,180-1,230 at 4,
# 1,440-1,480 at 5 and 1,780-1,890 at 6; AIPerf, whose p90 counts the opening burst and
# whose streams start each probe in lockstep, read 4 users at 1,220-1,590 ms, 5 at
# 1,520-2,240 and 6 at 1,750-2,610. A limit on a load's own p90 (1,500 ms, at 5) made the
# capacity a coin toss there (4-5 on one side, 3-5 on the other, one search 5 to AIPerf's
# 3); halfway between 5 and 6 the plugin decides both, and AIPerf's spread costs a step.
# Still not always: with fixed lengths and ignore_eos the streams stay in lockstep, so one
# slow step slows a whole group's first tokens, and AIPerf's p90 over 48 requests rests on
# its opening burst plus one such group (a run on cores shared with a benchmark read 4
# users at 1,713 ms and 5 at 1,603: AIPerf 3, the plugin 5). Two runs in six missed so.
TTFT_P90_MS = 1650
# From 3 users both searches bracket in two probes (3, then 6) and AIPerf probes 4 and 5
# inside; from 1 or 2 each side spends two probes more (1 user is the slowest probe). Up
# to 12 users, a faster machine still finds its capacity inside.
WITHIN = (3, 12)

SPEC = ServerSpec(
    name="smollm2-capacity",
    model=MODEL_ID,
    served_model_name=SERVED_NAME,
    args=("--max-model-len", str(MAX_MODEL_LEN), "--max-num-seqs", str(MAX_NUM_SEQS), "--enforce-eager"),
)

CONFTEST = f"""
from pytest_llmperf import ServerSpec

SPEC = ServerSpec(
    name={SPEC.name!r},
    model={SPEC.model!r},
    served_model_name={SPEC.served_model_name!r},
    args={SPEC.args!r},
)
"""

SUITE = f"""
import pytest
from conftest import SPEC

@pytest.mark.llmperf(server=SPEC, dataset_name="random", random_input_len={INPUT_LEN}, max_tokens={OUTPUT_LEN},
                     num_prompts={NUM_PROMPTS}, seed={SEED}, endpoint="chat")
def test_capacity(llmperf):
    found = llmperf.capacity(
        slos={{"ttft_ms_p90": {TTFT_P90_MS}}},
        within={WITHIN!r},
        resolution=1,
        runs_per_probe=2,  # each repeat is a server restart (about 35 s here)
        confirm_runs=1,
        max_runs=10,
    )
    print("CAPACITY-LINE", found.line)
"""

PLUGIN_TIMEOUT_S = 600
AIPERF_TIMEOUT_S = 600


def aiperf_dir() -> Path:
    cache = Path(os.environ.get("LLMPERF_CACHE_DIR") or Path.home() / ".cache" / "pytest-llmperf")
    return cache / f"aiperf-{AIPERF_VERSION}"


@pytest.fixture(scope="module")
def aiperf() -> Path:
    root = aiperf_dir()
    exe = root / "venv" / "bin" / "aiperf"
    if not ((root / "READY").is_file() and exe.is_file()):
        reason = f"AIPerf {AIPERF_VERSION} not prepared in {root}: run scripts/aiperf_venv.sh"
        if os.environ.get("LLMPERF_REQUIRE_REAL_VLLM") == "1":  # CI: a skip would hide the comparison
            pytest.fail(f"LLMPERF_REQUIRE_REAL_VLLM=1 but {reason}", pytrace=False)
        pytest.skip(reason)
    return exe


def plugin_search(pytester, prepared_vllm) -> dict:
    """The plugin's search, from its report document: capacity, interval, probes."""
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_capacity_suite=SUITE)
    # pytester points HOME at its own folder: name the prepared cache explicitly.
    env = {**os.environ, "LLMPERF_CACHE_DIR": str(prepared_vllm.root.parent)}
    command = [sys.executable, "-m", "pytest", "-p", "no:benchmark", "-p", "no:cacheprovider", "-s"]
    command += [f"--llmperf-local={prepared_vllm.python}", "--llmperf-report", "report.json"]
    # one group to stop (its vLLM is a group of its own, stopped on SIGTERM)
    code, output = in_own_group(command, env, pytester.path, PLUGIN_TIMEOUT_S, "the plugin's capacity session")
    assert code == 0, "the plugin's capacity session failed:\n" + "\n".join(output.splitlines()[-60:])
    (found,) = json.loads((pytester.path / "report.json").read_text())["capacities"]
    return found


def in_own_group(command: list[str], env: dict[str, str], cwd: Path, timeout: float, what: str) -> tuple[int, str]:
    """`command` run as a process group of its own (stopped whole: `stopped`): its exit code and output."""
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=cwd, start_new_session=True
    )
    output = stopped(proc, timeout, what)
    return proc.returncode, output


def stopped(proc: subprocess.Popen, timeout: float, what: str) -> str:
    """The process's output once it ends; past `timeout`, its group is stopped (SIGTERM,
    which the plugin's session reads as Ctrl-C and stops its server on, then SIGKILL) and
    the test fails. Whatever of the group is left at the end is killed either way."""
    try:
        output, _ = proc.communicate(timeout=timeout)
        return output
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            output, _ = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            output = ""
        pytest.fail(f"{what} ran past {timeout} s:\n{(output or '')[-4000:]}", pytrace=False)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def plugin_probes(found: dict) -> str:
    return ", ".join(
        f"{p['load']:g}: p90 TTFT {p['values_ms'].get('ttft_ms_p90', float('nan')):.0f} ms {p['outcome']}"
        f" ({p['runs']} run{'s' if p['runs'] != 1 else ''})"
        for p in sorted(found["probes"], key=lambda p: p["load"])
    )


def aiperf_search(exe: Path, url: str, tokenizer: Path, out: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env.update(
        # HF_HUB_OFFLINE=1 breaks AIPerf's tokenizer load from a local folder (it calls
        # snapshot_download(path)); a dead endpoint makes any hub access fail at once instead.
        HF_ENDPOINT="http://127.0.0.1:9",
        # The smooth isotonic search warms each new concurrency up for 60 s or more (15 s a
        # replicate); 3 s is a wave or two of these requests (5 s on the fresh server: the
        # plugin warms a fresh server up with 16 requests, about 7 s here).
        AIPERF_SEARCH_PLANNER_FIRST_PROBE_WARMUP_FLOOR="5",
        AIPERF_SEARCH_PLANNER_DEFAULT_WARMUP_SECONDS="3",
        AIPERF_SEARCH_PLANNER_REPLICATE_WARMUP_FLOOR="3",
        AIPERF_DATASET_MMAP_BASE_PATH=str(out.parent),  # its aiperf_mmap_* folders, else left in the temp folder
    )
    command = [
        str(exe), "profile", "-m", SERVED_NAME, "--url", url, "--endpoint-type", "chat", "--streaming",
        "--tokenizer", str(tokenizer), "--isl", str(INPUT_LEN), "--osl", str(OUTPUT_LEN),
        "--extra-inputs", "ignore_eos:true", "--request-count", str(NUM_PROMPTS), "--random-seed", str(SEED),
        "--ui-type", "none", "--workers-max", "1", "--no-server-metrics",
        "--search-recipe", "max-concurrency-under-sla",
        # The recipe asks for one of its own SLA flags (p95 TTFT, p95 ITL, p99 E2EL or the
        # error rate); the error rate's binds no earlier than a failed request, which meets
        # no SLO in the plugin either. The searched SLO is the p90 TTFT.
        "--error-rate-sla", "0.1",
        "--search-sla", f"time_to_first_token:p90:lt:{TTFT_P90_MS}",
        "--concurrency-min", str(WITHIN[0]), "--concurrency-max", str(WITHIN[1]),
        "--output-artifact-dir", str(out),
    ]  # fmt: skip
    code, output = in_own_group(command, env, out.parent, AIPERF_TIMEOUT_S, "AIPerf's search")  # its workers too
    return subprocess.CompletedProcess(command, code, output, "")


def contradicts_itself(probes: list[tuple[float, float, str]]) -> bool:
    """A load met above a load broken: the search's single pass read noise, not the server."""
    outcomes = [outcome for _, _, outcome in sorted(probes)]
    return "broken" in outcomes and "met" in outcomes[outcomes.index("broken") :]


def aiperf_probes(out: Path) -> tuple[dict, str, bool]:
    history = json.loads((out / "search_history.json").read_text())
    probes = []
    for it in history["iterations"]:
        load = it["variation_values"]["phases.profiling.concurrency"]
        ttft = float("nan")
        for export in sorted((out / f"search_iter_{it['iteration_idx']:04d}").glob("**/profile_export_aiperf.json")):
            ttft = json.loads(export.read_text())["time_to_first_token"]["p90"]
        probes.append((load, ttft, "met" if it["feasible"] else "broken"))
    text = ", ".join(f"{load:g}: p90 TTFT {ttft:.0f} ms {outcome}" for load, ttft, outcome in sorted(probes))
    return history["boundary_summary"], text, contradicts_itself(probes)


def test_capacity_agrees_with_aiperfs_search(aiperf, pytester, prepared_vllm, real_pool, real_target, request):
    real_pool.stop()  # one engine at a time: the plugin's session starts its own
    found = plugin_search(pytester, prepared_vllm)
    ours = found["capacity"]
    our_line = f"plugin: {found['line']}; probes {plugin_probes(found)}"

    server = serve(real_pool, real_target, SPEC)  # the same flags, by the same target
    try:
        out = pytester.path / "aiperf-artifacts"
        done = aiperf_search(aiperf, server.url, prepared_vllm.model, out)
    finally:
        real_pool.stop()
    assert done.returncode == 0 and (out / "search_history.json").is_file(), (
        f"AIPerf's search failed (exit {done.returncode}):\n{done.stdout[-4000:]}"
    )
    boundary, their_probes, noisy = aiperf_probes(out)
    theirs = (boundary.get("feasible_max") or {}).get("value")
    broken = (boundary.get("infeasible_min") or {}).get("value")
    their_line = f"AIPerf {AIPERF_VERSION}: capacity {theirs} ({theirs}-{broken}); probes {their_probes}"

    workload = f"random {INPUT_LEN} in / {OUTPUT_LEN} out, {NUM_PROMPTS} prompts, p90 TTFT < {TTFT_P90_MS} ms"
    report(request, f"capacity vs AIPerf ({workload}): {our_line}")
    report(request, f"capacity vs AIPerf ({workload}): {their_line}")
    both = f"\n  {our_line}\n  {their_line}"
    assert ours is not None and ours >= WITHIN[0], f"the plugin found no capacity within {WITHIN}:{both}"
    assert theirs is not None, f"AIPerf found no capacity within {WITHIN}:{both}"
    if noisy and abs(ours - theirs) > 1:
        # One run a probe, its opening burst counted: a pass that reads a load broken below one
        # it reads met landed on noise, and says nothing of the plugin's figure (the rule).
        pytest.xfail(f"AIPerf's single pass read a load met above one broken, a noise-dependent capacity:{both}")
    assert abs(ours - theirs) <= 1, f"the capacities differ by more than one search step:{both}"
