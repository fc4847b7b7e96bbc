"""Load a video LLM (hub id, local directory, "tiny" or "demo"), its processor and its family adapter."""

from __future__ import annotations

import importlib.util
import logging
import os
import time
from dataclasses import dataclass

import torch
from safetensors import SafetensorError
from transformers import AutoConfig, PreTrainedModel

from model.adapters.base import VideoAdapter
from model.config import ModelConfig, resolve_device, resolve_dtype
from model.demo import DEMO_NAME, REBUILD, demo_checkpoint
from model.families import FAMILIES, Family, supported_families_text
from model.processor import VisionTextProcessor
from model.tiny import TINY_NAMES, build_tiny

logger = logging.getLogger(__name__)


class ModelLoadError(RuntimeError):
    """The model could not be loaded: missing, not downloadable, or of an unsupported architecture."""


@dataclass
class LoadedModel:
    """A model ready for streaming: eval mode, on `device` in `dtype`, with its processor and adapter."""

    model: PreTrainedModel
    processor: VisionTextProcessor
    adapter: VideoAdapter
    device: torch.device
    dtype: torch.dtype
    name: str
    family: str

    @property
    def tokenizer(self):
        return self.processor.tokenizer

    @property
    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.model.parameters())


def attention_implementation(text_attention: str) -> dict[str, str]:
    """Per-sub-config attention implementations: `text_attention` for the decoder, plain sdpa for the
    vision tower ("" is the top-level config, as transformers' set_attn_implementation reads it)."""
    return {"": text_attention, "text_config": text_attention, "vision_config": "sdpa"}


def load_model(config: ModelConfig, text_attention: str = "sdpa", *, local_files_only: bool = False) -> LoadedModel:
    """Load `config.model` (a hub id, a local directory, a tiny name or "demo") on the resolved device and dtype.

    text_attention: attention implementation of the text decoder (e.g. "sdpa", "eager", or a name
        registered with transformers' AttentionInterface); the vision tower always uses "sdpa".
    local_files_only: never touch the network (hub ids must then be in the local cache).
    Raises ModelLoadError with a message naming the supported families.
    """
    device = resolve_device(config.device)
    dtype = resolve_dtype(config.dtype, device)
    attn = attention_implementation(text_attention)
    start = time.perf_counter()
    if config.model in TINY_NAMES:
        family = FAMILIES[TINY_NAMES[config.model]]
        logger.info("building tiny %s model (random weights, answers are gibberish)", family.display_name)
        model, processor = build_tiny(family.model_type)
        model.set_attn_implementation(attn)
        model.to(device=device, dtype=dtype)
    elif config.model == DEMO_NAME:
        family = FAMILIES["qwen2_vl"]
        model, processor = _load_demo(family, config, device, dtype, attn)
    else:
        name, family = _resolve(config, local_files_only)
        model, processor = _load_pretrained(name, family, config, device, dtype, attn, local_files_only)
    model.eval()
    adapter = family.adapter_class(model.config, processor, model.generation_config)
    loaded = LoadedModel(model, processor, adapter, device, dtype, config.model, family.model_type)
    logger.info(
        "loaded %s (%s, %.1fM parameters) on %s in %s, %.1fs",
        config.model,
        family.display_name,
        loaded.num_parameters / 1e6,
        device,
        str(dtype).removeprefix("torch."),
        time.perf_counter() - start,
    )
    return loaded


def check_loading_info(info: dict) -> None:
    """ValueError when the checkpoint lacks weights the model needs (they would stay random: answers would be
    noise) or holds weights of another shape; weights the model does not use are only logged."""
    if info.get("missing_keys") or info.get("mismatched_keys"):
        missing = sorted(info.get("missing_keys") or [])
        mismatched = sorted(str(k) for k in info.get("mismatched_keys") or [])
        raise ValueError(
            f"the checkpoint does not match the model: {len(missing)} weights missing {missing[:5]}, "
            f"{len(mismatched)} of another shape {mismatched[:5]}"
        )
    if info.get("unexpected_keys"):
        logger.warning(
            "the checkpoint holds %d weights the model does not use, e.g. %s",
            len(info["unexpected_keys"]),
            sorted(info["unexpected_keys"])[:5],
        )


