"""The supported model families: config model_type -> model class, image processor class, adapter class."""

from __future__ import annotations

from dataclasses import dataclass

from transformers import (
    PreTrainedModel,
    Qwen2_5_VLForConditionalGeneration,
    Qwen2VLForConditionalGeneration,
    Qwen3_5ForConditionalGeneration,
    Qwen3VLForConditionalGeneration,
    SmolVLMForConditionalGeneration,
)
from transformers.image_processing_utils import BaseImageProcessor
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil
from transformers.models.smolvlm.image_processing_pil_smolvlm import SmolVLMImageProcessorPil

from model.adapters import Qwen2VLAdapter, Qwen3VLAdapter, Qwen25VLAdapter, Qwen35Adapter, SmolVLM2Adapter, VideoAdapter


@dataclass(frozen=True)
class Family:
    """How to load and talk to one architecture (one transformers model_type)."""

    model_type: str
    display_name: str
    model_class: type[PreTrainedModel]
    image_processor_class: type[BaseImageProcessor]
    adapter_class: type[VideoAdapter]


FAMILIES: dict[str, Family] = {
    f.model_type: f
    for f in (
        Family("qwen2_vl", "Qwen2-VL", Qwen2VLForConditionalGeneration, Qwen2VLImageProcessorPil, Qwen2VLAdapter),
        Family(
            "qwen2_5_vl",
            "Qwen2.5-VL",
            Qwen2_5_VLForConditionalGeneration,
            Qwen2VLImageProcessorPil,
            Qwen25VLAdapter,
        ),
        Family("qwen3_vl", "Qwen3-VL", Qwen3VLForConditionalGeneration, Qwen2VLImageProcessorPil, Qwen3VLAdapter),
        Family("qwen3_5", "Qwen3.5", Qwen3_5ForConditionalGeneration, Qwen2VLImageProcessorPil, Qwen35Adapter),
        Family("smolvlm", "SmolVLM2", SmolVLMForConditionalGeneration, SmolVLMImageProcessorPil, SmolVLM2Adapter),
    )
}


def supported_families_text() -> str:
    """'Qwen2-VL (qwen2_vl), Qwen2.5-VL (qwen2_5_vl), SmolVLM2 (smolvlm)' for error messages and --help."""
    return ", ".join(f"{f.display_name} ({f.model_type})" for f in FAMILIES.values())
