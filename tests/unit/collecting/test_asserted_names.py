from pytest_llmperf.collecting.asserted_names import check_function, unknown_names

SOURCE = """
def test_x(llmperf, concurrency):
    run = llmperf.run(concurrency=concurrency)
    base = llmperf.run(concurrency=concurrency, server=llmperf.base)
    assert run.value("decode_tok_s") > base.value("decode_tokps")
    llmperf.run(concurrency=2).value("ttft_ms_medain")
    run.assert_no_regression("steady_decode_tok_s", "acceptance_rat", tolerances={"accept_len": "5%"})
    name = "built_at_run_time"
    run.assert_no_regression(name)
    other.value("not_a_metric")  # not a run: other objects have value() too
    run.value("acceptance_pos3")
"""


def test_literal_names_of_runs_and_gates_are_checked_with_their_lines():
    found = unknown_names(SOURCE)
    assert [(line, message.split(";")[0]) for line, message in found] == [
        (5, "value: unknown metric 'decode_tokps'"),
        (6, "value: unknown metric 'ttft_ms_medain'"),
        (7, "assert_no_regression: unknown metric 'acceptance_rat'"),
        (7, "assert_no_regression: tolerances: unknown metric 'accept_len'"),
    ]
    assert "did you mean decode_tok_s" in found[0][1]


def test_a_function_is_read_with_the_lines_of_its_file():
    def test_inner(llmperf):
        llmperf.run(concurrency=1).assert_no_regression("decode_toks")

    ((line, message),) = check_function(test_inner)
    assert line == test_inner.__code__.co_firstlineno + 1
    assert message.startswith("assert_no_regression: unknown metric 'decode_toks'; did you mean decode_tok_s")


def test_a_function_without_source_is_left_to_its_run():
    assert check_function(eval("lambda llmperf: None")) == []
