"""The sim tokenizer: lossless, deterministic, BPE-like counts; generated text re-tokenises exactly."""

from __future__ import annotations

from pytest_llmperf.sim import tokenizer
from pytest_llmperf.sim.tokenizer import TextGenerator


def test_split_is_lossless_on_mixed_text():
    text = "Hello, world!  It's internationalization 12345\n\n\tfoo_bar 你好世界 café.  \n end "
    pieces = tokenizer.tokenize(text)
    assert "".join(pieces) == text
    assert " interna" in pieces and " 123" in pieces and "45" in pieces


def test_ids_are_deterministic_and_in_vocab():
    a, b = tokenizer.encode("the same text"), tokenizer.encode("the same text")
    assert a == b and all(0 <= t < tokenizer.VOCAB_SIZE for t in a)


def test_english_prose_is_near_a_bpe_count():
    prose = (
        "Could you explain how a transformer model processes a sentence, and why attention lets it "
        "relate words that are far apart? I am writing a short report for my class and would like "
        "a clear example, with the main steps in order."
    ) * 3
    words = len(prose.split())
    ratio = tokenizer.count_tokens(prose) / words
    assert 1.15 <= ratio <= 1.5  # a BPE gives ~1.33 tokens per English word


def test_generated_text_retokenises_to_the_same_pieces():
    gen = TextGenerator(seed=123)
    pieces = [gen.next_piece() for _ in range(5000)]
    assert tokenizer.tokenize("".join(pieces)) == pieces
    again = TextGenerator(seed=123)
    assert [again.next_piece() for _ in range(50)] == pieces[:50]


def test_chat_prompt_counts_template_tokens():
    msgs = [{"role": "user", "content": "hello there"}]
    assert tokenizer.chat_prompt_tokens(msgs) > tokenizer.count_tokens("hello there")
    parts = [{"role": "user", "content": [{"type": "text", "text": "hello there"}]}]
    assert tokenizer.chat_prompt_tokens(parts) == tokenizer.chat_prompt_tokens(msgs)
