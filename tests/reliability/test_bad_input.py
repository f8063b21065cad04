"""Issue 14, point 8: bad input is found before any server starts, in one line with the fix.

Markers, tolerance strings and keys, the dataset and baseline files are checked at
collection or when the session starts: each case here asserts the outcome (a usage
error, exit 4), the message a user reads, that it is one line with no traceback through
the plugin, and that no server was started. None of them runs a workload, so the file
takes seconds.

What only a running server can tell (prompts too long or short by its tokenizer's
counts) fails that test in one line instead: tests/unit/judging/test_session.py.
"""

from __future__ import annotations

import json

import pytest

from tests.plugin_project import INI
from tests.plugin_project import run as run_project

# One test per case, on the project's tiny server: the suite's own tests would do too,
# but one test keeps each message about one thing.
ONE_TEST = """
import pytest
from conftest import BASE

@pytest.mark.parametrize("concurrency", [{concurrency}])
@pytest.mark.llmperf(server=BASE, {marker})
def test_one(llmperf, concurrency):
    llmperf.run(concurrency=concurrency).assert_no_regression("decode_tok_s")
"""


def run(project, *args):
    # Without hypothesis's plugin, if installed: it imports hypothesis afresh in every
    # in-process run (pytester drops modules a run loaded), a second of each case here.
    return run_project(project, "-p", "no:hypothesispytest", *args)


def one_test(project, marker="num_prompts=8, max_tokens=16, warmup=1", concurrency="2"):
    project.makepyfile(test_suite=ONE_TEST.format(marker=marker, concurrency=concurrency))


def refused(result, message):
    """A usage error whose one message line carries `message`, before any server started."""
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    errors = [line for line in result.stderr.lines if line.startswith("ERROR: ")]
    assert len(errors) == 1 and message in errors[0], result.stderr.str()
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
    assert "starting server" not in result.stdout.str()
    return errors[0]


# -- markers (each value's check: tests/unit/workload/test_workload.py) ------------------


@pytest.mark.parametrize(
    "marker, message",
    [
        ("warmup=-1", "warmup=-1: warmup (warm-up requests before the measured window) takes a whole number >= 0"),
        ("num_prompts=12.5", "num_prompts=12.5: num_prompts (measured requests) takes a whole number >= 1"),
        ("num_prompts=-3", "num_prompts=-3: num_prompts (measured requests) takes a whole number >= 1"),
        ("max_tokens='48'", "max_tokens='48': max_tokens (output tokens per request) takes a whole number >= 1"),
        ("max_seconds=-5", "max_seconds=-5: max_seconds (the time cap) takes a number of seconds > 0, or None"),
        ("seed=0.5", "seed=0.5: seed (the sampling seed) takes a whole number"),
        ("ignore_eos='no'", "ignore_eos='no': ignore_eos (whether to generate past the end of sequence) takes True"),
        (
            "endpoint='embeddings'",
            "endpoint='embeddings': endpoint (the OpenAI endpoint) takes 'completions' or 'chat'",
        ),
        (
            "warmup={2: 1, 8: -1}",
            "warmup={2: 1, 8: -1}: the value for concurrency 8: warmup (warm-up requests before the measured window)",
        ),
        ("num_prompts={4: 8}", "num_prompts={4: 8} has no entry for concurrency 2 (add 2: ... or 'default': ...)"),
        ("num_prompt=8", "unknown @pytest.mark.llmperf argument(s) ['num_prompt']; did you mean num_prompts?"),
        ("slos='ttfb:500'", "slos='ttfb:500': slos (the SLOs goodput is judged at) takes KEY:VALUE pairs in ms"),
        ("slos='ttfb:500'", "unknown SLO 'ttfb' in 'ttfb:500'; did you mean ttft? the SLOs are ttft, tpot, e2el"),
        ("slos='ttft:500 tpot'", "'tpot' is not a KEY:VALUE pair; write KEY:VALUE pairs in milliseconds"),
        ("slos={'ttft': 500}", "slos={'ttft': 500}: SLOs are vLLM's --goodput text, not a dict; write slos='ttft:500'"),
        ("dataset_name='hf'", "dataset_name='hf': dataset_name (the dataset, as vllm bench serve --dataset-name)"),
        ("random_input_len=64", "random_input_len apply to dataset_name='random' only (this test's dataset is"),
        ("dataset_name='random', random_range_ratio=1.5", "random_range_ratio=1.5: random_range_ratio"),
        ("dataset_name='custom'", "dataset_name='custom' needs its JSONL file: dataset_path='prompts.jsonl'"),
    ],
)
def test_a_bad_workload_value_in_the_marker_is_a_usage_error_at_collection(project, marker, message):
    one_test(project, marker)
    line = refused(run(project), message)
    assert line.startswith("ERROR: test_suite.py::test_one[2]: ")


