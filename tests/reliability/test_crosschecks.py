"""The cross-checks (docs/verdicts.md, "Cross-checks"): each trips on its injected
mismatch and stays quiet on a normal run; baselines recorded before them still load."""

import json

from tests.plugin_project import run

# The simulator in real time: at the project's x4 a loaded 2-core machine reads the client as
# lagging (invalid), which is load, not what these tests inject.
BASE_ONLY = ["-k", "test_base", "-o", "llmperf_sim_speed=1"]


def record(project):
    """The base server's baseline only: the fault runs below need nothing else."""
    result = run(project, *BASE_ONLY, "--update-baselines")
    result.assert_outcomes(passed=1, deselected=2)


def sim(*flags):
    return ["--llmperf-sim-args", " ".join(flags), *BASE_ONLY]


def baseline(project):
    path = project.path / "baselines" / "sim" / "tiny.json"
    return path, json.loads(path.read_text())


def test_a_normal_run_passes_every_cross_check_quietly(project):
    record(project)
    _, doc = baseline(project)
    (entry,) = doc["concurrency"]["4"].values()
    assert len(entry["outputs"]) == len(entry["requests"]) == 12  # a line per completed request
    result = run(project, *BASE_ONLY, "--llmperf-inconclusive=pass")
    result.assert_outcomes(passed=1, deselected=2)
    out = result.stdout.str()
    assert "INVALID RUN" not in out and "disagree" not in out
    result.stdout.fnmatch_lines(["*tiny @ 4: outputs: unchanged for all 12 prompts (temperature 0; canary, not gated)"])


def test_usage_or_counter_that_lie_make_the_run_invalid_with_the_three_counts(project):
    record(project)
    result = run(project, *sim("--sim-usage-offset 4"))
    result.assert_outcomes(failed=1, deselected=2)
    result.stdout.fnmatch_lines(
        [
            "*decode_tok_s*INVALID RUN*",
            "*invalid run: output tokens disagree: usage * output tokens, vllm:generation_tokens_total +* over the "
            "window, the client * token events (at least one token each): the engine's counter holds fewer tokens "
            "than usage reports*",
        ]
    )
    result = run(project, *sim("--sim-counter-scale 1.2"), "--update-baselines")  # never recorded either
    result.assert_outcomes(failed=1, deselected=2)
    result.stdout.fnmatch_lines(
        ["*not recorded: invalid run: output tokens disagree: *the engine generated more tokens than the requests*"]
    )


def test_a_server_that_stops_early_is_invalid_not_faster(project):
    record(project)
    result = run(project, *sim("--sim-early-stop-rate 0.5"))
    result.assert_outcomes(failed=1, deselected=2)
    result.stdout.fnmatch_lines(
        [
            "*decode_tok_s*INVALID RUN*",
            "*invalid run: outputs changed length on the 12 prompts both runs completed: * output tokens against the "
            "baseline's * (-*%, bound 5%); * of 12 replies ended with EOS against the baseline's * (+* points, "
            "bound 10); the server stops early*re-record with --update-baselines*",
        ]
    )
    assert "REGRESSED" not in result.stdout.str() and "IMPROVED" not in result.stdout.str()


def test_changed_outputs_are_reported_beside_the_verdict_and_do_not_fail(project):
    record(project)
    result = run(project, *sim("--sim-changed-output-rate 0.5"), "--llmperf-inconclusive=pass")
    result.assert_outcomes(passed=1, deselected=2)
    result.stdout.fnmatch_lines(
        ["*tiny @ 4: outputs changed for * of 12 prompts at temperature 0 (prompt index *; canary, not gated)*"]
    )
    assert "outputs: unchanged" not in result.stdout.str()
    # ... unless the project asks for the canary as a gate
    result = run(
        project, *sim("--sim-changed-output-rate 0.5"), "--llmperf-inconclusive=pass", "-o", "llmperf_changed_outputs=0"
    )
    result.assert_outcomes(failed=1, deselected=2)
    result.stdout.fnmatch_lines(
        ["*outputs changed for * of 12 prompts, beyond --llmperf-changed-outputs 0: the model answers differently*"]
    )


def test_a_baseline_recorded_before_the_output_lines_loads_and_says_what_it_cannot_check(project):
    record(project)
    path, doc = baseline(project)
    for entry in doc["concurrency"]["4"].values():
        del entry["outputs"]
    path.write_text(json.dumps(doc))
    result = run(project, *BASE_ONLY, "--llmperf-inconclusive=pass")
    result.assert_outcomes(passed=1, deselected=2)
    result.stdout.fnmatch_lines(
        [
            "*tiny @ 4: the baseline has no output lines (recorded by an older version): the EOS share and the output "
            "canary are not checked; re-record it to check them"
        ]
    )
    # ... and output lengths are still judged from its request lines
    result = run(project, *sim("--sim-early-stop-rate 0.5"))
    result.assert_outcomes(failed=1, deselected=2)
    result.stdout.fnmatch_lines(["*invalid run: outputs changed length on the 12 prompts*"])
