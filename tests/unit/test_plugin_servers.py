"""Servers declared once in a project's conftest.py and named in markers, with pytester:
a root conftest.py, a test module in a subfolder with a conftest.py of its own."""

import json

import pytest

from tests.plugin_project import CONFTEST, SUITE, make_project, run

ROOT_CONFTEST = (
    CONFTEST
    + """

def pytest_llmperf_servers():
    return [BASE, MTP]
"""
)

# The tiny suite with servers by name, as a user's suite in tests/perf/ names them.
SUITE_BY_NAME = (
    SUITE.replace("from conftest import BASE, MTP\n", "")
    .replace("server=MTP, base=BASE", 'server="tiny-mtp", base="tiny"')
    .replace("server=MTP", 'server="tiny-mtp"')
    .replace("server=BASE", 'server="tiny"')
)

PERF_CONFTEST = """
import pytest

@pytest.fixture
def unused_helper():
    return 1
"""


@pytest.fixture
def project(pytester, monkeypatch, tmp_path_factory):
    """The tiny project laid out as a user's: servers in the root conftest.py, the suite in
    perf/ beside a conftest.py of its own (two conftest modules, no import between them)."""
    project = make_project(pytester, monkeypatch, tmp_path_factory)
    project.path.joinpath("test_suite.py").unlink()
    project.makeconftest(ROOT_CONFTEST)
    perf = project.mkdir("perf")
    perf.joinpath("conftest.py").write_text(PERF_CONFTEST)
    perf.joinpath("test_suite.py").write_text(SUITE_BY_NAME)
    return project


def test_servers_named_in_markers_come_from_the_root_conftest_into_a_subfolder(project):
    assert "from conftest" not in SUITE_BY_NAME and 'server="tiny-mtp", base="tiny"' in SUITE_BY_NAME
    result = run(project, "--update-baselines", "-v")
    result.assert_outcomes(passed=3)
    # Base, then MTP, then the speedup test: the names resolved to the declared specs.
    result.stdout.fnmatch_lines(
        [
            "*perf/test_suite.py::test_base[[]4[]] PASSED*",
            "*perf/test_suite.py::test_mtp[[]4[]] PASSED*",
            "*perf/test_suite.py::test_speedup[[]4[]] PASSED*",
        ]
    )
    mtp = json.loads((project.path / "baselines" / "sim" / "tiny-mtp.json").read_text())
    (entry,) = mtp["concurrency"]["4"].values()  # one workload
    assert "mtp_speedup" in entry["metrics"]  # base="tiny" was the declared base
    assert (project.path / "baselines" / "sim" / "tiny.json").exists()


def test_an_unknown_name_is_a_usage_error_listing_the_servers_declared_above_the_test(project):
    # A name declared by a sibling folder's conftest.py is not declared for perf/.
    other = project.mkdir("other")
    other.joinpath("conftest.py").write_text(
        "from pytest_llmperf import ServerSpec\n\n"
        "def pytest_llmperf_servers():\n"
        "    return [ServerSpec(name='elsewhere', model='org/elsewhere')]\n"
    )
    project.path.joinpath("perf", "test_suite.py").write_text(
        SUITE_BY_NAME.replace('server="tiny"', 'server="tiny-mpt"')
    )
    result = run(project)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*perf/test_suite.py::test_base[[]4[]]: llmperf server='tiny-mpt' is not a declared server; "
            "did you mean 'tiny-mtp'? declared: tiny, tiny-mtp"
        ]
    )
    assert "starting server" not in result.stdout.str()

    project.path.joinpath("perf", "test_suite.py").write_text(
        SUITE_BY_NAME.replace('server="tiny"', 'server="elsewhere"')
    )
    result = run(project)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*llmperf server='elsewhere' is not a declared server; declared: tiny, tiny-mtp"])


