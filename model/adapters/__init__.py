"""One adapter class per model family: prompt layout, frame preprocessing, positions, embeddings."""

from model.adapters.base import Segment, VideoAdapter
from model.adapters.qwen2_vl import Qwen2VLAdapter, Qwen25VLAdapter
from model.adapters.qwen3_5 import Qwen35Adapter
from model.adapters.qwen3_vl import Qwen3VLAdapter
from model.adapters.smolvlm2 import SmolVLM2Adapter

__all__ = [
    "Qwen25VLAdapter",
    "Qwen35Adapter",
    "Qwen2VLAdapter",
    "Qwen3VLAdapter",
    "Segment",
    "SmolVLM2Adapter",
    "VideoAdapter",
]
