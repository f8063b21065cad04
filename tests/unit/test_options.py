import re

import pytest

from pytest_llmperf.options import OPTIONS, OptionError, join_flag_values, resolve_options


def resolve(cli=None, ini=None, gpus_here=None):
    cli, ini = cli or {}, ini or {}
    return resolve_options(lambda dest: cli.get(dest), lambda name: ini.get(name, ""), gpus_here=gpus_here)


def test_no_target_by_default_and_defaults_apply():
    opts = resolve()
    assert opts.target is None
    assert opts.profile == "full" and opts.baselines_dir == "baselines" and opts.repetitions == "auto"
    assert "--llmperf-sim" in opts.target_description()


def test_cli_wins_over_ini_and_sources_are_recorded():
    opts = resolve(cli={"llmperf_profile": "smoke"}, ini={"llmperf_profile": "nightly", "llmperf_sim": "true"})
    assert opts.profile == "smoke" and opts.sources["llmperf_profile"] == "cli"
    assert opts.target == "sim" and opts.sources["target"] == "ini"
    assert "from ini" in opts.target_description()


def test_two_targets_are_refused_naming_both_flags():
    with pytest.raises(OptionError, match="--llmperf-sim and --llmperf-gpu"):
        resolve(cli={"llmperf_sim": True, "llmperf_gpu": True})


@pytest.mark.parametrize(
    "cli, message",
    [
        ({"llmperf_profile": "huge"}, "--llmperf-profile: expected one of smoke, nightly, full"),
        ({"llmperf_repetitions": "0"}, "--llmperf-repetitions: expected a whole number >= 1, or 'auto'"),
        ({"llmperf_repetitions": "some"}, "--llmperf-repetitions: "),
        ({"llmperf_inconclusive": "maybe"}, "--llmperf-inconclusive: expected one of warn, fail, pass"),
        ({"llmperf_dataset_name": "hf"}, "--llmperf-dataset-name: expected one of sharegpt, random, custom, got 'hf'"),
        ({"llmperf_confidence": "0.2"}, "--llmperf-confidence: expected a confidence between 0.5 and 0.999"),
        ({"llmperf_alarm_confidence": "1"}, "--llmperf-alarm-confidence: expected a confidence between 0.5 and 0.999"),
        ({"llmperf_sim_speed": "-2"}, "--llmperf-sim-speed: expected a number > 0"),
        ({"llmperf_warmup": "-1"}, "--llmperf-warmup: expected a whole number >= 0, or 'wave' "),
        ({"llmperf_warmup": "waves"}, "--llmperf-warmup: expected a whole number >= 0, or 'wave'"),
        ({"llmperf_server_warmup": "2.5"}, "--llmperf-server-warmup: expected a whole number >= 0, got '2.5'"),
        ({"llmperf_max_repetitions": "many"}, "--llmperf-max-repetitions: expected a whole number >= 1"),
        ({"llmperf_changed_outputs": "some"}, "--llmperf-changed-outputs: expected off, a count of prompts "),
        ({"llmperf_changed_outputs": "150%"}, "--llmperf-changed-outputs: expected off, a count"),
        ({"llmperf_base_url": "gpu-box:8000"}, "expected http://HOST:PORT"),
        ({"llmperf_sim": True, "llmperf_image": "vllm/vllm-openai:nightly"}, "add --llmperf-gpu"),
    ],
)
def test_bad_values_name_the_option_and_the_fix(cli, message):
    with pytest.raises(OptionError, match=message.replace("+", r"\+").replace(".", r"\.")):
        resolve(cli=cli)


def test_the_dataset_name_comes_from_the_cli_else_the_ini_else_sharegpt():
    assert resolve().dataset_name == "sharegpt"
    assert resolve(ini={"llmperf_dataset_name": "random"}).dataset_name == "random"
    opts = resolve(cli={"llmperf_dataset_name": "custom"}, ini={"llmperf_dataset_name": "random"})
    assert (opts.dataset_name, opts.sources["llmperf_dataset_name"]) == ("custom", "cli")
    with pytest.raises(OptionError, match="ini option 'llmperf_dataset_name': expected one of sharegpt, random"):
        resolve(ini={"llmperf_dataset_name": "ShareGPT"})


