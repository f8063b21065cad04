import re

from pytest_llmperf.workload.random_align import MAX_ROUNDS, align, fit, probe
from pytest_llmperf.workload.random_dataset import BuiltinTokenizer, RandomSettings, sample_random


class FakeBpe:
    """A tokenizer that adds a BOS and splits each made-up word into 1 to 3 tokens (as a
    real BPE splits " qzx"); " the" is one token. Counts its calls."""

    def __init__(self):
        self.batches = 0

    def __call__(self, texts):
        self.batches += 1
        return [1 + sum(self.cost(w) for w in re.findall(r" \S+", t)) for t in texts]

    @staticmethod
    def cost(word):
        if word == " the":
            return 1
        code = sum(map(ord, word))
        return 1 + (code % 3 == 0) + (code % 5 == 0)


def test_probe_finds_the_filler_and_the_special_tokens():
    server = probe(FakeBpe())
    assert (server.filler, server.special) == (" the", 1)


def test_probe_finds_none_where_no_filler_adds_exactly_one_token():
    assert probe(lambda texts: [2 * len(t.split()) for t in texts]) is None


def test_prompts_are_made_to_the_drawn_lengths_plus_the_special_tokens_the_server_adds():
    count = FakeBpe()
    server = probe(count)
    settings = RandomSettings(input_len=64, output_len=8, range_ratio=0.5, prefix_len=8)
    built = sample_random(30, settings, seed=1, tokenizer=BuiltinTokenizer(num_special=server.special))
    count.batches = 0
    made = align(built, server, settings.prefix_len, BuiltinTokenizer.PIECE_CHARS)
    assert count.batches <= 2 * MAX_ROUNDS
    assert [r.prompt_len for r in made] == [r.prompt_len + 1 for r in built]  # the BOS counted, as usage counts it
    assert count([r.prompt for r in made]) == [r.prompt_len for r in made]
    pieces = [built[0].prompt[i : i + 4] for i in range(0, 4 * settings.prefix_len, 4)]
    ((prefix, off),) = fit(server, [("", pieces, settings.prefix_len + 1)])
    assert off == 0 and all(r.prompt.startswith(prefix) for r in made)  # one shared prefix, of its own length


def test_a_count_that_cannot_be_met_gives_the_closest_text_and_its_distance():
    def two_each(texts):  # every word two tokens: an odd target is never met
        return [2 * len(t.split()) for t in texts]

    server = probe(FakeBpe())
    server = type(server)(two_each, " the", 0)
    ((text, off),) = fit(server, [("", [" abc"] * 10, 7)])
    assert off == 1 and two_each([text])[0] in (6, 8)
