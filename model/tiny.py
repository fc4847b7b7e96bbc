"""Tiny random-weight models of every supported family, built in-process (no download), for tests and
offline tries (`--model tiny`). Same architectures and processors as the real checkpoints, a few hundred
thousand parameters: 2 decoder layers, hidden 64, 4 query heads / 2 KV heads, a 2-layer vision tower.
Their answers are gibberish; they exist to exercise the real code paths. Deterministic given the seed.

`build_tiny(family)` returns (model, processor); `model.save_pretrained(d)` + `processor.save_pretrained(d)`
writes a directory that `load_model` reads exactly like a hub checkpoint.
"""

from __future__ import annotations

import logging

import torch
from transformers import (
    GenerationConfig,
    PreTrainedModel,
    Qwen2_5_VLConfig,
    Qwen2VLConfig,
    Qwen3_5Config,
    Qwen3VLConfig,
    SmolVLMConfig,
)
from transformers.image_utils import (
    IMAGENET_STANDARD_MEAN,
    IMAGENET_STANDARD_STD,
    OPENAI_CLIP_MEAN,
    OPENAI_CLIP_STD,
)
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil
from transformers.models.smolvlm.image_processing_pil_smolvlm import SmolVLMImageProcessorPil
from transformers.models.smolvlm.processing_smolvlm import DEFAULT_CHAT_TEMPLATE as SMOLVLM_CHAT_TEMPLATE

from model.families import FAMILIES
from model.processor import VisionTextProcessor
from model.tiny_tokenizer import build_bpe_tokenizer

logger = logging.getLogger(__name__)

TINY_NAMES = {
    "tiny": "qwen2_vl",
    "tiny-qwen2-vl": "qwen2_vl",
    "tiny-qwen2.5-vl": "qwen2_5_vl",
    "tiny-qwen3-vl": "qwen3_vl",
    "tiny-qwen3.5": "qwen3_5",
    "tiny-smolvlm2": "smolvlm",
}
VOCAB_SIZE = 512
# wider than the usual 0.02 so random logits are well separated (greedy decoding stays stable under
# the tiny float differences between chunked and whole-sequence prefill)
INIT_RANGE = 0.2
TEXT = dict(
    vocab_size=VOCAB_SIZE,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=32768,
    initializer_range=INIT_RANGE,
)

QWEN_CHAT_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}"
    "{{ message['content'] }}<|im_end|>\n"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}"
    "{% if add_vision_id %}Picture {{ image_count.value }}: {% endif %}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}"
    "{% set video_count.value = video_count.value + 1 %}"
    "{% if add_vision_id %}Video {{ video_count.value }}: {% endif %}"
    "<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}"
    "<|im_end|>\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
# Qwen3-VL's template, shortened (its tool-call and reasoning branches left out): no default system prompt.
# The same text is the Qwen3-VL hub fixture's chat_template.json (tests/fixtures/hub).
QWEN3_CHAT_TEMPLATE = """\
{%- set image_count = namespace(value=0) %}{%- set video_count = namespace(value=0) %}
{%- for message in messages %}
  {%- if message.role == 'system' %}
    {%- if loop.first %}{{- '<|im_start|>system\n' }}
      {%- if message.content is string %}{{- message.content }}
      {%- else %}{%- for content in message.content %}{%- if 'text' in content %}{{- content.text }}{%- endif %}
      {%- endfor %}{%- endif %}{{- '<|im_end|>\n' }}
    {%- endif %}
  {%- else %}{{- '<|im_start|>' + message.role + '\n' }}
    {%- if message.content is string %}{{- message.content }}
    {%- else %}
      {%- for content in message.content %}
        {%- if content.type == 'image' or 'image' in content or 'image_url' in content %}
          {%- set image_count.value = image_count.value + 1 %}
          {%- if add_vision_id %}{{- 'Picture ' ~ image_count.value ~ ': ' }}{%- endif %}
          {{- '<|vision_start|><|image_pad|><|vision_end|>' }}
        {%- elif content.type == 'video' or 'video' in content %}
          {%- set video_count.value = video_count.value + 1 %}
          {%- if add_vision_id %}{{- 'Video ' ~ video_count.value ~ ': ' }}{%- endif %}
          {{- '<|vision_start|><|video_pad|><|vision_end|>' }}
        {%- elif 'text' in content %}{{- content.text }}
        {%- endif %}
      {%- endfor %}
    {%- endif %}{{- '<|im_end|>\n' }}
  {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}
"""
QWEN_SPECIAL = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
    "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>",
]  # fmt: skip
SMOLVLM_SPECIAL = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<end_of_utterance>",
    "<fake_token_around_image>", "<global-img>", "<image>",
] + [f"<row_{r}_col_{c}>" for r in range(1, 7) for c in range(1, 7)]  # fmt: skip


