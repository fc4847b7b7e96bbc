"""The hub's own checkpoint files load on the first try: published configs (old keys included), published tensor
names sharded as published, published tokenizer/preprocessor configs and chat templates
(tests/support/hub_fixture.py)."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import AutoConfig

from model.config import ModelConfig
from model.families import FAMILIES
from model.loading import ModelLoadError, load_model
from tests.support.app_helpers import of_type, read_log, video
from tests.support.hub_fixture import HUB_IDS, fixture_dir, materialize
from tests.support.in_process_main import run_main
from tests.support.model_fixtures import random_frames

AVAILABLE = [h for h in HUB_IDS if fixture_dir(h).is_dir()]
QUESTION = "What is happening?"


@pytest.fixture(scope="module", params=AVAILABLE)
def checkpoint(request, tmp_path_factory):
    hub_id = request.param
    return hub_id, materialize(hub_id, tmp_path_factory.mktemp(hub_id.replace("/", "--")))


@pytest.fixture(scope="module")
def loaded(checkpoint):
    """The checkpoint loaded by `load_model` once, for the tests that only read it."""
    _, path = checkpoint
    return load_model(ModelConfig(model=str(path), device="cpu", dtype="float32"), local_files_only=True)


def _published_config(hub_id: str) -> dict:
    return json.loads((fixture_dir(hub_id) / "config.json").read_text())


def test_every_published_weight_loads_and_none_is_missing(checkpoint):
    hub_id, path = checkpoint
    family = FAMILIES[AutoConfig.from_pretrained(path).model_type]
    model, info = family.model_class.from_pretrained(path, output_loading_info=True)
    assert info["missing_keys"] == set() or info["missing_keys"] == []
    assert not info["unexpected_keys"] and not info["mismatched_keys"], info
    # the weights are the checkpoint's, not freshly initialised ones
    from safetensors import safe_open

    shard = sorted(path.glob("*.safetensors"))[-1]
    with safe_open(shard, "pt") as f:
        name = next(n for n in f.keys() if n.endswith("norm.weight") or n.endswith("layernorm.weight"))
        stored = f.get_tensor(name).float()
    state = model.state_dict()
    loaded = [v for k, v in state.items() if k.endswith(name.split(".", 1)[1]) and v.shape == stored.shape]
    assert any(torch.equal(v.float(), stored) for v in loaded), name


def test_published_config_facts_survive_loading(checkpoint, loaded):
    hub_id, _ = checkpoint
    published = _published_config(hub_id)
    config = loaded.model.config
    text = config.get_text_config()
    assert loaded.family == published["model_type"]
    if "rope_scaling" in published:  # the old key: {"type": "mrope", "mrope_section": [...]}
        assert text.rope_parameters["mrope_section"] == published["rope_scaling"]["mrope_section"]
        assert text.rope_parameters["rope_theta"] == published["rope_theta"]
    published_text = published.get("text_config", {})
    if "layer_types" in published_text:  # a hybrid (Qwen3.5): which layers keep keys and values, partial M-RoPE
        assert list(text.layer_types) == published_text["layer_types"]
        for key in ("mrope_section", "partial_rotary_factor", "rope_theta"):
            assert text.rope_parameters[key] == published_text["rope_parameters"][key], key
        assert loaded.model.config.vision_config.deepstack_visual_indexes == []
    for key in ("image_token_id", "video_token_id", "vision_start_token_id", "vision_end_token_id"):
        if key in published:
            assert getattr(config, key) == published[key], key
    assert loaded.adapter.eos_token_ids()  # the published end-of-turn token exists in the tokenizer


def _published_template(hub_id: str) -> str:
    folder = fixture_dir(hub_id)
    if (folder / "chat_template.jinja").exists():
        return (folder / "chat_template.jinja").read_text()
    if (folder / "chat_template.json").exists():
        return json.loads((folder / "chat_template.json").read_text())["chat_template"]
    return json.loads((folder / "tokenizer_config.json").read_text())["chat_template"]


def test_clip_and_question_follow_the_published_prompt_layout(checkpoint, loaded):
    """Our segments (prefix + one clip + a question) are token for token what the published chat template
    renders for the same turns, with the processor's expansion of the visual placeholders."""
    hub_id, _ = checkpoint
    adapter, tok = loaded.adapter, loaded.tokenizer
    frames = random_frames(4, 60, 80)
    clip = adapter.clip_segment(frames, 0.0, 2.0)
    ours = torch.cat(
        [s.input_ids for s in (adapter.conversation_prefix(), clip, adapter.question_segment(QUESTION))], 1
    )
    messages, expand = adapter_turns(adapter, clip, frames.shape[0])
    text = tok.apply_chat_template(messages, chat_template=_published_template(hub_id), tokenize=False,
                                   add_generation_prompt=True)  # fmt: skip
    text = expand(text)
    expected = tok(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
    assert tok.decode(ours[0]) == tok.decode(expected[0])
    assert torch.equal(ours, expected)


def adapter_turns(adapter, clip, n_frames: int):
    """The chat messages our layout stands for, and how the family's processor expands visual placeholders."""
    family = adapter.family
    if family in ("qwen3_vl", "qwen3_5"):  # the processor turns the one video placeholder into timestamped frame groups
        messages = [
            {"role": "user", "content": [{"type": "video"}]},
            {"role": "user", "content": [{"type": "text", "text": QUESTION}]},
        ]
        stamps = adapter.group_timestamps(n_frames, 0.0, 2.0)
        per_group = clip.num_visual_tokens // len(stamps)
        groups = "".join(
            f"<{t:.1f} seconds><|vision_start|>" + "<|video_pad|>" * per_group + "<|vision_end|>" for t in stamps
        )
        return messages, lambda s: s.replace("<|vision_start|><|video_pad|><|vision_end|>", groups)
    if family.startswith("qwen"):
        messages = [
            {"role": "user", "content": [{"type": "text", "text": "<t=0.0-2.0s>"}, {"type": "video"}]},
            {"role": "user", "content": [{"type": "text", "text": QUESTION}]},
        ]
        pad = "<|video_pad|>"
        return messages, lambda s: s.replace(pad, pad * clip.num_visual_tokens)
    # SmolVLM: one image per frame, never split: <fake><global-img><image> x S<fake>
    content = [{"type": "text", "text": "<t=0.0-2.0s>"}]
    for i in range(n_frames):
        content += [{"type": "text", "text": f"\nFrame from 00:{i // 2:02d}:"}, {"type": "image"}]
    messages = [{"role": "user", "content": content}, {"role": "user", "content": [{"type": "text", "text": QUESTION}]}]
    block = "<fake_token_around_image><global-img>" + "<image>" * adapter.tokens_per_frame + "<fake_token_around_image>"
    return messages, lambda s: s.replace("<image>", block)


def test_the_app_runs_a_round_on_the_checkpoint(checkpoint, tmp_path, capsys):
    """`python -m app` on the checkpoint, run in this process (main)."""
    hub_id, path = checkpoint
    log = tmp_path / "events.jsonl"
    code, err = run_main(
        capsys, "--model", str(path), "--video", str(video(6)), "--max-rounds", "1", "--every", "4", "--no-realtime",
        "--max-new-tokens", "4", "--quiet", "--log-jsonl", str(log),
    )  # fmt: skip
    assert code == 0, err[-3000:]
    events = read_log(log)
    assert len(of_type(events, "answer")) == 1 and of_type(events, "clip")
    assert not of_type(events, "error"), of_type(events, "error")


def test_a_checkpoint_missing_a_weight_is_refused_by_name(tmp_path):
    """A published file set with one tensor gone must not load with that weight left random."""
    path = materialize("Qwen/Qwen2-VL-2B-Instruct", tmp_path / "ckpt")
    index = json.loads((path / "model.safetensors.index.json").read_text())
    from safetensors.torch import load_file, save_file

    shard = path / index["weight_map"]["model.norm.weight"]
    tensors = load_file(shard)
    del tensors["model.norm.weight"]
    save_file(tensors, shard, metadata={"format": "pt"})
    del index["weight_map"]["model.norm.weight"]
    (path / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(ModelLoadError, match="missing") as info:
        load_model(ModelConfig(model=str(path), device="cpu", dtype="float32"), local_files_only=True)
    assert "norm.weight" in str(info.value)