def test_warmups_default_to_a_wave_per_run_and_a_modest_server_warmup_in_smoke():
    assert (resolve().warmup, resolve().server_warmup) == ("wave", 64)
    assert resolve(cli={"llmperf_profile": "smoke"}).server_warmup == 16
    assert resolve(cli={"llmperf_profile": "nightly"}).server_warmup == 64
    opts = resolve(cli={"llmperf_warmup": "3"}, ini={"llmperf_server_warmup": "0", "llmperf_warmup": "wave"})
    assert (opts.warmup, opts.server_warmup) == (3, 0)  # the CLI wins; 0 turns the server warm-up off
    assert resolve(ini={"llmperf_warmup": "WAVE"}).warmup == "wave"


def test_the_default_server_warmup_is_at_most_two_waves_of_a_servers_max_num_seqs():
    nightly, smoke = resolve(cli={"llmperf_profile": "nightly"}), resolve(cli={"llmperf_profile": "smoke"})
    assert [nightly.server_warmup_for(b) for b in (None, "8", "32", "256", "0", "many")] == [64, 16, 64, 64, 64, 64]
    assert [smoke.server_warmup_for(b) for b in (None, "4", "8", "32")] == [16, 8, 16, 16]
    # a count given is sent as given, whatever the batch
    assert resolve(cli={"llmperf_server_warmup": "40"}).server_warmup_for("8") == 40
    assert resolve(ini={"llmperf_server_warmup": "64"}).server_warmup_for("8") == 64


def test_changed_outputs_is_off_by_default_a_count_or_a_share():
    from pytest_llmperf.metrics.failures import ErrorBudget

    assert resolve().changed_outputs is None
    assert resolve(ini={"llmperf_changed_outputs": "OFF"}).changed_outputs is None
    assert resolve(ini={"llmperf_changed_outputs": "10%"}).changed_outputs == ErrorBudget(0.1, relative=True)
    opts = resolve(cli={"llmperf_changed_outputs": "0"}, ini={"llmperf_changed_outputs": "10%"})
    assert opts.changed_outputs == ErrorBudget(0.0) and opts.sources["llmperf_changed_outputs"] == "cli"


def test_bad_ini_value_names_the_ini_option():
    with pytest.raises(OptionError, match="ini option 'llmperf_gpu'"):
        resolve(ini={"llmperf_gpu": "maybe"})


def test_base_url_is_normalised_and_chooses_the_external_target():
    opts = resolve(cli={"llmperf_base_url": "http://gpu-box:8000/v1/"})
    assert opts.target == "external" and opts.base_url == "http://gpu-box:8000"


def test_sim_args_split_like_a_shell():
    opts = resolve(cli={"llmperf_sim": True, "llmperf_sim_args": "--sim-acceptance-scale 0.8"})
    assert opts.sim_args == ("--sim-acceptance-scale", "0.8")


def test_every_option_has_a_flag_with_the_prefix_and_an_ini_twin():
    for opt in OPTIONS:
        assert any(flag.startswith("--llmperf-") for flag in opt.flags), opt.flags
        assert opt.ini.startswith("llmperf_")


def test_the_options_page_documents_every_option_and_its_ini_twin():
    from pathlib import Path

    page = (Path(__file__).parents[2] / "docs" / "reference" / "options.md").read_text()
    fix = "regenerate it: python scripts/gen_reference.py"
    for opt in OPTIONS:
        for flag in opt.flags:
            assert f"`{flag}" in page, f"docs/reference/options.md does not document {flag}; {fix}"
        assert f"`{opt.ini}`" in page, f"docs/reference/options.md does not name the ini option {opt.ini}; {fix}"


def test_every_option_reaches_the_resolved_options():
    from dataclasses import fields

    from pytest_llmperf.options import LlmperfOptions

    names = {f.name for f in fields(LlmperfOptions)}
    target_flags = {"llmperf_sim", "llmperf_gpu", "llmperf_docker", "llmperf_real_cpu"}  # folded into target
    for opt in OPTIONS:
        assert opt.dest.removeprefix("llmperf_") in names or opt.dest in target_flags, opt.dest


