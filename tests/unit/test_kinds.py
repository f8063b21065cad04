"""kinds.py: one record per target kind, the registry, and kinds a conftest.py adds
through the pytest_llmperf_target_kinds and pytest_llmperf_make_target hooks."""

from __future__ import annotations

import dataclasses

import pytest

from pytest_llmperf.doctor_checks.sets import NO_CHECKS
from pytest_llmperf.kinds import KINDS, TargetContext, TargetKind, kind, registry
from pytest_llmperf.options import OPTIONS, LlmperfOptions, OptionError, resolve_options
from pytest_llmperf.servers.sim_target import SimTarget
from tests.plugin_project import make_project


def resolve(cli=None, added=()):
    cli = cli or {}
    return resolve_options(lambda dest: cli.get(dest), lambda name: "", added)


def _sim(options, context):
    return KINDS["sim"].factory(options, context)


LAB = TargetKind("lab", _sim, "a lab's simulated server", baseline_folder="lab", accepts_sim_args=True)


def test_the_builtin_kinds_and_what_each_is():
    assert list(KINDS) == ["sim", "gpu", "docker", "external", "real-cpu", "local"]
    flags = {opt.dest: opt.flag for opt in OPTIONS}
    assert all(flags[k.dest] == k.flag for k in KINDS.values() if k.dest)  # each chosen by its own option
    assert {k.name for k in KINDS.values() if not k.starts_servers} == {"external"}
    assert {k.name for k in KINDS.values() if k.accepts_sim_args} == {"sim"}
    assert {k.name for k in KINDS.values() if k.uses_gpu_slots} == {"sim", "gpu", "docker"}
    assert {k.name for k in KINDS.values() if k.containers} == {"gpu", "docker"}
    assert {k.name for k in KINDS.values() if k.runs_local_vllm} == {"local", "real-cpu"}
    assert {k.name: k.xdist for k in KINDS.values() if k.xdist != "free"} == {
        "gpu": "gpu-slots",
        "docker": "gpu-slots",
        "local": "never",
    }
    assert KINDS["gpu"].baseline_folder is None  # judged per GPU model, once a server runs
    assert {k.name: k.doctor.words for k in KINDS.values()} == {  # the doctor's checks each carries
        "sim": "the simulated server",
        "gpu": "vLLM containers on GPUs",
        "docker": "containers without GPUs",
        "external": "an external server",
        "real-cpu": "vLLM as a local process",
        "local": "vLLM as a local process",
    }


def test_an_unknown_kind_is_an_error_listing_the_known_ones_and_the_hook():
    with pytest.raises(ValueError, match=r"unknown target kind 'k8s': known kinds are sim, gpu, .*, local.*"):
        kind("k8s")
    with pytest.raises(ValueError, match="pytest_llmperf_target_kinds"):
        kind("k8s")
    assert kind("lab", [LAB]) is LAB


