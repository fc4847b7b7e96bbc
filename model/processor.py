"""The text + pixel side of a model: tokenizer, image-processor settings and video settings.

transformers' own processor classes (Qwen2VLProcessor, SmolVLMProcessor) need torchvision for their video
processor (and SmolVLM's needs num2words), which the CPU and Jetson installs lack. This bundle keeps the
parts that work everywhere: the tokenizer (with its chat template), the PIL image processor (its settings:
patch size, mean/std, resampling) and the raw video preprocessing settings. It saves and loads the same
files a hub repository has (tokenizer files, preprocessor_config.json, video_preprocessor_config.json), so
a directory written by `save_pretrained` loads like a hub model, and a hub model's files load here.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from typing import Any

from transformers import AutoTokenizer, PreTrainedTokenizerBase
from transformers.image_processing_utils import BaseImageProcessor
from transformers.utils import cached_file

logger = logging.getLogger(__name__)

IMAGE_PROCESSOR_FILE = "preprocessor_config.json"
VIDEO_PROCESSOR_FILE = "video_preprocessor_config.json"


@dataclass
class VisionTextProcessor:
    """Tokenizer + image processor + video settings of one model.

    video_settings: the video preprocessor config as a plain dict (from video_preprocessor_config.json,
    else preprocessor_config.json, as transformers' video processors fall back to it). Adapters read the
    per-frame size limits from it (Qwen2-VL: size / min_pixels / max_pixels; SmolVLM: video_sampling).
    """

    tokenizer: PreTrainedTokenizerBase
    image_processor: BaseImageProcessor
    video_settings: dict[str, Any] = field(default_factory=dict)

    def save_pretrained(self, directory: str | os.PathLike) -> None:
        """Write tokenizer files, preprocessor_config.json and video_preprocessor_config.json."""
        os.makedirs(directory, exist_ok=True)
        self.tokenizer.save_pretrained(directory)
        self.image_processor.save_pretrained(directory)
        if self.video_settings:
            with open(os.path.join(directory, VIDEO_PROCESSOR_FILE), "w", encoding="utf-8") as f:
                json.dump(self.video_settings, f, indent=2, sort_keys=True)

    @classmethod
    def from_pretrained(
        cls,
        name_or_path: str,
        image_processor_class: type[BaseImageProcessor],
        *,
        trust_remote_code: bool = False,
        local_files_only: bool = False,
    ) -> VisionTextProcessor:
        """Load from a hub id or a local directory (the same files `save_pretrained` writes)."""
        hub = {"local_files_only": local_files_only}
        tokenizer = AutoTokenizer.from_pretrained(name_or_path, trust_remote_code=trust_remote_code, **hub)
        image_processor = image_processor_class.from_pretrained(name_or_path, **hub)
        video_settings = _read_optional_json(name_or_path, VIDEO_PROCESSOR_FILE, hub)
        if video_settings is None:
            video_settings = _read_optional_json(name_or_path, IMAGE_PROCESSOR_FILE, hub) or {}
        return cls(tokenizer=tokenizer, image_processor=image_processor, video_settings=video_settings)


def _read_optional_json(name_or_path: str, filename: str, hub: dict) -> dict[str, Any] | None:
    path = cached_file(
        name_or_path,
        filename,
        _raise_exceptions_for_missing_entries=False,
        _raise_exceptions_for_connection_errors=False,
        **hub,
    )
    if path is None:
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)