def _load_demo(family: Family, config: ModelConfig, device, dtype, attn) -> tuple[PreTrainedModel, VisionTextProcessor]:
    """The shipped demo checkpoint (model/demo.py); a missing or damaged one names its folder and how to rebuild."""
    try:
        path = demo_checkpoint()
    except FileNotFoundError as e:
        raise ModelLoadError(f"Could not load model 'demo': {e}") from e
    logger.info("loading the demo model (trained here on generated scenes only; it knows nothing of real cameras)")
    try:
        return _load_pretrained(str(path), family, config, device, dtype, attn, local_files_only=True)
    except ModelLoadError as e:
        raise ModelLoadError(
            f"the demo model's checkpoint {path} is damaged ({e.__cause__}); rebuild it with {REBUILD}"
        ) from e


def _error(name: str, reason: str) -> ModelLoadError:
    return ModelLoadError(
        f"Could not load model {name!r}: {reason}. Supported families: {supported_families_text()}. "
        "Give a Hugging Face id (e.g. Qwen/Qwen2-VL-2B-Instruct) or a local directory holding its files; "
        "without network access, try `--model demo` (trained here on generated scenes) or `--model tiny` (random "
        "weights, built locally)."
    )


def _looks_like_path(name: str) -> bool:
    return os.path.isabs(name) or name.startswith((".", "~")) or name.count("/") > 1 or name.endswith("/")


def _resolve(config: ModelConfig, local_files_only: bool) -> tuple[str, Family]:
    """Check that the name is a readable model of a supported family; return (name or path, family)."""
    name = config.model
    path = os.path.expanduser(name)
    if os.path.isdir(path):
        name = path
    elif os.path.exists(path):
        raise _error(config.model, "it is a file, not a model directory")
    elif _looks_like_path(name):
        raise _error(config.model, "no such directory")
    logger.info("reading the config of %s", name)
    try:
        hf_config = AutoConfig.from_pretrained(
            name, trust_remote_code=config.trust_remote_code, local_files_only=local_files_only
        )
    except (OSError, ValueError, KeyError) as e:
        where = "the directory has no readable config.json" if os.path.isdir(name) else "not found or not downloadable"
        raise _error(config.model, f"{where} ({type(e).__name__}: {e})") from e
    family = FAMILIES.get(hf_config.model_type)
    if family is None:
        arch = ", ".join(getattr(hf_config, "architectures", None) or []) or "unknown architecture"
        raise _error(config.model, f"its model_type {hf_config.model_type!r} ({arch}) is not supported")
    return name, family


def _load_pretrained(
    name: str,
    family: Family,
    config: ModelConfig,
    device: torch.device,
    dtype: torch.dtype,
    attn: dict[str, str],
    local_files_only: bool,
) -> tuple[PreTrainedModel, VisionTextProcessor]:
    logger.info("loading %s weights of %s on %s (%s)", family.display_name, name, device, dtype)
    try:
        # with accelerate, weights go straight to the device; without it, through CPU memory
        placement = {"device_map": str(device)} if importlib.util.find_spec("accelerate") else {}
        model, info = family.model_class.from_pretrained(
            name,
            dtype=dtype,
            attn_implementation=attn,
            trust_remote_code=config.trust_remote_code,
            local_files_only=local_files_only,
            output_loading_info=True,
            **placement,
        )
        check_loading_info(info)
        model.to(device)
        logger.info("loading the tokenizer and processor settings of %s", name)
        processor = VisionTextProcessor.from_pretrained(
            name,
            family.image_processor_class,
            trust_remote_code=config.trust_remote_code,
            local_files_only=local_files_only,
        )
    except (OSError, ValueError, KeyError, SafetensorError) as e:
        raise _error(config.model, f"loading failed ({type(e).__name__}: {e})") from e
    return model, processor