@pytest.mark.parametrize("concurrency, shown", [("0", "0"), ("-8", "-8"), ("2.5", "2.5"), ("'8'", "'8'")])
def test_a_bad_concurrency_parameter_is_a_usage_error_at_collection(project, concurrency, shown):
    one_test(project, concurrency=concurrency)
    line = refused(run(project), f"(its concurrency parameter): concurrency must be a whole number >= 1, got {shown}")
    assert line.startswith("ERROR: test_suite.py::test_one[")


# -- tolerances ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "tolerances, message",
    [
        (
            '{"decode_toks": "3%"}',
            "llmperf tolerances: unknown metric 'decode_toks'; did you mean decode_tok_s, steady_decode_tok_s?",
        ),
        ('{"decode_tok_s": "5 percent"}', "tolerance for decode_tok_s: invalid tolerance '5 percent'; accepted forms"),
        ('{"decode_tok_s": 0.05}', "tolerance for decode_tok_s: tolerance must be a string, got 0.05"),
        (
            '{"decode_tok_s": "+5%"}',
            "'+5%' has the wrong sign: decode_tok_s is higher-is-better, so a regression is a drop; "
            "write '5%' or '-5%'",
        ),
        (
            '{"ttft_ms_median": "-5%"}',
            "tolerance for ttft_ms_median: '-5%' has the wrong sign: ttft_ms_median is lower-is-better, "
            "so a regression is a rise; write '5%' or '+5%'",
        ),
    ],
)
def test_a_bad_marker_tolerance_is_a_usage_error_at_collection(project, tolerances, message):
    one_test(project, f"num_prompts=8, tolerances={tolerances}")
    line = refused(run(project), message)
    assert line.startswith("ERROR: test_suite.py::test_one[2]: llmperf tolerances: ")


@pytest.mark.parametrize(
    "line, message",
    [
        ("decode_tokz = 5%", "ini llmperf_tolerances: tolerance override: unknown metric 'decode_tokz'; did you mean"),
        ("ttft_ms_median = -10%", "tolerance override for ttft_ms_median: '-10%' has the wrong sign"),
        ("decode_tok_s 5%", "expected 'metric = tolerance', e.g. 'decode_tok_s = 3%'"),
    ],
)
def test_a_bad_ini_tolerance_is_a_usage_error_at_configure(project, line, message):
    project.makeini(INI + f"    {line}\n")
    refused(run(project), message)


# -- the dataset (each case: tests/unit/judging/test_session.py) ----------------------------


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "ini option llmperf_dataset (sharegpt.json): configured dataset not found; looked at: sharegpt.json"),
        ("", "sharegpt.json: file is empty; point ini option llmperf_dataset at a ShareGPT V3 JSON file"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "sharegpt.json: not UTF-8 text"),
        ('{"id": "c0", "conversations": []}\n', "found a JSON object (JSON Lines? ShareGPT V3 is one array)"),
        ("[]", "sharegpt.json: no conversation with two or more turns (0 records read), nothing to send"),
    ],
)
def test_a_missing_empty_binary_or_unparseable_dataset_is_a_usage_error_at_session_start(project, content, message):
    path = project.path / "sharegpt.json"
    if content is None:
        path.unlink()
    elif isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    refused(run(project), message)


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "dataset_path='prompts.jsonl': configured dataset not found; looked at: prompts.jsonl"),
        ("", "prompts.jsonl: no prompts (the file is empty or blank); write one JSON object per line"),
        ('{"prompt": "a"}\n[1, 2]\n', "prompts.jsonl: 1 bad line(s) of 2; each line must be one JSON object"),
        ('{"prompt": "a"}\n' * 3, "but dataset prompts.jsonl has 3 prompts; lower num_prompts= (or warmup=) in its"),
    ],
)
def test_a_missing_empty_malformed_or_short_prompt_file_is_a_usage_error_before_any_server(project, content, message):
    one_test(project, "num_prompts=8, max_tokens=16, warmup=1, dataset_name='custom', dataset_path='prompts.jsonl'")
    if content is not None:
        (project.path / "prompts.jsonl").write_text(content)
    refused(run(project), message)


