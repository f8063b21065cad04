"""The progress line: real-time rates on a sped-up clock, and a last line that counts
what the result counts."""

import io
import re

from pytest_llmperf.metrics.records import RequestRecord
from pytest_llmperf.workload.progress import Progress


def rate_of(line):
    return float(re.search(r"failed, ([\d,]+) output tok/s", line)[1].replace(",", ""))


def test_on_a_sped_up_clock_the_rate_is_in_real_time_and_says_so():
    out = io.StringIO()
    p = Progress(4, stream=out, quiet_for=0, clock_speed=10.0)
    p.start -= 2.0  # two wall seconds in
    p.add(True, 3000)
    p.tick()
    (line,) = out.getvalue().splitlines()
    assert rate_of(line) == 150  # 3000 tokens in 2 s on a x10 clock: 20 s of real time
    assert line.endswith(" s (x10 clock, tok/s in real time)")
    plain = Progress(4, stream=io.StringIO(), quiet_for=0)
    plain.start -= 2.0
    plain.add(True, 3000)
    assert rate_of(plain.line()) == 1500 and "clock" not in plain.line()


def ok(tokens):
    return RequestRecord(index=0, send_time=0.0, chunk_times=[0.1, 0.2], completion_tokens=tokens, status=200)


def broken(tokens):  # HTTP 200, so counted done and fine while running; its body did not decode
    record = ok(tokens)
    record.error = "malformed SSE data"
    return record


def test_the_last_line_counts_the_decoded_records_over_the_runs_duration():
    out = io.StringIO()
    p = Progress(3, stream=out, quiet_for=0, clock_speed=10.0)
    for _ in range(3):
        p.add(True, 100)  # what the running counts saw
    p.tick()
    p.close([ok(100), ok(100), broken(100)], duration=2.0)
    last = out.getvalue().splitlines()[-1]
    assert last.startswith("llmperf: 3/3 done, 1 failed, ")
    assert rate_of(last) == 10  # 200 tokens of the two that completed, over 2 s x10: the result's decode tok/s
    p.close([ok(1)], duration=1.0)
    assert out.getvalue().splitlines()[-1] == last  # once


def test_a_run_that_printed_nothing_closes_quietly():
    out = io.StringIO()
    Progress(3, stream=out, quiet_for=60).close([ok(1)], duration=1.0)
    assert out.getvalue() == ""
