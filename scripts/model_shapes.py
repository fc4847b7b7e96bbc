"""Per supported checkpoint: visual tokens per clip at the default frame size and KV bytes per token.

Reads the hub fixtures (tests/fixtures/hub: the published configs, shrunk) and puts the published decoder sizes
back (FULL below, as tests/fixtures/hub/FIXTURE-SOURCES.md records them), so the numbers are those of the real
2B-class checkpoints; visual tokens come from each family's adapter on a real 4-frame clip (the default
--fps 1 x --clip-seconds 4) of 640x480 frames downscaled as the capture does. No weights are needed.

    python scripts/model_shapes.py            # markdown table on stdout
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np
from transformers import AutoConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from model.families import FAMILIES  # noqa: E402
from model.processor import VisionTextProcessor  # noqa: E402
from tests.support.hub_fixture import HUB_IDS, materialize  # noqa: E402

# published decoder sizes the fixtures shrink: (layers, KV heads, head_dim)
FULL = {
    "Qwen/Qwen2-VL-2B-Instruct": (28, 2, 128),
    "Qwen/Qwen2.5-VL-3B-Instruct": (36, 2, 128),
    "Qwen/Qwen3-VL-2B-Instruct": (28, 8, 128),
    "HuggingFaceTB/SmolVLM2-2.2B-Instruct": (24, 32, 64),
    "HuggingFaceTB/SmolVLM2-256M-Video-Instruct": (30, 3, 64),
    "Qwen/Qwen3.5-0.8B": (6, 2, 256),  # attention layers only: 18 of its 24 are Gated DeltaNet (no KV)
    "Qwen/Qwen3.5-2B": (6, 2, 256),
}
FRAMES, SOURCE = 4, (480, 640)  # default clip: 1 fps x 4 s; a VGA camera


def fit(height: int, width: int, box: tuple[int, int]) -> tuple[int, int]:
    """The capture's early downscale: fit inside box (w, h), aspect kept, never upscaled."""
    scale = min(box[0] / width, box[1] / height, 1.0)
    return max(2, round(height * scale)), max(2, round(width * scale))


def row(hub_id: str, folder: Path) -> str:
    path = materialize(hub_id, folder)
    config = AutoConfig.from_pretrained(path)
    family = FAMILIES[config.model_type]
    processor = VisionTextProcessor.from_pretrained(str(path), family.image_processor_class, local_files_only=True)
    adapter = family.adapter_class(config, processor)
    box = adapter.frame_size()
    h, w = fit(*SOURCE, box)
    clip = adapter.clip_segment(np.zeros((FRAMES, h, w, 3), np.uint8), 0.0, 4.0)
    layers, kv_heads, head_dim = FULL[hub_id]
    kv_bytes = 2 * layers * kv_heads * head_dim * 2  # K and V, bf16
    return (
        f"| `{hub_id}` | {family.display_name} | {box[0]}x{box[1]} ({w}x{h} from 640x480) | "
        f"{clip.num_visual_tokens} | {clip.num_tokens} | {layers} x {kv_heads} x {head_dim} | "
        f"{kv_bytes:,} ({kv_bytes / 1024:.1f} KiB) | {kv_bytes * clip.num_tokens / 2**20:.1f} MiB |"
    )


def main() -> None:
    print("| checkpoint | family | frame box (clip frames) | visual tokens / clip | tokens / clip | "
          "layers x KV heads x head dim | KV bytes / token (bf16) | KV of one clip |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for hub_id in HUB_IDS:
            print(row(hub_id, Path(tmp) / hub_id.replace("/", "--")))


if __name__ == "__main__":
    main()
