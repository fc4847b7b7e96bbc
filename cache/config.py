"""Settings of the bounded KV cache, validated once when built."""

from __future__ import annotations

from dataclasses import dataclass

from cache.store.kv_quant import QUANT_MODES

POSITION_MODES = ("rerotate", "original")
POOL_MODES = ("max", "avg", "span")
STORAGE_MODES = ("static", "dynamic")


@dataclass
class CacheConfig:
    """How many tokens the cache keeps and how it chooses them.

    budget:    tokens per layer after every eviction point (the paper keeps 2K).
    window:    `l`, the retrieval window: the newest tokens of a prompt, always kept, whose attention
               scores the older tokens.
    bias:      `b`, Inf-MLLM's attention bias; larger = shorter memory (paper: 1e-4 .. 0.1 by model).
    pool:      span pooling of attention scores before the top-k (`inf-mllm`; snapkv has its own): each older token
               also scores the best of its `pool` neighbours, so what follows an attended token is kept too
               (copying a fact needs the tokens after the one the question finds). 1 = no pooling, which
               is Inf-MLLM's Algorithm 1 exactly as published. Default 8 "span": chosen by needle retrieval
               on the reference model (README, "What the cache remembers").
    pool_mode: "max" (centred max), "avg" (centred mean, SnapKV's) or "span" (the best of the `pool`
               tokens up to and including this one: a token is kept when one just before it is).
    sinks:     first tokens that `streaming-llm` always keeps.
    recall:    tokens brought back from the host store (tier 2) per question, 0 = no second tier. The device
               cache then holds at most budget + recall tokens (cache/store/host_store.py).
    store_bytes: host store bound in bytes (0: a quarter of the RAM available when the cache is built,
               at most 4 GiB); the oldest blocks go first.
    block:     tokens per host-store block (the unit of recall).
    store_dir: a folder for the host store's keys and values instead of RAM ("" = RAM); checked when the
               cache is built (exists, writable, room for store_bytes).
    store_quant: "none", "int8" or "int4": compress the host store (KIVI: keys per channel, values per token).
    positions: "rerotate" re-rotates kept keys to compact positions at each eviction, so an endless stream
               never leaves the trained position range (default); "original" keeps every token's first
               position, so positions grow with the stream.
    storage:   "static" keeps each layer's tokens in preallocated buffers filled and compacted in place, so
               decode steps have static shapes (cache/static_layer.py, cache/decode.py; default); "dynamic"
               keeps transformers' DynamicLayer storage, concatenated at every step.
    """

    policy: str = "inf-mllm"
    budget: int = 2048
    window: int = 32
    bias: float = 1e-3
    pool: int = 8
    pool_mode: str = "span"
    sinks: int = 4
    positions: str = "rerotate"
    recall: int = 0
    store_bytes: int = 0
    block: int = 32
    store_dir: str = ""
    store_quant: str = "none"
    storage: str = "static"

    def __post_init__(self) -> None:
        from cache.policies import POLICIES  # late import: policies import this module

        if self.policy not in POLICIES:
            raise ValueError(f"unknown cache policy {self.policy!r}; allowed: {', '.join(POLICIES)}")
        if self.window < 1:
            raise ValueError(f"window must be >= 1 token, got {self.window}")
        if self.budget <= self.window:
            raise ValueError(
                f"budget ({self.budget}) must be larger than the window ({self.window}): "
                "the window's tokens are always kept"
            )
        if self.bias < 0:
            raise ValueError(f"bias must be >= 0 (0 disables the attention bias), got {self.bias}")
        if self.pool < 1:
            raise ValueError(f"pool must be >= 1 token (1 = no pooling), got {self.pool}")
        if self.pool_mode not in POOL_MODES:
            raise ValueError(f"unknown pool_mode {self.pool_mode!r}; allowed: {', '.join(POOL_MODES)}")
        if self.sinks < 0:
            raise ValueError(f"sinks must be >= 0, got {self.sinks}")
        if self.sinks + self.window >= self.budget:
            raise ValueError(f"sinks + window ({self.sinks} + {self.window}) must be below the budget ({self.budget})")
        if self.recall < 0 or self.store_bytes < 0 or self.block < 1:
            raise ValueError(
                "recall and store_bytes must be >= 0 and block >= 1, "
                f"got {self.recall}, {self.store_bytes}, {self.block}"
            )
        if self.store_quant not in QUANT_MODES:
            raise ValueError(f"unknown store_quant {self.store_quant!r}; allowed: {', '.join(QUANT_MODES)}")
        if self.positions not in POSITION_MODES:
            raise ValueError(f"unknown positions mode {self.positions!r}; allowed: {', '.join(POSITION_MODES)}")
        if self.storage not in STORAGE_MODES:
            raise ValueError(f"unknown storage {self.storage!r}; allowed: {', '.join(STORAGE_MODES)}")
