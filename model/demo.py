"""The demo model (`--model demo`): a small Qwen2-VL trained here from scratch on generated scenes.

It knows only the generated scenes of capture/scenes.py (coloured balls, squares, triangles, cars and a walking
person on five backgrounds) and answers in their words; it says nothing true about a real camera. It exists so
that an offline try answers what is on screen, and so that answers, watches and video memory can be scored
against ground truth (scripts/bench_video_qa.py). The weights ship in `model/demo_model/` as an ordinary
checkpoint directory; `scripts/train_demo_model.py` rebuilds them from the repository (seeded).

`build_demo(seed)` is the untrained architecture with its tokenizer and processor, as the training script starts.
"""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import GenerationConfig, PreTrainedModel, Qwen2VLConfig, Qwen2VLForConditionalGeneration

from model.processor import VisionTextProcessor
from model.tiny import _qwen_processor, _qwen_token_ids

DEMO_NAME = "demo"
DEMO_DIR = Path(__file__).resolve().parent / "demo_model"
REBUILD = "python scripts/train_demo_model.py (about 35 minutes on 2 CPU cores)"
CHECKPOINT_FILES = ("config.json", "model.safetensors", "tokenizer.json", "preprocessor_config.json")

# the words of every question and answer (quality/video_qa.py) and of the conversation layout, so that each
# is one token or a few; timestamps as the Qwen2-VL adapter writes them
_CORPUS = """\
You are a helpful assistant. What is happening now? What is on screen? What do you see? Describe the scene.
a red ball on a blue floor. a green square on sand. a yellow triangle on a dark night sky. a white car on a grey road.
a purple ball on a green garden. an orange car. a person. two red balls. three. nothing on sand. and
Is there a person? Is there a red ball? Answer yes or no. yes no Yes No
What colour is the car? What colour was the ball? How many balls are there? How many people are there?
How many squares are there? How many triangles are there? How many cars are there?
Did a green square appear? How many times did a person appear? square triangle car ball person
<t=0.0-4.0s> <t=4.0-8.0s> <t=12.0-16.0s> <t=120.5-124.5s> <t=236.0-240.0s> <t=988.0-992.0s>
0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 40 50 60 70 80 90 100
""" + "\n".join(
    ["yes", "no", "user", "assistant", "system", "a", "an", "nothing", "two", "three", "<t=", ".0-", ".0s>", ".5s>"]
    + ["red", "green", "yellow", "white", "purple", "orange", "0", "1", "2", "3", "4", "5", "6", "7", "8", "9"]
    + [f"<t={4 * i}.0-{4 * i + 4}.0s>" for i in range(0, 300, 7)]
)
VOCAB_SIZE = 768
TEXT = dict(
    hidden_size=128,
    intermediate_size=384,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=32768,
    initializer_range=0.02,
)
VISION = dict(
    depth=2, embed_dim=64, num_heads=4, mlp_ratio=2, patch_size=14, spatial_merge_size=2, temporal_patch_size=2,
    initializer_range=0.02,
)  # fmt: skip


def demo_processor() -> VisionTextProcessor:
    """The tiny Qwen2-VL processor (frames fit 112x112: 15 tokens per 2 frames of 16:9) with the demo's tokenizer."""
    return _qwen_processor(vocab_size=VOCAB_SIZE, corpus=_CORPUS)


def build_demo(seed: int = 0) -> tuple[PreTrainedModel, VisionTextProcessor]:
    """The untrained demo architecture (float32, CPU, train mode off) and its processor; same seed, same weights."""
    processor = demo_processor()
    tok = processor.tokenizer
    rope = {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [4, 6, 6]}  # sums to head_dim / 2
    vocab = -(-len(tok) // 64) * 64
    text = dict(
        TEXT, vocab_size=vocab, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, bos_token_id=None,
        rope_parameters=rope,
    )  # fmt: skip
    config = Qwen2VLConfig(
        text_config=text, vision_config=dict(VISION, hidden_size=TEXT["hidden_size"]), **_qwen_token_ids(tok)
    )
    torch.manual_seed(seed)
    model = Qwen2VLForConditionalGeneration(config)
    model.generation_config = GenerationConfig(
        eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, do_sample=False
    )
    model.eval()
    return model, processor


def demo_checkpoint() -> Path:
    """The shipped checkpoint directory; FileNotFoundError naming what is missing and how to rebuild it."""
    missing = [name for name in CHECKPOINT_FILES if not (DEMO_DIR / name).is_file()]
    if missing:
        raise FileNotFoundError(
            f"the demo model's checkpoint {DEMO_DIR} lacks {', '.join(missing)}; rebuild it with {REBUILD}"
        )
    return DEMO_DIR
