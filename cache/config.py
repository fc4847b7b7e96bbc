"""Settings of the bounded KV cache, validated once when built."""

from __future__ import annotations

from dataclasses import dataclass, field

from cache.policies import POLICIES, POOL_MODES, PolicySettings
from cache.store.kv_quant import QUANT_MODES

__all__ = ["POOL_MODES", "POSITION_MODES", "SELECTION_MODES", "STORAGE_MODES", "CacheConfig"]

POSITION_MODES = ("rerotate", "original")
SELECTION_MODES = ("per-head", "shared")
STORAGE_MODES = ("static", "dynamic")


@dataclass
class CacheConfig:
    """How many tokens the cache keeps and how it chooses them.

    budget:    tokens per layer after every eviction point (the paper keeps 2K).
    window:    `l`, the retrieval window: the newest tokens of a prompt, always kept, whose attention
               scores the older tokens.
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
    pin_picture: the newest version of every visual region the cache received (the current picture) is never
               evicted; the policy chooses the rest of the budget (cache/policies/picture.py). No effect on `full`
               or on text-only streams.
    selection: how an attention-scored policy (inf-mllm, snapkv, h2o) chooses: "per-head" lets every layer and
               KV head keep the tokens it attends to (the papers' way); "shared" keeps one set for all of them,
               chosen by their mean score, so every layer sees the same tokens (the demo model, trained on one
               set for all layers, needs it: docs/demo-model.md). No effect on the recency policies.
    storage:   "static" keeps each layer's tokens in preallocated buffers filled and compacted in place, so
               decode steps have static shapes (cache/static_layer.py, cache/decode.py; default); "dynamic"
               keeps transformers' DynamicLayer storage, concatenated at every step.
    policy_settings: the chosen policy's own settings (`POLICIES[policy].settings_class`, e.g.
               `InfMllmSettings(bias, pool, pool_mode)`, `StreamingLlmSettings(sinks)`); None: its defaults.
               `cache.policies.settings_for(policy, **values)` builds them from loose values.

    A field with `metadata={"help": ...}` is a command-line flag and a --config key (app/config_flags.py).
    """

    policy: str = field(default="inf-mllm", metadata={"help": "eviction policy", "choices": tuple(POLICIES)})
    budget: int = field(default=2048, metadata={"help": "tokens kept per layer after every eviction"})
    window: int = field(default=32, metadata={"help": "retrieval window l: newest prompt tokens, always kept"})
    positions: str = field(
        default="rerotate",
        metadata={
            "help": "rerotate: compact positions after eviction (runs forever); original: keep first positions",
            "choices": POSITION_MODES,
        },
    )
    recall: int = 0  # the app's --recall has its own default (app/flags.py, RecallFlags)
    store_bytes: int = field(
        default=0,
        metadata={
            "flag": "--store-mb",
            "help": "host store bound in MiB (0 = a quarter of the available RAM, at most 4096); oldest blocks go "
            "first",
            "type": float,
            "scale": 2**20,
            "unit": "MiB",
        },
    )
    block: int = field(default=32, metadata={"help": "tokens per host-store block (unit of recall)"})
    store_dir: str = field(
        default="",
        metadata={
            "help": "keep the host store's KV as files in this existing folder instead of RAM (checked at start; "
            "if it fails later, an error event and the store goes on in RAM)"
        },
    )
    store_quant: str = field(
        default="none",
        metadata={
            "help": "compress the host store: int8 or int4 (keys per channel, values per token, as KIVI)",
            "choices": QUANT_MODES,
        },
    )
    pin_picture: bool = field(
        default=True,
        metadata={
            "help": "never evict the newest version of any region of the frame: the current picture stays whole "
            "inside the budget, the policy chooses the rest (--no-pin-picture: the policy chooses everything)"
        },
    )
    selection: str = field(
        default="per-head",
        metadata={
            "help": "attention-scored policies: per-head (each layer and KV head keeps what it attends to) or "
            "shared (one set of tokens for every layer and head, by their mean score)",
            "choices": SELECTION_MODES,
        },
    )
    storage: str = "static"
    policy_settings: PolicySettings | None = None

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ValueError(f"unknown cache policy {self.policy!r}; allowed: {', '.join(POLICIES)}")
        if self.window < 1:
            raise ValueError(f"window must be >= 1 token, got {self.window}")
        if self.budget <= self.window:
            raise ValueError(
                f"budget ({self.budget}) must be larger than the window ({self.window}): "
                "the window's tokens are always kept"
            )
        settings_class = POLICIES[self.policy].settings_class
        if self.policy_settings is None:
            self.policy_settings = settings_class()
        elif type(self.policy_settings) is not settings_class:
            raise ValueError(
                f"policy {self.policy!r} takes {settings_class.__name__}, got {type(self.policy_settings).__name__} "
                "(cache.policies.settings_for builds the right one)"
            )
        self.policy_settings.check_fits(self.budget, self.window)
        if self.recall < 0 or self.store_bytes < 0 or self.block < 1:
            raise ValueError(
                "recall and store_bytes must be >= 0 and block >= 1, "
                f"got {self.recall}, {self.store_bytes}, {self.block}"
            )
        if self.store_quant not in QUANT_MODES:
            raise ValueError(f"unknown store_quant {self.store_quant!r}; allowed: {', '.join(QUANT_MODES)}")
        if self.positions not in POSITION_MODES:
            raise ValueError(f"unknown positions mode {self.positions!r}; allowed: {', '.join(POSITION_MODES)}")
        if not isinstance(self.pin_picture, bool):
            raise ValueError(f"pin_picture (--pin-picture) must be true or false, got {self.pin_picture!r}")
        if self.selection not in SELECTION_MODES:
            raise ValueError(f"unknown selection {self.selection!r}; allowed: {', '.join(SELECTION_MODES)}")
        if self.storage not in STORAGE_MODES:
            raise ValueError(f"unknown storage {self.storage!r}; allowed: {', '.join(STORAGE_MODES)}")
