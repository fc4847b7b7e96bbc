"""The name a model's forward takes its cache under: `cache` from transformers 5.24 on (where `past_key_values`
raises a FutureWarning; removal announced for 5.40), `past_key_values` before (requirements allow 5.5 and up).
Read once per model class from its forward's signature, so the code is right on both sides of the rename."""

from __future__ import annotations

import functools
import inspect

import torch


@functools.cache
def cache_argument(model_class: type) -> str:
    """`"cache"` when `model_class.forward` names a parameter `cache`, else `"past_key_values"`."""
    try:
        parameters = inspect.signature(model_class.forward).parameters
    except (TypeError, ValueError):
        return "past_key_values"
    return "cache" if "cache" in parameters else "past_key_values"


def with_cache(model: torch.nn.Module, cache: object) -> dict[str, object]:
    """The keyword argument that hands `cache` to `model`'s forward: `model(**with_cache(model, cache), ...)`."""
    return {cache_argument(type(model)): cache}
