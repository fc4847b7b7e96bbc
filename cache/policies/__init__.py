"""Eviction policies by name: the registry behind `--policy`. Each policy names its own settings class
(`POLICIES[name].settings_class`), the way a kvpress press carries its own settings."""

from __future__ import annotations

import dataclasses

from cache.policies.base import KEEP, POOL_MODES, EvictionPolicy, PolicySettings, select_keep
from cache.policies.full import FullCache
from cache.policies.h2o import HeavyHitterOracle
from cache.policies.inf_mllm import InfMLLM, InfMllmSettings
from cache.policies.picture import PictureOverflow, newest_of_each_region
from cache.policies.snapkv import SnapKV, SnapKvSettings
from cache.policies.streaming_llm import StreamingLLM, StreamingLlmSettings
from cache.policies.strided import Strided, StridedSettings
from cache.policies.view import TokenView
from cache.policies.window import WindowAttention

POLICIES: dict[str, type[EvictionPolicy]] = {
    cls.name: cls for cls in (InfMLLM, SnapKV, StreamingLLM, HeavyHitterOracle, WindowAttention, FullCache, Strided)
}


def settings_classes() -> list[type[PolicySettings]]:
    """Every registered policy's settings class that has settings, once each, in registry order."""
    found = [cls.settings_class for cls in POLICIES.values() if dataclasses.fields(cls.settings_class)]
    return list(dict.fromkeys(found))


def settings_for(policy: str, **values: object) -> PolicySettings:
    """`policy`'s settings from `values`, e.g. `settings_for("inf-mllm", bias=0.0, pool=1, sinks=0)`.

    Names another policy's settings have (here `sinks`) do not apply and are left out, as the command line
    leaves out flags of other policies; a name no policy has is a TypeError (a typo). Unknown policy: ValueError.
    """
    if policy not in POLICIES:
        raise ValueError(f"unknown cache policy {policy!r}; allowed: {', '.join(POLICIES)}")
    known = {f.name for cls in settings_classes() for f in dataclasses.fields(cls)}
    if unknown := sorted(set(values) - known):
        raise TypeError(f"no policy has the setting(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    settings_class = POLICIES[policy].settings_class
    own = {f.name for f in dataclasses.fields(settings_class)}
    return settings_class(**{name: value for name, value in values.items() if name in own})


def unused_settings(policy: str, **values: object) -> list[str]:
    """The names in `values` set away from their default that `policy` does not use (another policy's)."""
    own = {f.name for f in dataclasses.fields(POLICIES[policy].settings_class)}
    defaults = {f.name: f.default for cls in settings_classes() for f in dataclasses.fields(cls)}
    return [name for name, value in values.items() if name not in own and value != defaults.get(name, value)]


__all__ = [
    "KEEP",
    "POLICIES",
    "POOL_MODES",
    "EvictionPolicy",
    "InfMllmSettings",
    "PictureOverflow",
    "PolicySettings",
    "SnapKvSettings",
    "StreamingLlmSettings",
    "StridedSettings",
    "TokenView",
    "newest_of_each_region",
    "select_keep",
    "settings_classes",
    "settings_for",
    "unused_settings",
]
