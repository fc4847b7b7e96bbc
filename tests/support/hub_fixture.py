"""Hub checkpoints reproduced: a fixture folder of published files -> a loadable model directory.

tests/fixtures/hub/<org>--<name>/ holds a checkpoint's files as the hub publishes them (config.json shrunk in
its sizes only, generation/preprocessor/tokenizer configs, chat template, and the published tensor names:
model.safetensors.index.json for sharded checkpoints, model.safetensors.names.json for single-file ones).
`materialize(hub_id, dest)` copies those files and writes what is too large to commit:
  - safetensors shards with the published tensor names, sharded as published, random values of the shapes
    the shrunk config gives (bf16 or fp32 as the config's torch_dtype says), with {"format": "pt"} metadata;
    a published tensor the model class skips on load (`_keys_to_ignore_on_load_unexpected`: Qwen3.5's
    multi-token-prediction head `mtp.*`) is written as a one-element tensor, since only its name matters;
  - tokenizer.json: a small byte-level BPE standing in for the vocabulary, with every special token of
    tokenizer_config.json's added_tokens_decoder at its published id.
See tests/fixtures/hub/FIXTURE-SOURCES.md for where each file's facts come from.
"""

from __future__ import annotations

import json
import re
import shutil
from collections import defaultdict
from pathlib import Path

import torch
from safetensors.torch import save_file
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoConfig

from model.families import FAMILIES

FIXTURES = Path(__file__).parents[1] / "fixtures" / "hub"
HUB_IDS = (
    "Qwen/Qwen2-VL-2B-Instruct",
    "Qwen/Qwen2.5-VL-3B-Instruct",
    "Qwen/Qwen3-VL-2B-Instruct",
    "HuggingFaceTB/SmolVLM2-2.2B-Instruct",
    "HuggingFaceTB/SmolVLM2-256M-Video-Instruct",
    "Qwen/Qwen3.5-0.8B",
    "Qwen/Qwen3.5-2B",
)
INDEX = "model.safetensors.index.json"
NAMES = "model.safetensors.names.json"  # published tensor names of a single-file checkpoint
_NOT_PUBLISHED = {NAMES, "FIXTURE-SOURCES.md"}
# checkpoints written before transformers 5 name the decoder model.* and the vision tower visual.*
_LEGACY = [(re.compile(r"^model\.(?!language_model\.|visual\.)"), "model.language_model."),
           (re.compile(r"^visual\."), "model.visual.")]  # fmt: skip
_CORPUS = [
    "You are a helpful assistant. What is happening in the video? Describe the scene.",
    "A person walks into the room and sits on a chair. The cat is on the mat. A red car drives by.",
    "What color is the car? How many people are there? Frame from 00:12: the stream continues.",
    "User: Assistant: <t=0.0-4.0s> 0 1 2 3 4 5 6 7 8 9 seconds",
]
_FIRST_REGULAR_ID = 1000  # clear of low special ids (SmolLM2's 0..16)


def fixture_dir(hub_id: str) -> Path:
    return FIXTURES / hub_id.replace("/", "--")


def materialize(hub_id: str, dest: Path, seed: int = 0) -> Path:
    """Writes a complete, loadable model directory for `hub_id` into `dest` and returns it."""
    src = fixture_dir(hub_id)
    dest.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.is_file() and f.name not in _NOT_PUBLISHED:
            shutil.copy(f, dest / f.name)
    _write_tokenizer(json.loads((src / "tokenizer_config.json").read_text()), dest / "tokenizer.json")
    shards, single = _published_layout(src)
    shapes = _internal_shapes(src)
    ignored = _ignored_on_load(src)
    dtype = _checkpoint_dtype(json.loads((src / "config.json").read_text()))
    gen = torch.Generator().manual_seed(seed)
    total = 0
    for shard, names in shards.items():
        tensors = {}
        for name in sorted(names):
            shape = (1,) if any(p.search(name) for p in ignored) else shapes[internal_name(name, shapes)]
            tensors[name] = (torch.randn(shape, generator=gen) * 0.02).to(dtype)
            total += tensors[name].numel() * tensors[name].element_size()
        save_file(tensors, dest / shard, metadata={"format": "pt"})
    if not single:
        index = json.loads((src / INDEX).read_text())
        index["metadata"] = {"total_size": total}
        (dest / INDEX).write_text(json.dumps(index, indent=2))
    return dest


def internal_name(published: str, internal: dict) -> str:
    """The name a published tensor has in this transformers' model (the legacy renaming, where needed)."""
    if published in internal:
        return published
    for pattern, repl in _LEGACY:
        renamed = pattern.sub(repl, published)
        if renamed in internal:
            return renamed
    raise KeyError(f"published tensor {published!r} has no counterpart in the model built from the config")


def _published_layout(src: Path) -> tuple[dict[str, list[str]], bool]:
    """{shard file: published tensor names}, and whether the checkpoint is a single model.safetensors."""
    if (src / INDEX).exists():
        shards: dict[str, list[str]] = defaultdict(list)
        for name, shard in json.loads((src / INDEX).read_text())["weight_map"].items():
            shards[shard].append(name)
        return dict(shards), False
    return {"model.safetensors": json.loads((src / NAMES).read_text())}, True


def _internal_shapes(src: Path) -> dict[str, tuple[int, ...]]:
    """Parameter and buffer shapes of the model the shrunk config describes (built on the meta device)."""
    config = AutoConfig.from_pretrained(src, local_files_only=True)
    with torch.device("meta"):
        model = FAMILIES[config.model_type].model_class(config)
    return {k: tuple(v.shape) for k, v in model.state_dict().items()}


def _ignored_on_load(src: Path) -> list[re.Pattern]:
    """Patterns of published tensors the model class leaves out when loading (never missing, never unexpected)."""
    config = AutoConfig.from_pretrained(src, local_files_only=True)
    patterns = getattr(FAMILIES[config.model_type].model_class, "_keys_to_ignore_on_load_unexpected", None) or []
    return [re.compile(p) for p in patterns]


def _checkpoint_dtype(config: dict) -> torch.dtype:
    name = config.get("torch_dtype") or config.get("dtype") or "float32"
    return {"bfloat16": torch.bfloat16, "float16": torch.float16}.get(name, torch.float32)


def _write_tokenizer(tokenizer_config: dict, path: Path) -> None:
    """A byte-level BPE over a few sentences (ids from 1000 up) plus the published special tokens at
    their published ids; saved as tokenizer.json."""
    trainer = trainers.BpeTrainer(
        vocab_size=600, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    base = Tokenizer(models.BPE())
    base.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    base.train_from_iterator(_CORPUS, trainer)
    trained = json.loads(base.to_str())["model"]
    vocab = {tok: _FIRST_REGULAR_ID + i for tok, i in trained["vocab"].items()}
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in trained["merges"]]
    added = tokenizer_config.get("added_tokens_decoder", {})
    for tid, spec in added.items():
        vocab[spec["content"]] = int(tid)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_tokens(
        [
            AddedToken(s["content"], special=s.get("special", True), normalized=False, lstrip=False, rstrip=False)
            for _, s in sorted(added.items(), key=lambda kv: int(kv[0]))
        ]
    )
    tok.save(str(path))
