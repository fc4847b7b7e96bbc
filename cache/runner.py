"""The model loop over a bounded cache, as small named steps: prefill (chunked, then evict) and decode."""

from __future__ import annotations

import logging
from collections.abc import Callable

import torch

from cache.bounded_cache import BoundedCache, EvictionStats
from cache.decode import StaticDecoder
from cache.forward_args import with_cache

logger = logging.getLogger(__name__)


def chunk_bounds(length: int, chunk_size: int, min_last: int) -> list[tuple[int, int]]:
    """Splits [0, length) into chunks of at most `chunk_size`, the last holding at least `min_last`.

    The last chunk carries the prompt's retrieval window, so it must contain the whole window.
    """
    if length <= 0:
        raise ValueError("cannot prefill an empty prompt")
    if chunk_size < min_last:
        raise ValueError(f"chunk size {chunk_size} is smaller than the window {min_last}")
    starts = list(range(0, length, chunk_size))
    bounds = [(s, min(s + chunk_size, length)) for s in starts]
    if len(bounds) > 1 and bounds[-1][1] - bounds[-1][0] < min_last:
        cut = length - min_last
        bounds[-2] = (bounds[-2][0], cut)
        bounds[-1] = (cut, length)
    return bounds


class PrefillInterrupted(Exception):
    """`interrupt()` asked to stop between two prefill chunks; the chunks before it are in the cache."""


