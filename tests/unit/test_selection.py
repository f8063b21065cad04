import pytest

from pytest_llmperf import ServerSpec
from pytest_llmperf.selection import declared_servers, resolve_server

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
