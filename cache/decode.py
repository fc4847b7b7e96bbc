"""Decode steps with static shapes over a static bounded cache, compiled when torch.compile works (gpt-fast's
`decode_one_token`).

Every input of a step lives in a tensor allocated once (the token, its positions, the slot it is written
to, the mask over the cache's fixed span of slots) and is filled in place, so the forward sees the same
shapes and the same cache buffers at every step: `torch.compile` traces it once, and on CUDA its graph is
captured and replayed (mode "reduce-overhead"). Where compiling is not available or fails (Jetson builds,
old torch, no C++ compiler), the same function runs eagerly: the outputs are the same either way.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import torch

from cache.bounded_cache import BoundedCache
from cache.cpu.kernels import kernels_ready
from cache.forward_args import with_cache
from cache.static_layer import StaticBoundedLayer

logger = logging.getLogger(__name__)

# What a failed compilation raises at its first call (dynamo and inductor errors are RuntimeErrors;
# a missing triton or compiler toolchain can surface as ImportError or OSError).
COMPILE_ERRORS = (RuntimeError, ImportError, OSError)


def decode_forward(
    model: torch.nn.Module,
    cache: BoundedCache,
    input_ids: torch.Tensor,  # [1, 1]
    position_ids: torch.Tensor,  # [1, 1] or [P, 1, 1]
    attention_mask: torch.Tensor,  # [1, 1, 1, span] bool: True for the filled slots
) -> torch.Tensor:
    """One forward of one token over the cache's span of slots: logits [1, vocab]."""
    out = model(
        input_ids=input_ids,
        position_ids=position_ids,
        attention_mask=attention_mask,
        **with_cache(model, cache),
        use_cache=True,
        logits_to_keep=1,
    )
    return out.logits[:, -1]


def compile_decode(fn: Callable, device: torch.device) -> Callable | None:
    """`fn` compiled (CUDA graphs on CUDA), or None when this torch has no `torch.compile`."""
    compiler = getattr(torch, "compile", None)
    if compiler is None:
        logger.warning("this torch has no torch.compile; decoding eagerly")
        return None
    mode = "reduce-overhead" if device.type == "cuda" else None
    return compiler(fn, mode=mode, dynamic=False)


class StaticDecoder:
    """Feeds one token at a time into a cache of `StaticBoundedLayer`s with static shapes.

    span: the slots a step attends to, budget + recall + 1 (an evicting cache never holds more while
    decoding). capacity: what every layer's buffers hold while decoding: the span plus `reserve` tokens
    (a prefill chunk), so that the usual prompts are prefilled without reallocating; buffers that a long
    prompt grew are cut back to it at the next step. `compile`: compile the step (see `compile_decode`);
    `compiled` says whether it still is.
    """

    def __init__(
        self, model: torch.nn.Module, cache: BoundedCache, position_dims: int, compile: bool, reserve: int = 0
    ) -> None:
        self.model = model
        self.cache = cache
        self.device = next(model.parameters()).device
        self.span = cache.config.budget + cache.config.recall + 1
        self.capacity = self.span + reserve
        self.input_ids = torch.zeros(1, 1, dtype=torch.long, device=self.device)
        shape = (1, 1) if position_dims == 1 else (position_dims, 1, 1)
        self.position_ids = torch.zeros(shape, dtype=torch.long, device=self.device)
        self.slot = torch.zeros(1, dtype=torch.long, device=self.device)
        self.mask = torch.zeros(1, 1, 1, self.span, dtype=torch.bool, device=self.device)
        self._slots = torch.arange(self.span, device=self.device)
        if compile and self.device.type == "cpu":
            kernels_ready()  # build the CPU kernel now: a compiled step must not trace its build
        self._compiled = compile_decode(decode_forward, self.device) if compile else None

    @property
    def compiled(self) -> bool:
        return self._compiled is not None

    def can_step(self) -> bool:
        """Whether the next token can go through the static path (otherwise decode the usual way)."""
        cache = self.cache
        layers = cache.kv_layers
        return (
            cache.policy.evicts
            and cache.policy.capture != "accumulate"  # h2o scores every decode step: an eager observer
            and isinstance(layers[0], StaticBoundedLayer)
            and layers[0].is_initialized
            and layers[0].length < self.span
        )

    @torch.inference_mode()
    def step(self, token_id: int, position_ids: torch.Tensor) -> torch.Tensor:
        """Adds `token_id` at `position_ids` ([1, 1] or [P, 1, 1], CPU); returns the next logits [1, vocab]."""
        cache = self.cache
        cache.stage_positions(position_ids, self.device)
        slot = -1
        for layer in cache.kv_layers:
            if layer.capacity != self.capacity:  # a compiled step must always see the same buffer shapes
                layer.resize(self.capacity)
            slot = layer.claim_slot()
            layer.step = (self.slot, self.span)
        self.input_ids.fill_(token_id)
        self.position_ids.copy_(position_ids.view(self.position_ids.shape))
        self.slot.fill_(slot)
        torch.lt(self._slots, slot + 1, out=self.mask.view(-1))
        try:
            return self._forward().clone()  # CUDA graphs overwrite their outputs at the next replay
        finally:
            for layer in cache.kv_layers:
                layer.step = None

    def _forward(self) -> torch.Tensor:
        inputs = (self.model, self.cache, self.input_ids, self.position_ids, self.mask)
        if self._compiled is not None:
            try:
                return self._compiled(*inputs)
            except COMPILE_ERRORS as e:  # the step only writes this token's slot: running it again is safe
                logger.warning("compiled decode step failed (%s: %s); decoding eagerly", type(e).__name__, e)
                self._compiled = None
        return decode_forward(*inputs)