def _qwen_processor(
    min_pixels: int = 56 * 56,
    max_pixels: int = 112 * 112,
    patch_size: int = 14,
    mean_std: tuple | None = None,
    chat_template: str = QWEN_CHAT_TEMPLATE,
    **tokenizer_options,
) -> VisionTextProcessor:
    tokenizer = build_bpe_tokenizer(
        QWEN_SPECIAL,
        vocab_size=tokenizer_options.pop("vocab_size", VOCAB_SIZE),
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=chat_template,
        extra_attributes={"image_token": "<|image_pad|>", "video_token": "<|video_pad|>"},
        **tokenizer_options,
    )
    common = dict(patch_size=patch_size, temporal_patch_size=2, merge_size=2)
    mean, std = mean_std or (list(OPENAI_CLIP_MEAN), list(OPENAI_CLIP_STD))
    image_processor = Qwen2VLImageProcessorPil(
        min_pixels=min_pixels, max_pixels=max_pixels, image_mean=mean, image_std=std, **common
    )
    video = dict(
        video_processor_type="Qwen2VLVideoProcessor",
        size={"shortest_edge": min_pixels, "longest_edge": max_pixels},
        image_mean=list(mean),
        image_std=list(std),
        **common,
    )
    return VisionTextProcessor(tokenizer, image_processor, video)


def _qwen_token_ids(tok) -> dict[str, int]:
    ids = {k: tok.convert_tokens_to_ids(v) for k, v in [
        ("image_token_id", "<|image_pad|>"), ("video_token_id", "<|video_pad|>"),
        ("vision_start_token_id", "<|vision_start|>"), ("vision_end_token_id", "<|vision_end|>"),
    ]}  # fmt: skip
    return ids


def _text_config(tok, **extra) -> dict:
    return dict(TEXT, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, bos_token_id=None, **extra)


def _tiny_qwen2_vl(processor: VisionTextProcessor) -> PreTrainedModel:
    tok = processor.tokenizer
    rope = {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]}  # 2+3+3 = head_dim/2
    config = Qwen2VLConfig(
        text_config=_text_config(tok, rope_parameters=rope),
        vision_config=dict(
            depth=2, embed_dim=32, hidden_size=TEXT["hidden_size"], num_heads=2, mlp_ratio=2,
            patch_size=14, spatial_merge_size=2, temporal_patch_size=2, initializer_range=INIT_RANGE,
        ),
        **_qwen_token_ids(tok),
    )  # fmt: skip
    return FAMILIES["qwen2_vl"].model_class(config)


def _tiny_qwen2_5_vl(processor: VisionTextProcessor) -> PreTrainedModel:
    tok = processor.tokenizer
    rope = {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]}
    config = Qwen2_5_VLConfig(
        text_config=_text_config(tok, rope_parameters=rope),
        vision_config=dict(
            depth=2, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=TEXT["hidden_size"],
            patch_size=14, spatial_merge_size=2, temporal_patch_size=2, window_size=56,
            fullatt_block_indexes=[1], tokens_per_second=2, initializer_range=INIT_RANGE,
        ),
        **_qwen_token_ids(tok),
    )  # fmt: skip
    return FAMILIES["qwen2_5_vl"].model_class(config)


def _qwen3_processor() -> VisionTextProcessor:
    """Qwen3-VL: patch 16 (32 px per merged token), mean/std 0.5."""
    return _qwen_processor(
        64 * 64, 128 * 128, patch_size=16, mean_std=([0.5] * 3, [0.5] * 3), chat_template=QWEN3_CHAT_TEMPLATE
    )


def _tiny_qwen3_vl(processor: VisionTextProcessor) -> PreTrainedModel:
    """Interleaved M-RoPE (sections sum to head_dim / 2 = 8) and DeepStack features from both vision blocks,
    added after both decoder layers."""
    tok = processor.tokenizer
    rope = {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3], "mrope_interleaved": True}
    config = Qwen3VLConfig(
        text_config=_text_config(tok, rope_parameters=rope, head_dim=16),
        vision_config=dict(
            depth=2, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=TEXT["hidden_size"],
            patch_size=16, spatial_merge_size=2, temporal_patch_size=2, num_position_embeddings=64,
            deepstack_visual_indexes=[0, 1], initializer_range=INIT_RANGE,
        ),
        **_qwen_token_ids(tok),
    )  # fmt: skip
    return FAMILIES["qwen3_vl"].model_class(config)