def test_an_unreadable_dataset_path_is_a_usage_error(project):
    (project.path / "sharegpt.json").unlink()
    (project.path / "sharegpt.json").mkdir()  # exists, cannot be read as a file (root reads any file)
    refused(run(project), "dataset path sharegpt.json exists but is not a file")


def test_a_dataset_too_small_for_the_largest_workload_names_the_test_and_the_marker_keys(project):
    one_test(project, "num_prompts=70, warmup=1")  # the project's dataset has 60 conversations
    line = refused(run(project, "--update-baselines"), "test_suite.py::test_one[2] needs 71 prompts at concurrency 2")
    assert line.endswith(
        "(70 measured + 1 warm-up, profile full) but dataset sharegpt.json has 60 conversations; lower num_prompts= "
        "(or warmup=) in its llmperf marker, run a smaller --llmperf-profile, or point ini option llmperf_dataset "
        "at a larger file"
    )
    assert "oversample" not in line


# -- baseline files (each case: tests/unit/judging/test_session.py, tests/unit/baselines/) --


@pytest.mark.parametrize(
    "folder, content, message",
    [
        (
            "sim",
            '{"format": 2, "concurrency": {',
            "baseline baselines/sim/tiny.json: not valid JSON (line 1, column 31: Expecting property name enclosed "
            "in double quotes); the tests of tiny read it: fix it, or delete it and record again with "
            "--update-baselines",
        ),
        (
            "sim",
            '{"format": 7, "target": "sim", "server": "tiny", "concurrency": {}}',
            "baseline baselines/sim/tiny.json: unsupported format 7 (this plugin reads format 1 or 2); the tests of",
        ),
        (
            "sim",
            '{"format": 2, "target": "sim", "server": "tiny", "concurrency": {"4": {"x=1": {"metrics": {}}}}}',
            "baseline baselines/sim/tiny.json: concurrency[4]['x=1']: missing or invalid 'workload'",
        ),
        (
            "published",
            "{}",
            "published figures baselines/published/tiny.json: unsupported format None (this plugin reads format 1); "
            "fix it by hand (hand-curated, never recorded), or delete it",
        ),
    ],
)
@pytest.mark.parametrize("mode", [[], ["--update-baselines"]])
def test_a_corrupt_baseline_file_the_tests_read_is_a_usage_error_at_session_start(
    project, folder, content, message, mode
):
    """Comparing would read it after the workload ran, recording would refuse to overwrite it:
    either way it is named before any server starts."""
    one_test(project)
    path = project.path / "baselines" / folder / "tiny.json"
    path.parent.mkdir(parents=True)
    path.write_text(content)
    refused(run(project, *mode), message)
    assert path.read_text() == content  # left as it was, for the user to look at


# -- baselines keyed by workload (the layout: tests/unit/baselines/test_store.py) ----------


TWO_WORKLOADS = """
import pytest
from conftest import BASE

@pytest.mark.parametrize("concurrency", [2])
@pytest.mark.llmperf(server=BASE, num_prompts=4, max_tokens=8, warmup=0)
def test_short(llmperf, concurrency):
    llmperf.run(concurrency=concurrency).assert_no_regression("decode_tok_s")

@pytest.mark.parametrize("concurrency", [2])
@pytest.mark.llmperf(server=BASE, num_prompts=4, max_tokens=32, warmup=0)
def test_long(llmperf, concurrency):
    llmperf.run(concurrency=concurrency).assert_no_regression("decode_tok_s")
"""