def test_an_added_kind_is_chosen_by_name_and_replaces_a_builtin_of_its_name():
    assert (LAB.flag, LAB.dest) == ("--llmperf-target lab", None)
    assert LAB.no_sim_args == ""  # it takes them
    plain = TargetKind("pool", _sim)
    assert plain.no_sim_args == "--llmperf-target pool takes no --sim-* flags; drop it"
    assert plain.doctor is NO_CHECKS and plain.starts_servers and plain.xdist == "free"
    assert plain.baseline_folder == "pool"  # judged in baselines/pool/
    mine = dataclasses.replace(KINDS["sim"], description="my simulator")
    assert registry([mine])["sim"] is mine and list(registry([LAB])) == [*KINDS, "lab"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        LAB.name = "other"  # type: ignore[misc]


def test_a_kind_may_name_a_builtin_check_set_and_a_wrong_name_says_the_known_ones():
    from pytest_llmperf.kinds import CHECKS_BY_NAME

    assert TargetKind("pool", _sim, doctor="docker").doctor is KINDS["docker"].doctor  # type: ignore[arg-type]
    assert set(CHECKS_BY_NAME) == {"sim", "gpu", "docker", "external", "local", "none"}
    with pytest.raises(ValueError, match="doctor='dokcer' is no check set; one of sim, gpu, docker"):
        TargetKind("pool", _sim, doctor="dokcer")  # type: ignore[arg-type]


def test_target_option_chooses_an_added_kind_and_the_options_know_its_record():
    opts = resolve({"llmperf_target": "lab"}, [LAB])
    assert (opts.target, opts.target_kind, opts.sources["target"]) == ("lab", LAB, "cli")
    assert opts.target_description() == "lab (from cli)"
    assert resolve({"llmperf_target": "sim"}).target_kind is KINDS["sim"]  # a built-in one by name too
    assert resolve({"llmperf_sim": True, "llmperf_target": "sim"}).target == "sim"
    assert resolve({"llmperf_sim": True}).target_kind is KINDS["sim"]
    assert LlmperfOptions(target=None).target_kind is None


def test_target_option_refuses_an_unknown_kind_and_a_second_target():
    with pytest.raises(OptionError, match=r"^--llmperf-target: unknown target kind 'lab'"):
        resolve({"llmperf_target": "lab"})
    with pytest.raises(OptionError, match=r"--llmperf-sim and --llmperf-target lab choose different targets"):
        resolve({"llmperf_sim": True, "llmperf_target": "lab"}, [LAB])


def test_an_added_kinds_properties_decide_which_options_apply():
    pool = TargetKind("pool", _sim)
    with pytest.raises(OptionError, match="--llmperf-target pool takes no --sim-\\* flags"):
        resolve({"llmperf_target": "pool", "llmperf_sim_args": "--sim-step-time-scale 2"}, [pool])
    assert resolve({"llmperf_target": "lab", "llmperf_sim_args": "--sim-step-time-scale 2"}, [LAB]).sim_args
    with pytest.raises(OptionError, match="not to --llmperf-target pool"):
        resolve({"llmperf_target": "pool", "llmperf_gpus": "0,1"}, [pool])
    with pytest.raises(OptionError, match="only applies to container targets"):
        resolve({"llmperf_target": "pool", "llmperf_image": "x:1"}, [pool])


def test_a_kinds_factory_builds_its_target_from_the_options_and_context():
    opts = resolve({"llmperf_target": "lab", "llmperf_sim_speed": "25"}, [LAB])
    target = opts.target_kind.factory(opts, TargetContext("sess-1", lambda line: None))
    assert isinstance(target, SimTarget) and target.speed == 25.0


CONFTEST = """
from pytest_llmperf import ServerSpec
from pytest_llmperf.kinds import KINDS, TargetKind

BASE = ServerSpec(name="tiny", model="org/tiny", args=("--max-num-seqs", "8"))
BUILT = []


def lab_target(options, context):
    BUILT.append("factory")
    return KINDS["sim"].factory(options, context)


def pytest_llmperf_target_kinds():
    return [TargetKind("lab", lab_target, "a lab's simulator", baseline_folder="sim", accepts_sim_args=True)]
"""

BY_HOOK = """

def pytest_llmperf_make_target(options, kind, context):
    if kind.name == "lab":
        BUILT.append("hook")
        return KINDS["sim"].factory(options, context)
    return None
"""

SUITE = """
import pytest
from conftest import BASE, BUILT

@pytest.mark.parametrize("concurrency", [2])
@pytest.mark.llmperf(server=BASE, num_prompts=4, max_tokens=16, warmup=0)
def test_on_the_added_kind(llmperf, concurrency):
    run = llmperf.run(concurrency=concurrency)
    assert run.results and run.results[0].completed == 4
    assert BUILT == [EXPECTED]
"""


def _run_on_lab(pytester, monkeypatch, tmp_path_factory, conftest, built):
    project = make_project(pytester, monkeypatch, tmp_path_factory)
    project.makeconftest(conftest)
    project.path.joinpath("test_suite.py").write_text(SUITE.replace("EXPECTED", repr(built)))
    return project.runpytest(
        "-p", "no:benchmark", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "--llmperf-target", "lab"
    )


def test_a_conftest_adds_a_target_kind_and_a_test_runs_on_it(pytester, monkeypatch, tmp_path_factory):
    result = _run_on_lab(pytester, monkeypatch, tmp_path_factory, CONFTEST, "factory")
    result.stdout.fnmatch_lines(["llmperf: target lab (from cli)*"])
    result.assert_outcomes(passed=1)


def test_a_conftests_make_target_hook_builds_the_target_before_the_kinds_factory(
    pytester, monkeypatch, tmp_path_factory
):
    result = _run_on_lab(pytester, monkeypatch, tmp_path_factory, CONFTEST + BY_HOOK, "hook")
    result.assert_outcomes(passed=1)
