"""Shared pieces of the session tests: tiny models loaded once, plain generate()."""

from __future__ import annotations

import functools

import torch

from cache.attention import register_attention
from model.config import ModelConfig
from model.loading import LoadedModel, load_model

TINY_FAMILIES = ["tiny-qwen2-vl", "tiny-qwen3-vl", "tiny-qwen3.5", "tiny-smolvlm2"]  # tiny-qwen3.5: the hybrid


@functools.cache
def loaded(name: str, attention: str = "bounded") -> LoadedModel:
    """The tiny model `name` on bounded_sdpa ("bounded") or plain "sdpa" (same weights: same seed)."""
    text_attention = register_attention() if attention == "bounded" else attention
    return load_model(ModelConfig(model=name, device="cpu"), text_attention=text_attention)


def generate_answer(model: LoadedModel, segments, max_new_tokens: int) -> list[int]:
    """Plain transformers: greedy generate() over the whole conversation; the answer without its stop token."""
    return generate_answer_with_logits(model, segments, max_new_tokens)[0]


def generate_answer_with_logits(model: LoadedModel, segments, max_new_tokens: int) -> tuple[list[int], torch.Tensor]:
    """generate_answer, and the logits each answer token was chosen from: [steps, vocab] (the stop's step too)."""
    adapter = model.adapter
    inputs = adapter.merge_for_generate(segments)
    with torch.inference_mode():
        out = model.model.generate(
            **inputs,
            max_new_tokens=max_new_tokens,
            do_sample=False,
            suppress_tokens=adapter.suppressed_token_ids(),
            eos_token_id=adapter.eos_token_ids(),
            pad_token_id=adapter.eos_token_ids()[0],
            output_logits=True,
            return_dict_in_generate=True,
        )
    new = out.sequences[0, inputs["input_ids"].shape[1] :].tolist()
    stops = set(adapter.eos_token_ids())
    answer = new[: next((i for i, t in enumerate(new) if t in stops), len(new))]
    return answer, torch.cat([step[:1].float() for step in out.logits])


def assert_equal_up_to_a_near_tie(ours: list[int], expected: list[int], logits: torch.Tensor, stops, tie: float, step):
    """`ours` is `expected` token for token, or it leaves it only where the reference's logits were a near-tie.

    Where two runs differ only in rounding (int8's per-token input scales turn a last-bit difference between a
    chunked and a whole prefill into a different rounding), greedy decoding may pick the other of two tokens whose
    logits are within rounding of each other. That choice is not a fault of the session: so the first token where
    the answers part must have had a reference logit within `tie` of the reference's best (after it, the answers
    continue from different tokens and are not compared). Any other difference fails. `logits`: [steps, vocab],
    one row per reference token and one for its stop; `stops`: the stop token ids (an answer ends on one of them).
    """
    for i in range(min(len(ours), len(expected)) + 1):
        mine = ours[i] if i < len(ours) else None  # None: the answer stopped here
        theirs = expected[i] if i < len(expected) else None
        if mine == theirs:
            if mine is None:
                return
            continue
        if i >= logits.shape[0]:
            break  # the reference ran out of new tokens here: nothing to weigh ours against
        chosen = logits[i, list(stops)].max() if mine is None else logits[i, mine]
        gap = (logits[i].max() - chosen).item()
        assert gap <= tie, f"step {step}: token {i} is {mine}, not {theirs}: {gap:.4f} below the best, no near-tie"
        return
    assert ours == expected, f"step {step} differs"
