"""Eviction policies by name: the registry behind `--policy`."""

from cache.policies.base import KEEP, EvictionPolicy, select_keep
from cache.policies.full import FullCache
from cache.policies.h2o import HeavyHitterOracle
from cache.policies.inf_mllm import InfMLLM
from cache.policies.snapkv import SnapKV
from cache.policies.streaming_llm import StreamingLLM
from cache.policies.window import WindowAttention

POLICIES: dict[str, type[EvictionPolicy]] = {
    cls.name: cls for cls in (InfMLLM, SnapKV, StreamingLLM, HeavyHitterOracle, WindowAttention, FullCache)
}

__all__ = ["KEEP", "POLICIES", "EvictionPolicy", "select_keep"]