def test_auto_budget_is_five_runs_or_eight_paired_blocks_unless_given():
    assert resolve(cli={"llmperf_sim": True}).max_repetitions == 5
    paired = {"llmperf_sim": True, "llmperf_against_sim_args": "--sim-step-time-scale 1.05"}
    assert resolve(cli=paired).max_repetitions == 8
    assert resolve(cli={**paired, "llmperf_max_repetitions": "3"}).max_repetitions == 3
    assert resolve(cli=paired, ini={"llmperf_max_repetitions": "6"}).max_repetitions == 6


@pytest.mark.parametrize("profile, expected", [("smoke", 1), ("nightly", "auto"), ("full", "auto")])
def test_repetitions_default_to_auto_except_for_smoke(profile, expected):
    assert resolve(cli={"llmperf_profile": profile}).repetitions == expected
    assert resolve(cli={"llmperf_profile": profile, "llmperf_repetitions": "2"}).repetitions == 2
    assert resolve(cli={"llmperf_profile": profile, "llmperf_repetitions": "AUTO"}).repetitions == "auto"


@pytest.mark.parametrize(
    "raw, seconds", [(None, 86400.0), ("30m", 1800.0), ("24h", 86400.0), ("2d", 172800.0), ("90", 90.0), ("45s", 45.0)]
)
def test_cleanup_age_takes_minutes_hours_days_or_seconds(raw, seconds):
    assert resolve(cli={"llmperf_cleanup_age": raw}).cleanup_age == seconds
    assert resolve(ini={"llmperf_cleanup_age": raw or ""}).cleanup_age == seconds


@pytest.mark.parametrize("raw", ["0", "-5m", "1w", "soon", "24 hours"])
def test_a_bad_cleanup_age_names_the_option_and_the_forms_it_takes(raw):
    expected = f"--llmperf-cleanup-age: expected a duration > 0 such as 30m, 24h, 2d or 3600 (seconds), got {raw!r}"
    with pytest.raises(OptionError) as err:
        resolve(cli={"llmperf_cleanup_age": raw})
    assert str(err.value) == expected
    with pytest.raises(OptionError, match="ini option 'llmperf_cleanup_age': expected a duration"):
        resolve(ini={"llmperf_cleanup_age": raw})


@pytest.mark.parametrize(
    "target, why",
    [
        ({"llmperf_docker": True}, "--llmperf-docker runs the image's own server, which takes no --sim-* flags"),
        ({"llmperf_gpu": True}, "--llmperf-gpu runs vLLM images"),
        ({"llmperf_base_url": "http://gpu-box:8000"}, "--llmperf-base-url attaches to a server someone else runs"),
        ({"llmperf_real_cpu": True}, "--llmperf-real-cpu runs a real vLLM"),
        ({"llmperf_local": "python"}, "--llmperf-local runs a real vLLM"),
    ],
)
def test_sim_args_on_a_target_that_ignores_them_are_refused(target, why):
    with pytest.raises(OptionError) as err:
        resolve(cli={**target, "llmperf_sim_args": "--sim-acceptance-scale 0.8"})
    assert str(err.value).startswith("--llmperf-sim-args only applies to the simulated server (--llmperf-sim): ")
    assert why in str(err.value)
    with pytest.raises(OptionError, match=r"^ini option 'llmperf_sim_args' only applies to the simulated server"):
        resolve(cli=target, ini={"llmperf_sim_args": "--sim-acceptance-scale 0.8"})
    assert resolve(ini={"llmperf_sim_args": "--sim-acceptance-scale 0.8"}).target is None  # nothing runs: no harm