def test_a_named_servers_model_is_its_xdist_group(project):
    pytest.importorskip("xdist")
    from pytest_llmperf.collecting import xdist_support

    items, _ = project.inline_genitems("-p", "no:cacheprovider", "-p", "no:benchmark", "--dist", "loadgroup")
    groups = {item.name: xdist_support.item_group(item) for item in items}
    assert groups == {name: "llmperf-org/tiny" for name in ("test_base[4]", "test_mtp[4]", "test_speedup[4]")}


TWO_MODELS_CONFTEST = ROOT_CONFTEST.replace(
    "    return [BASE, MTP]",
    """    big = ServerSpec(name="big", model="org/big")
    return [BASE, MTP, big, big.with_speculative({"method": "mtp", "num_speculative_tokens": 3}, name="big-mtp")]""",
)

TWO_MODELS_SUITE = """
import pytest
from pytest_llmperf import ServerSpec

INLINE = ServerSpec(name="inline", model="org/inline")  # in a marker only, declared nowhere


def on(server, base=None):
    return pytest.param(server, marks=pytest.mark.llmperf(server=server, base=base, num_prompts=4), id=str(server))


@pytest.mark.parametrize("server", [on("tiny"), on("big")])
def test_base(llmperf, server):
    llmperf.run(concurrency=1)


@pytest.mark.parametrize("server", [on("tiny-mtp"), on("big-mtp")])
def test_mtp(llmperf, server):
    llmperf.run(concurrency=1)


@pytest.mark.parametrize("server", [on("tiny-mtp", base="tiny"), on("big-mtp", base="big")])
def test_speedup(llmperf, server):
    llmperf.run(concurrency=1)


@pytest.mark.llmperf(server=INLINE, num_prompts=4)
def test_inline(llmperf):
    llmperf.run(concurrency=1)


def test_plain():
    pass
"""


@pytest.fixture
def two_models(project):
    project.makeconftest(TWO_MODELS_CONFTEST)
    project.path.joinpath("perf", "test_suite.py").write_text(TWO_MODELS_SUITE)
    return project


def test_llmperf_servers_keeps_one_models_base_mtp_and_speedup_tests_and_says_what_it_deselected(two_models):
    # No target: the selected performance tests skip, so nothing starts.
    result = two_models.runpytest("-p", "no:benchmark", "-p", "no:cacheprovider", "--llmperf-servers", "tiny*", "-v")
    result.assert_outcomes(skipped=3, passed=1, deselected=4)
    result.stdout.fnmatch_lines(
        [
            "*collected 8 items / 4 deselected / 4 selected",
            "[[]llmperf[]] --llmperf-servers 'tiny*': 3 tests of tiny, tiny-mtp selected; "
            "4 tests of big, big-mtp, inline deselected",
        ]
    )
    ran = [line.split()[0] for line in result.stdout.lines if line.startswith("perf/")]
    assert ran == [
        "perf/test_suite.py::test_plain",
        "perf/test_suite.py::test_base[tiny]",
        "perf/test_suite.py::test_mtp[tiny-mtp]",
        "perf/test_suite.py::test_speedup[tiny-mtp]",
    ]


def test_a_speedup_test_runs_only_when_its_base_is_selected_too_and_the_ini_twin_selects(two_models):
    result = two_models.runpytest("-p", "no:benchmark", "-p", "no:cacheprovider", "-o", "llmperf_servers=*-mtp,inline")
    result.assert_outcomes(skipped=3, passed=1, deselected=4)
    result.stdout.fnmatch_lines(
        [
            "[[]llmperf[]] ini llmperf_servers '*-mtp,inline': 3 tests of big-mtp, inline, tiny-mtp selected; "
            "2 tests of big, tiny deselected; 2 speedup tests deselected, their base big, tiny not selected "
            "(a speedup test needs both its servers)"
        ]
    )


def test_a_server_pattern_matching_no_server_is_a_usage_error_naming_them(two_models):
    result = two_models.runpytest("-p", "no:benchmark", "-p", "no:cacheprovider", "--llmperf-servers", "tiny,qwen*")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--llmperf-servers: 'qwen*' matches no server; the servers: big, big-mtp, inline, tiny, tiny-mtp"]
    )
