import pytest

from pytest_llmperf import ServerSpec
from pytest_llmperf.collecting.selection import declared_names, declared_servers, resolve_server, select_servers

A = ServerSpec(name="a", model="org/A")
A_MTP = A.with_speculative({"method": "mtp", "num_speculative_tokens": 3}, name="a-mtp")
B = ServerSpec(name="b", model="org/B")


def test_declared_servers_are_one_table_by_name_from_every_conftest():
    # pluggy hands one result per conftest.py (None from one that returns nothing).
    table = declared_servers([[A, A_MTP], None, (B, A)])
    assert table == {"a": A, "a-mtp": A_MTP, "b": B}


@pytest.mark.parametrize(
    "results, message",
    [
        ([[A, ServerSpec(name="a", model="org/other")]], "two different servers are declared as 'a'"),
        ([A], "must return a list of ServerSpec objects, got ServerSpec"),
        ([{"a": A}], "must return a list of ServerSpec objects"),
        (["a"], "must return a list of ServerSpec objects, got 'a'"),
        ([[A, "b"]], "must return ServerSpec objects, got 'b'"),
    ],
)
def test_a_bad_declaration_says_what_is_wrong(results, message):
    with pytest.raises(ValueError, match=message):
        declared_servers(results)


def test_a_name_is_looked_up_and_a_spec_or_none_passes_as_it_is():
    declared = {"a": A, "a-mtp": A_MTP}
    assert resolve_server("server", "a-mtp", declared) is A_MTP
    assert resolve_server("base", B, declared) is B
    assert resolve_server("base", None, declared) is None


def test_an_unknown_name_lists_the_declared_ones_and_the_nearest():
    with pytest.raises(ValueError) as info:
        resolve_server("base", "a-mpt", {"a": A, "a-mtp": A_MTP, "b": B})
    assert (
        str(info.value) == "llmperf base='a-mpt' is not a declared server; did you mean 'a-mtp'? declared: a, a-mtp, b"
    )
    with pytest.raises(ValueError, match=r"server='a': no server is declared here; declare servers in a conftest.py"):
        resolve_server("server", "a", {})
    with pytest.raises(ValueError, match=r"server= must be a declared server's name or a ServerSpec, got 3"):
        resolve_server("server", 3, {"a": A})


def _servers(item):
    return item[1]


ITEMS = [
    ("plain", {}),
    ("base-a", {"server": A}),
    ("mtp-a", {"server": A_MTP}),
    ("speedup-a", {"server": A_MTP, "base": A}),
    ("base-b", {"server": B}),
    ("no-server", {"server": None}),  # llmperf.run(server=...) chooses at run time
]


def test_a_test_is_kept_when_its_server_and_base_match_and_tests_naming_no_server_stay():
    selection = select_servers(ITEMS, _servers, ["a*"], declared=["a", "a-mtp", "b"])
    assert [name for name, _ in selection.kept] == ["plain", "base-a", "mtp-a", "speedup-a", "no-server"]
    assert [name for name, _ in selection.deselected] == ["base-b"]
    assert selection.lines == ["--llmperf-servers 'a*': 3 tests of a, a-mtp selected; 1 test of b deselected"]


def test_a_speedup_test_needs_both_its_servers_selected():
    selection = select_servers(ITEMS, _servers, ["*-mtp", "b"], declared=[], where="ini llmperf_servers")
    assert [name for name, _ in selection.deselected] == ["base-a", "speedup-a"]
    assert selection.lines == [
        "ini llmperf_servers '*-mtp,b': 2 tests of a-mtp, b selected; 1 test of a deselected; "
        "1 speedup test deselected, their base a not selected (a speedup test needs both its servers)"
    ]


def test_a_pattern_matching_no_declared_or_used_server_is_an_error_listing_them():
    # "c" is declared but used by no test: it matches, and deselects every test of others.
    assert select_servers(ITEMS, _servers, ["c"], declared=["c"]).kept == [ITEMS[0], ITEMS[5]]
    with pytest.raises(ValueError) as info:
        select_servers(ITEMS, _servers, ["a", "qwen*", "z"], declared=["c"])
    assert str(info.value) == "--llmperf-servers: 'qwen*', 'z' matches no server; the servers: a, a-mtp, b, c"
    with pytest.raises(ValueError, match=r"the servers: none \(declare servers in a conftest.py"):
        select_servers([("plain", {})], _servers, ["a"], declared=[])


def test_declared_names_come_from_every_result_and_skip_bad_ones():
    assert declared_names([[A, A_MTP], None, "b", [B, 3]]) == {"a", "a-mtp", "b"}