@pytest.mark.parametrize(
    "args, joined",
    [
        (["--llmperf-sim-args", "--disable-log-stats"], ["--llmperf-sim-args=--disable-log-stats"]),
        (
            ["-q", "--llmperf-sim-args", "--sim-error-rate 0.3", "t.py"],
            ["-q", "--llmperf-sim-args=--sim-error-rate 0.3", "t.py"],
        ),
        (["--llmperf-sim-args=--disable-log-stats"], ["--llmperf-sim-args=--disable-log-stats"]),
        # A forgotten value: our own next flag stays a flag (argparse then says the value is missing).
        (["--llmperf-sim-args", "--llmperf-sim"], ["--llmperf-sim-args", "--llmperf-sim"]),
        (["--llmperf-sim-args", "--llmperf-report=r.json"], ["--llmperf-sim-args", "--llmperf-report=r.json"]),
        (["--llmperf-sim-args"], ["--llmperf-sim-args"]),
        # After "--" every argument is a path.
        (["--", "--llmperf-sim-args", "x"], ["--", "--llmperf-sim-args", "x"]),
        (["--llmperf-sim", "--disable-log-stats"], ["--llmperf-sim", "--disable-log-stats"]),
    ],
)
def test_a_flag_valued_option_and_its_value_are_joined_in_place(args, joined):
    original = args
    join_flag_values(args)
    assert args is original and args == joined


def test_server_patterns_are_split_on_commas_and_an_empty_list_is_refused():
    assert resolve(cli={"llmperf_servers": "qwen3.6-27b*, *-mtp,"}).servers == ("qwen3.6-27b*", "*-mtp")
    assert resolve(ini={"llmperf_servers": "tiny"}).sources["llmperf_servers"] == "ini"
    assert resolve().servers == ()
    with pytest.raises(OptionError, match=r"--llmperf-servers: expected server name patterns, comma-separated"):
        resolve(cli={"llmperf_servers": " , "})


def test_the_report_is_a_folder_or_a_json_file_and_a_page_path_is_refused_with_the_folder_to_give(tmp_path):
    assert resolve(cli={"llmperf_report": str(tmp_path / "reports")}).report == str(tmp_path / "reports")
    assert resolve(cli={"llmperf_report": "out/report.json"}).report == "out/report.json"  # the JSON alone
    with pytest.raises(OptionError) as err:
        resolve(cli={"llmperf_report": "out/report.html"})
    assert str(err.value).startswith("--llmperf-report: 'out/report.html' names a file, but the report is a folder")
    assert "out/report would hold report.html, summary.md, report.json and plots/" in str(err.value)
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(OptionError, match=r"^ini option 'llmperf_report': .*notes\.txt' is a file, not a folder"):
        resolve(ini={"llmperf_report": str(tmp_path / "notes.txt")})


@pytest.mark.parametrize(
    "cli, ini, local, source",
    [
        ({"llmperf_local": "python"}, {}, "python", "cli"),  # the flag alone: argparse's const
        ({"llmperf_local": "/opt/vllm/bin/python"}, {}, "/opt/vllm/bin/python", "cli"),
        ({}, {"llmperf_local": "true"}, "python", "ini"),
        ({}, {"llmperf_local": "~/venvs/vllm/bin/python"}, "~/venvs/vllm/bin/python", "ini"),
        ({"llmperf_local": "/cli/python"}, {"llmperf_local": "/ini/python"}, "/cli/python", "cli"),
    ],
)
def test_local_takes_an_interpreter_or_the_python_on_path(cli, ini, local, source):
    opts = resolve(cli=cli, ini=ini)
    assert (opts.target, opts.local, opts.sources["target"]) == ("local", local, source)
    assert opts.target_description() == f"local {local} (from {source})"


@pytest.mark.parametrize("off", ["false", "0", "off"])
def test_local_switched_off_in_the_ini_chooses_nothing(off):
    assert resolve(ini={"llmperf_local": off}).target is None


@pytest.mark.parametrize(
    "other, flag",
    [
        ({"llmperf_real_cpu": True}, "--llmperf-real-cpu"),
        ({"llmperf_sim": True}, "--llmperf-sim"),
        ({"llmperf_gpu": True}, "--llmperf-gpu"),
        ({"llmperf_base_url": "http://gpu-box:8000"}, "--llmperf-base-url"),
    ],
)
def test_local_and_another_target_are_refused(other, flag):
    with pytest.raises(OptionError) as err:
        resolve(cli={**other, "llmperf_local": "python"})
    assert str(err.value) == f"{flag} and --llmperf-local choose different targets: pass exactly one"


