"""Loads the language model whose memory is measured: the reference LM, any causal LM, or a VLM's text path.

Every model is loaded with the cache's `bounded_sdpa` attention, so `BoundedCache` can score its tokens.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from cache.attention import register_attention
from model.config import ModelConfig
from model.families import FAMILIES
from model.loading import ModelLoadError, load_model
from model.tiny import TINY_NAMES
from quality.reference import REFERENCE_NAME, require_reference

logger = logging.getLogger(__name__)

REFERENCE = "reference"


@dataclass
class TextLM:
    """A model driven with token ids only. position_dims: 1 (RoPE) or 3 (Qwen2-VL's M-RoPE)."""

    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    position_dims: int
    name: str

    def encode(self, text: str) -> list[int]:
        """Token ids of `text`, with no special tokens added."""
        return self.tokenizer(text, add_special_tokens=False).input_ids

    @property
    def trained_context(self) -> int | None:
        config = self.model.config.get_text_config()
        return getattr(config, "max_position_embeddings", None)


def load_text_lm(name: str = REFERENCE, device: str = "cpu", dtype: torch.dtype = torch.float32) -> TextLM:
    """`reference` (SmolLM2-135M-Instruct, see quality.reference), a `.gguf` file, a local folder or hub id
    of a causal LM, or a supported VLM (hub id, folder or tiny name), whose text decoder is then used."""
    attention = register_attention()
    if name in TINY_NAMES or _vlm_family(name) is not None:
        loaded = load_model(ModelConfig(model=name, device=device, dtype=_dtype_name(dtype)), text_attention=attention)
        return TextLM(loaded.model, loaded.tokenizer, loaded.adapter.position_dims, name)
    if name == REFERENCE:
        folder, gguf = str(require_reference()), None
        label = REFERENCE_NAME
    elif name.endswith(".gguf"):
        path = Path(name).expanduser()
        if not path.is_file():
            raise ModelLoadError(f"GGUF file {name!r} not found")
        folder, gguf, label = str(path.parent), path.name, path.name
    else:
        folder, gguf, label = name, None, name
    extra = {"gguf_file": gguf} if gguf else {}
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, **extra)
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, attn_implementation=attention, **extra)
    except (OSError, ValueError, KeyError) as e:
        raise ModelLoadError(f"could not load causal LM {name!r}: {type(e).__name__}: {e}") from e
    model.to(device).eval()
    return TextLM(model, tokenizer, 1, label)


def _vlm_family(name: str) -> str | None:
    """The VLM family of a folder or hub id, or None for anything else (read from its config)."""
    if name == REFERENCE or name.endswith(".gguf"):
        return None
    try:
        model_type = AutoConfig.from_pretrained(name).model_type
    except (OSError, ValueError, KeyError):
        return None
    return model_type if model_type in FAMILIES else None


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