def _tiny_qwen3_5(processor: VisionTextProcessor) -> PreTrainedModel:
    """The hybrid decoder: 4 layers (MLPs of 64, to stay as small as the others), 3 Gated DeltaNet (linear
    attention) + 1 full attention (every 4th, as `full_attention_interval: 4` gives), partial RoPE (half of each
    16-dim head; the checkpoints rotate a quarter) with interleaved M-RoPE sections summing to 8 / 2 = 4, and
    Qwen3-VL's vision tower without DeepStack."""
    tok = processor.tokenizer
    rope = {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 1, 1], "partial_rotary_factor": 0.5}
    text = _text_config(tok, rope_parameters=rope, head_dim=16, num_hidden_layers=4, intermediate_size=64)
    text.update(
        layer_types=["linear_attention"] * 3 + ["full_attention"], linear_conv_kernel_dim=4,
        linear_key_head_dim=16, linear_value_head_dim=16, linear_num_key_heads=2, linear_num_value_heads=4,
    )  # fmt: skip
    config = Qwen3_5Config(
        text_config=text,
        vision_config=dict(
            depth=2, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=TEXT["hidden_size"],
            patch_size=16, spatial_merge_size=2, temporal_patch_size=2, num_position_embeddings=64,
            initializer_range=INIT_RANGE,
        ),
        **_qwen_token_ids(tok),
    )  # fmt: skip
    return FAMILIES["qwen3_5"].model_class(config)


def _smolvlm_processor(side: int = 64) -> VisionTextProcessor:
    tokenizer = build_bpe_tokenizer(
        SMOLVLM_SPECIAL,
        vocab_size=VOCAB_SIZE,
        bos_token="<|im_start|>",
        eos_token="<end_of_utterance>",
        pad_token="<|im_end|>",
        chat_template=SMOLVLM_CHAT_TEMPLATE,
        extra_attributes={
            "image_token": "<image>",
            "fake_image_token": "<fake_token_around_image>",
            "global_image_token": "<global-img>",
            "end_of_utterance_token": "<end_of_utterance>",
        },
    )
    image_processor = SmolVLMImageProcessorPil(
        size={"longest_edge": 4 * side},
        max_image_size={"longest_edge": side},
        image_mean=IMAGENET_STANDARD_MEAN,
        image_std=IMAGENET_STANDARD_STD,
    )
    video = dict(
        video_processor_type="SmolVLMVideoProcessor",
        max_image_size={"longest_edge": side},
        video_sampling={"fps": 1, "max_frames": 64, "video_size": {"longest_edge": side}},
    )
    return VisionTextProcessor(tokenizer, image_processor, video)


def _tiny_smolvlm(processor: VisionTextProcessor, side: int = 64) -> PreTrainedModel:
    tok = processor.tokenizer
    config = SmolVLMConfig(
        text_config=dict(_text_config(tok), model_type="llama", rope_theta=10000.0),
        vision_config=dict(
            hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
            image_size=side, patch_size=8, initializer_range=INIT_RANGE,
        ),
        scale_factor=2,
        image_token_id=tok.convert_tokens_to_ids("<image>"),
        pad_token_id=tok.pad_token_id,
    )  # fmt: skip
    return FAMILIES["smolvlm"].model_class(config)


_BUILDERS = {
    "qwen2_vl": (_qwen_processor, _tiny_qwen2_vl),
    "qwen2_5_vl": (_qwen_processor, _tiny_qwen2_5_vl),
    "qwen3_vl": (_qwen3_processor, _tiny_qwen3_vl),
    "qwen3_5": (_qwen3_processor, _tiny_qwen3_5),
    "smolvlm": (_smolvlm_processor, _tiny_smolvlm),
}


def build_tiny(family: str = "qwen2_vl", seed: int = 0) -> tuple[PreTrainedModel, VisionTextProcessor]:
    """A random-weight tiny model of `family` (a model_type: qwen2_vl, qwen2_5_vl, smolvlm) and its
    processor. Same seed, same weights and tokenizer. The model is in eval mode, float32, on CPU."""
    if family not in _BUILDERS:
        raise ValueError(f"no tiny model for family {family!r}; choose one of {', '.join(_BUILDERS)}")
    make_processor, make_model = _BUILDERS[family]
    processor = make_processor()
    tok = processor.tokenizer
    if len(tok) > VOCAB_SIZE:
        raise RuntimeError(f"tiny tokenizer has {len(tok)} tokens, more than the vocab size {VOCAB_SIZE}")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = make_model(processor)
    stop = processor.tokenizer.convert_tokens_to_ids(
        "<|im_end|>" if family.startswith("qwen") else "<end_of_utterance>"
    )
    eos = [stop] + ([tok.convert_tokens_to_ids("<|endoftext|>")] if family.startswith("qwen") else [])
    model.generation_config = GenerationConfig(eos_token_id=eos, pad_token_id=tok.pad_token_id)
    model.eval()
    n_params = sum(p.numel() for p in model.parameters())
    logger.info("built tiny %s model: %d parameters, vocab %d (random weights)", family, n_params, len(tok))
    return model, processor