def test_session_slos_are_vllms_goodput_text_from_the_cli_or_the_ini():
    assert resolve().slos == ""
    assert resolve(ini={"llmperf_slos": "tpot:50  ttft:500"}).slos == "ttft:500 tpot:50"
    assert resolve(cli={"llmperf_slos": "e2el:3000"}, ini={"llmperf_slos": "ttft:500"}).slos == "e2el:3000"
    assert resolve(cli={"llmperf_slos": "none"}, ini={"llmperf_slos": "ttft:500"}).slos == ""  # none wins over the ini


@pytest.mark.parametrize(
    "cli, ini, message",
    [
        ({"llmperf_slos": "ttfb:500"}, {}, "--llmperf-slos: unknown SLO 'ttfb' in 'ttfb:500'; did you mean ttft?"),
        ({}, {"llmperf_slos": "ttft=500"}, "ini option 'llmperf_slos': 'ttft=500' is not a KEY:VALUE pair"),
        ({"llmperf_slos": "e2el:-3"}, {}, "--llmperf-slos: 'e2el:-3': the SLO must be a finite number of milliseconds"),
    ],
)
def test_bad_session_slos_name_the_option_and_the_fix(cli, ini, message):
    with pytest.raises(OptionError) as caught:
        resolve(cli=cli, ini=ini)
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("raw", "gpus"),
    [("0,1,2,3", ("0", "1", "2", "3")), (" 2, 3 ", ("2", "3")), ("all", ("5", "6")), ("ALL", ("5", "6")),
     ("GPU-1f2e,GPU-9a0b", ("GPU-1f2e", "GPU-9a0b"))],
)  # fmt: skip
def test_gpus_are_ids_as_nvidia_smi_numbers_them_or_all(raw, gpus):
    here = lambda: ("5", "6")  # noqa: E731  # this machine's GPUs, for "all"
    opts = resolve(cli={"llmperf_gpu": True, "llmperf_gpus": raw}, gpus_here=here)
    assert opts.gpus == gpus
    assert resolve(ini={"llmperf_docker": "true", "llmperf_gpus": raw}, gpus_here=here).gpus == gpus


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("0,,1", "--llmperf-gpus: expected GPU ids as nvidia-smi numbers them, comma-separated (0,1,2,3), or all"),
        ("0;1", "--llmperf-gpus: expected GPU ids"),
        ("0,1,0", "--llmperf-gpus: GPU 0 given twice in '0,1,0': each GPU belongs to one slot"),
    ],
)
def test_bad_gpu_lists_name_the_option_and_the_forms_it_takes(raw, message):
    with pytest.raises(OptionError, match=re.escape(message)):
        resolve(cli={"llmperf_gpu": True, "llmperf_gpus": raw})


@pytest.mark.parametrize("target", ["llmperf_real_cpu", "llmperf_local"])
def test_gpus_on_a_local_vllm_are_refused_with_cuda_visible_devices_as_the_way(target):
    with pytest.raises(OptionError, match="--llmperf-gpus spreads containers.*CUDA_VISIBLE_DEVICES"):
        resolve(cli={target: "python" if target == "llmperf_local" else True, "llmperf_gpus": "0,1"})
    with pytest.raises(OptionError, match="not to --llmperf-base-url"):
        resolve(cli={"llmperf_base_url": "http://h:8000", "llmperf_gpus": "0,1"})


def test_the_plan_needs_the_gpus_it_plans():
    with pytest.raises(OptionError, match=r"--llmperf-plan prints the plan of --llmperf-gpus: give the GPUs too"):
        resolve(cli={"llmperf_sim": True, "llmperf_plan": True})
    assert resolve(cli={"llmperf_sim": True, "llmperf_plan": True, "llmperf_gpus": "0,1"}).plan is True


def test_containers_publish_on_an_ip_address_127_0_0_1_unless_given():
    assert resolve().publish_host == "127.0.0.1"
    assert resolve(cli={"llmperf_gpu": True, "llmperf_publish_host": "0.0.0.0"}).publish_host == "0.0.0.0"
    with pytest.raises(OptionError, match=re.escape("--llmperf-publish-host: expected an IP address")):
        resolve(cli={"llmperf_gpu": True, "llmperf_publish_host": "gpu-a"})