class CachedRunner:
    """Runs a transformers causal LM (or VLM) with a `BoundedCache`, one batch-1 stream at a time.

    position_dims: 1 for RoPE models, 3 for M-RoPE (Qwen2-VL family). compile_decode: compile the static
    decode step (cache/decode.py; it falls back to eager decoding where compiling is not available).
    """

    def __init__(
        self,
        model: torch.nn.Module,
        cache: BoundedCache,
        position_dims: int = 1,
        chunk_size: int = 512,
        compile_decode: bool = False,
    ) -> None:
        self.model = model
        self.cache = cache
        self.position_dims = position_dims
        self.chunk_size = max(chunk_size, cache.config.window)
        self.last_evictions: list[EvictionStats] = []
        self.device = next(model.parameters()).device
        self.interrupt: Callable[[], bool] = lambda: False  # checked between prefill chunks
        self.decoder = StaticDecoder(model, cache, position_dims, compile_decode, reserve=self.chunk_size)

    def text_positions(self, length: int, start: int | None = None) -> torch.Tensor:
        """Positions of `length` text tokens appended after the cache, on the CPU: [1, T] or [P, 1, T]."""
        first = self.cache.next_position if start is None else start
        pos = torch.arange(first, first + length)[None]
        return pos if self.position_dims == 1 else pos[None].expand(self.position_dims, 1, length)

    @torch.inference_mode()
    def prefill(
        self,
        *,
        input_ids: torch.Tensor | None = None,  # [1, T]
        inputs_embeds: torch.Tensor | None = None,  # [1, T, hidden]
        position_ids: torch.Tensor | None = None,  # [1, T] or [P, 1, T], best on the CPU; text positions when None
        evict_to: int | None = None,
        all_logits: bool = False,
        chunk_inputs: Callable[[int, int], dict] | None = None,
        visual: torch.Tensor | None = None,  # [T, 2] (frame, region) per token, -1 for text; None: all text
        **model_inputs,
    ) -> torch.Tensor:
        """Adds a prompt to the cache and returns the logits after its last token: [1, vocab]
        (with `all_logits`, after every token: [1, T, vocab], e.g. to measure perplexity).

        The prompt goes in chunks; after each chunk the cache is cut to its budget, and after the last one
        to `evict_to` (default: the budget; pass budget - headroom before decoding an answer). Between chunks
        `interrupt()` is asked whether to stop (PrefillInterrupted; the cache stays consistent). Extra
        `model_inputs` (pixel tensors) force a single chunk: pass `inputs_embeds` to chunk visual prompts.
        `chunk_inputs(start, stop)`, when given, supplies each chunk's inputs instead of the slice of
        `input_ids` / `inputs_embeds` (which then only give the length), e.g. visual features per chunk.
        `visual` tells the cache which tokens are visual and their frame and region ids (policies read them).
        """
        tokens = input_ids if input_ids is not None else inputs_embeds
        length = tokens.shape[1]
        if position_ids is None:
            position_ids = self.text_positions(length)
        budget = self.cache.config.budget
        target = budget if evict_to is None else evict_to
        chunk = length if model_inputs else self.chunk_size
        bounds = chunk_bounds(length, chunk, min(self.cache.config.window, length))
        self.last_evictions = []
        pieces = []
        for start, stop in bounds:
            if start > 0 and self.interrupt():
                raise PrefillInterrupted(f"stopped after {start} of {length} prompt tokens")
            is_last = stop == length
            if chunk_inputs is not None:
                piece = chunk_inputs(start, stop)
            elif input_ids is not None:
                piece = {"input_ids": input_ids[:, start:stop]}
            else:
                piece = {"inputs_embeds": inputs_embeds[:, start:stop]}
            keep = stop - start if all_logits else 1
            capture = self.cache.policy.capture
            chunk_visual = None if visual is None else visual[start:stop]
            logits = self._forward(position_ids[..., start:stop], capture, keep, chunk_visual, **piece, **model_inputs)
            pieces.append(logits)
            self.last_evictions.append(self.cache.evict(target if is_last else budget))
        return torch.cat(pieces, dim=1) if all_logits else pieces[-1][:, -1]

    @torch.inference_mode()
    def probe(
        self,
        *,
        input_ids: torch.Tensor | None = None,  # [1, T]
        inputs_embeds: torch.Tensor | None = None,  # [1, T, hidden]
        position_ids: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Runs a prompt over the cache only to read its queries, then takes it out again (one forward).

        Returns the queries of its last `window` rows, [L, H_q, R, D], and their positions [R] (first component).
        """
        _, captured, position_ids = self._visit(input_ids, inputs_embeds, position_ids, queries=True)
        queries = torch.stack([captured[i] for i in self.cache.kv_layer_ids])
        positions = position_ids.reshape(-1, position_ids.shape[-1])[0, -queries.shape[2] :]
        return queries, positions

    @torch.inference_mode()
    def peek(
        self,
        *,
        input_ids: torch.Tensor | None = None,  # [1, T]
        inputs_embeds: torch.Tensor | None = None,  # [1, T, hidden]
        position_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The logits after a prompt run over the cache ([1, vocab]), the prompt taken out again (one forward,
        no eviction, no attention recorded): what the model would say next, with the cache left as it was."""
        logits, _, _ = self._visit(input_ids, inputs_embeds, position_ids, queries=False)
        return logits

    def _visit(self, input_ids, inputs_embeds, position_ids, queries: bool):
        """One forward of a prompt over the cache, then the prompt's tokens dropped and the next position restored
        (and, on a hybrid model, the linear-attention states put back as they were: they cannot drop tokens).
        Returns (last logits [1, vocab], captured queries per attention layer, the position ids used)."""
        tokens = input_ids if input_ids is not None else inputs_embeds
        length = tokens.shape[1]
        if position_ids is None:
            position_ids = self.text_positions(length)
        next_position = self.cache.next_position
        states = self.cache.save_states()
        piece = {"input_ids": input_ids} if input_ids is not None else {"inputs_embeds": inputs_embeds}
        self.cache.stage_positions(position_ids, self.device)
        with self.cache.recording(None, queries=queries) as captured:
            out = self.model(
                position_ids=position_ids.to(self.device),
                **with_cache(self.model, self.cache),
                use_cache=True,
                logits_to_keep=1,
                **piece,
            )
        self.cache.drop_newest(length)
        self.cache.restore_states(states)
        self.cache.next_position = next_position
        return out.logits[:, -1], captured, position_ids

    @torch.inference_mode()
    def decode_step(self, token_id: int) -> torch.Tensor:
        """Feeds one generated token; returns the logits for the next: [1, vocab].

        Static shapes (cache/decode.py) whenever the cache allows; otherwise (full, h2o, dynamic storage)
        a plain forward over the cached tokens."""
        if self.decoder.can_step():
            logits = self.decoder.step(token_id, self.text_positions(1))
        else:
            ids = torch.tensor([[token_id]], device=self.device)
            capture = "accumulate" if self.cache.policy.capture == "accumulate" else None
            logits = self._forward(self.text_positions(1), capture, 1, input_ids=ids)[:, -1]
        self.keep_headroom()
        return logits

    def keep_headroom(self) -> None:
        """After a decode step: evicts to the budget if the answer outgrew the room its question left."""
        pinned = 0 if self.cache.pinned is None else self.cache.pinned.numel()  # recalled for this answer
        if self.cache.policy.evicts and self.cache.get_seq_length() > self.cache.config.budget + pinned:
            logger.warning("answer outgrew the cache's headroom; evicting during decoding")
            self.cache.evict(self.cache.config.budget)

    def _forward(
        self, position_ids: torch.Tensor, capture: str | None, keep: int, visual: torch.Tensor | None = None, **inputs
    ) -> torch.Tensor:
        """One forward over new tokens; the logits of its last `keep` tokens: [1, keep, vocab]."""
        self.cache.stage_positions(position_ids, self.device, visual)
        with self.cache.recording(capture):
            out = self.model(
                position_ids=position_ids.to(self.device),
                **with_cache(self.model, self.cache),
                use_cache=True,
                logits_to_keep=keep,
                **inputs,
            )
        return out.logits
