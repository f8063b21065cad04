import argparse

import pytest

from pytest_llmperf.util.values import DURATION, SWITCH, TIME_CAP, BadValue, or_word, whole


def test_text_is_read_but_a_value_given_as_itself_is_not():
    assert whole(1)(" 48 ") == 48 and whole(1)(48) == 48
    with pytest.raises(BadValue, match=r"^expected a whole number >= 1, got '48'$"):
        whole(1).check("48")
    with pytest.raises(BadValue, match=r"expected a whole number >= 1, got True"):
        whole(1)(True)
    assert (TIME_CAP("none"), TIME_CAP("0"), TIME_CAP(30)) == (None, None, 30)
    with pytest.raises(BadValue, match="seconds > 0, or None for no cap, got 0$"):
        TIME_CAP.check(0)  # 0 means no cap in text only
    assert (SWITCH("Yes"), SWITCH(False), DURATION("30m")) == (True, False, 1800.0)


def test_a_word_beside_a_value_in_any_case():
    warmup = or_word(whole(0), "wave", "(one per stream)")
    assert (warmup("WAVE"), warmup("3"), warmup.check("wave")) == ("wave", 3, "wave")
    with pytest.raises(BadValue, match=r"expected a whole number >= 0, or 'wave' \(one per stream\), got '-1'"):
        warmup("-1")


def test_argparse_shows_the_text_and_a_function_argument_names_itself(capsys):
    parser = argparse.ArgumentParser(prog="p")
    parser.add_argument("--n", type=whole(1))
    with pytest.raises(SystemExit):
        parser.parse_args(["--n", "ten"])
    assert "argument --n: expected a whole number >= 1, got 'ten'" in capsys.readouterr().err
    with pytest.raises(KeyError, match="seed must be a whole number, got 1.5"):
        whole().require(1.5, "seed", KeyError)
