"""A reasoning reply's text split as vLLM 0.32's qwen3 parser splits it
(`--reasoning-parser qwen3`, no tool parser): whole (vllm/parser/qwen3.py) or step by
step (`DelegatingParser.parse_delta` in vllm/parser/abstract_parser.py, the engine's
deltas in vllm/parser/engine/parser_engine.py)."""

from __future__ import annotations

from pytest_llmperf.sim.engine import Emission


def split_reasoning(reasoning_len: int, em: Emission, eos_last: bool) -> tuple[str, str]:
    """(reasoning, answer) text of the tokens of `em` in a reply that reasons for its first
    `reasoning_len` tokens; `eos_last`: its last token is EOS (no text).

    The chat template opens `<think>` in the prompt, so the reply starts inside its
    reasoning; `</think>` (token `reasoning_len`) ends it and is dropped from both; the
    answer follows from the blank line after it."""
    reasoning, answer = [], []
    last = len(em.pieces) - 1
    for j, piece in enumerate(em.pieces):
        pos = em.start + j
        if j == last and eos_last:
            continue
        if pos < reasoning_len:
            reasoning.append(piece.lstrip(" ") if pos == 0 else piece)
        elif pos == reasoning_len + 1:
            answer.append("\n\n")
        elif pos == reasoning_len + 2:
            answer.append(piece.lstrip(" "))
        elif pos > reasoning_len:
            answer.append(piece)
    return "".join(reasoning), "".join(answer)


class ReasoningStream:
    """A reasoning reply's deltas, step by step:

    - while the reply reasons, reasoning text goes as `{"reasoning": ...}`; the step that
      holds `</think>` sends the reasoning before it and, as `content`, whatever followed
      it in the step, both in one delta when both are there (`content` first, the field
      order of vLLM's `DeltaMessage`), and no chunk when neither is (`</think>` alone),
      unless it finishes the reply: then its delta is `{}`;
    - after it, every step's text passes through as `{"content": ...}`, the blank line
      after `</think>` and the EOS token's empty text (`{"content": ""}`) included.
    """

    def __init__(self, reasoning_len: int) -> None:
        self.reasoning_len = reasoning_len

    def delta(self, em: Emission, stop: bool) -> dict[str, str] | None:
        reasoning, answer = split_reasoning(self.reasoning_len, em, em.finished and stop)
        if em.start > self.reasoning_len:  # the reasoning ended in an earlier step
            return {"content": answer}
        delta = {}
        if answer:
            delta["content"] = answer
        if reasoning:
            delta["reasoning"] = reasoning
        return delta or None
