from pytest_llmperf import ServerSpec
from pytest_llmperf.collecting.ordering import order_items

A = ServerSpec(name="a", model="org/A")
A_MTP = A.with_speculative({"method": "mtp", "num_speculative_tokens": 3})
B = ServerSpec(name="b", model="org/B")
B_MTP = B.with_speculative({"method": "mtp", "num_speculative_tokens": 3})


def test_base_then_mtp_then_speedup_per_model_and_plain_tests_first():
    items = [
        ("speedup-a", {"server": A_MTP, "base": A}),
        ("mtp-b", {"server": B_MTP}),
        ("plain", None),
        ("mtp-a-1", {"server": A_MTP}),
        ("base-b", {"server": B}),
        ("base-a", {"server": A}),
        ("mtp-a-2", {"server": A_MTP}),
    ]
    ordered = [name for name, _ in order_items(items, lambda item: item[1])]
    assert ordered == ["plain", "base-a", "mtp-a-1", "mtp-a-2", "speedup-a", "base-b", "mtp-b"]