def test_two_workloads_of_one_server_and_concurrency_keep_two_baseline_entries(project):
    """They overwrote each other's entry. The one case here that runs a server: two tiny runs."""
    project.makepyfile(test_suite=TWO_WORKLOADS)
    run(project, "--update-baselines").assert_outcomes(passed=2)
    doc = json.loads((project.path / "baselines" / "sim" / "tiny.json").read_text())
    entries = doc["concurrency"]["2"]
    assert sorted(e["workload"]["max_tokens"] for e in entries.values()) == [8, 32]
    assert all(f"max_tokens={e['workload']['max_tokens']} " in key for key, e in entries.items())
    recorded = {e["workload"]["max_tokens"]: e["metrics"]["decode_tok_s"]["value"] for e in entries.values()}
    result = run(project, "--llmperf-report", "report.json")
    judged = json.loads((project.path / "report.json").read_text())["verdicts"]
    # Each judged against its own entry (pass or not: timing on this shared machine is not the point).
    assert {v["test"]: v["verdicts"][0]["baseline"] for v in judged} == {
        "test_suite.py::test_short[2]": recorded[8],
        "test_suite.py::test_long[2]": recorded[32],
    }
    assert "different workload" not in result.stdout.str() and "MISSING BASELINE" not in result.stdout.str()


@pytest.mark.parametrize("flag", ["--llmperf-dataset", "--llmperf-hf-cache", "--llmperf-baselines-dir"])
def test_an_option_path_outside_the_project_given_with_a_space_and_no_test_path_is_a_usage_error(
    project, tmp_path_factory, flag
):
    # pytest reads the command line for its rootdir before plugins add their options: the
    # value would be taken for a test path, and the run judged against that folder.
    other = tmp_path_factory.mktemp("other")
    (other / "sharegpt.json").write_text((project.path / "sharegpt.json").read_text())
    value = str(other / "sharegpt.json") if flag == "--llmperf-dataset" else str(other)
    result = run(project, "-k", "test_base", flag, value)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {flag} {value}: pytest took {value} for a test path*write {flag}={value}, *"])
    assert list(other.iterdir()) == [other / "sharegpt.json"]  # nothing written there


def test_an_option_path_outside_the_project_given_with_an_equals_sign_keeps_the_projects_root(
    project, tmp_path_factory
):
    other = tmp_path_factory.mktemp("other")
    (other / "sharegpt.json").write_text((project.path / "sharegpt.json").read_text())
    result = run(project, "-k", "test_base", f"--llmperf-dataset={other / 'sharegpt.json'}", "--update-baselines")
    result.assert_outcomes(passed=1, deselected=2)
    assert (project.path / "baselines" / "sim" / "tiny.json").exists()
    assert list(other.iterdir()) == [other / "sharegpt.json"]


RUN_CALL = """
import pytest
from conftest import BASE

@pytest.mark.llmperf(server=BASE, num_prompts=8, max_tokens=16, warmup=1)
def test_call(llmperf):
    llmperf.run({call})
"""


@pytest.mark.parametrize(
    "call, message",
    [
        ("concurrency=0", "concurrency must be a whole number >= 1, got 0"),
        ("concurrency='4'", "concurrency must be a whole number >= 1, got '4'"),
        ("concurrency=2, num_prompts=-1", "llmperf.run(): num_prompts=-1: num_prompts (measured requests) takes"),
        ("concurrency=2, foo=1", "llmperf.run(): unknown workload key(s) ['foo']"),
        ("concurrency=2, server='nope'", "llmperf.run(): server='nope': no server is declared here"),
        ("concurrency=2, server=3", "llmperf.run(): server= must be a declared server's name or a ServerSpec, got 3"),
    ],
)
def test_a_bad_argument_to_llmperf_run_fails_the_test_in_one_line_without_a_traceback(project, call, message):
    project.makepyfile(test_suite=RUN_CALL.format(call=call))
    result = run(project)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert f"test_suite.py::test_call: {message}" in out
    assert "raise " not in out and "UsageError" not in out and "Traceback" not in out
    assert "starting server" not in out


def test_a_typo_in_an_asserted_metric_is_a_usage_error_before_any_server_starts(project):
    project.makepyfile(
        test_suite=ONE_TEST.format(marker="num_prompts=8, max_tokens=16, warmup=1", concurrency=2).replace(
            '"decode_tok_s"', '"decode_toks"'
        )
    )
    line = refused(run(project, "--update-baselines"), "assert_no_regression: unknown metric 'decode_toks'")
    assert line.startswith("ERROR: test_suite.py::test_one[2] (line 7): ")
    assert "did you mean decode_tok_s, steady_decode_tok_s?" in line
