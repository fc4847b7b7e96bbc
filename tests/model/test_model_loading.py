"""load_model: a saved tiny model loads like a hub checkpoint; failures give one clear ModelLoadError."""

import numpy as np
import pytest
import torch
from transformers import LlamaConfig

from model.config import ModelConfig
from model.families import FAMILIES
from model.loading import ModelLoadError, load_model
from tests.support.model_fixtures import ALL_FAMILIES, random_frames, tiny


def _load(name: str, **kwargs):
    return load_model(ModelConfig(model=name, device="cpu", dtype="float32"), local_files_only=True, **kwargs)


@pytest.mark.parametrize("family", ALL_FAMILIES)
def test_saved_tiny_model_round_trips(family, tmp_path):
    model, processor, adapter = tiny(family)
    model.save_pretrained(tmp_path)
    processor.save_pretrained(tmp_path)

    loaded = _load(str(tmp_path))
    assert loaded.family == family and type(loaded.adapter) is FAMILIES[family].adapter_class
    assert loaded.device == torch.device("cpu") and loaded.model.dtype == torch.float32
    assert not loaded.model.training
    assert loaded.tokenizer.get_vocab() == processor.tokenizer.get_vocab()
    assert loaded.adapter.eos_token_ids() == adapter.eos_token_ids()
    assert loaded.adapter.frame_size() == adapter.frame_size()

    frames = random_frames(3, 50, 70)
    ours = [loaded.adapter.conversation_prefix(), loaded.adapter.clip_segment(frames, 0.0, 3.0)]
    ref = [adapter.conversation_prefix(), adapter.clip_segment(frames, 0.0, 3.0)]
    ours.append(loaded.adapter.question_segment("What is there?"))
    ref.append(adapter.question_segment("What is there?"))
    a, b = loaded.adapter.merge_for_generate(ours), adapter.merge_for_generate(ref)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    with torch.no_grad():
        assert torch.equal(loaded.model(**a).logits, model(**b).logits)


def test_attention_is_set_per_sub_config(tmp_path):
    model, processor, _ = tiny("qwen2_vl")
    model.save_pretrained(tmp_path)
    processor.save_pretrained(tmp_path)
    for loaded in (_load(str(tmp_path), text_attention="eager"), _load("tiny", text_attention="eager")):
        assert loaded.model.config.text_config._attn_implementation == "eager"
        assert loaded.model.config.vision_config._attn_implementation == "sdpa"


@pytest.mark.parametrize(
    ("name", "family"),
    [("tiny", "qwen2_vl"), ("tiny-qwen2.5-vl", "qwen2_5_vl"), ("tiny-smolvlm2", "smolvlm")],
)
def test_tiny_names_build_locally(name, family):
    loaded = load_model(ModelConfig(model=name, device="cpu", dtype="bfloat16"))
    assert loaded.family == family and loaded.model.dtype == torch.bfloat16
    seg = loaded.adapter.clip_segment(np.zeros((2, 32, 32, 3), np.uint8), 0.0, 1.0)
    with torch.no_grad():
        emb = loaded.adapter.segment_embeddings(loaded.model, seg)
    assert emb.dtype == torch.bfloat16 and emb.shape[1] == seg.num_tokens


def _assert_clear(err: ModelLoadError, *parts: str) -> None:
    text = str(err)
    for part in ("Supported families", "qwen2_vl", "smolvlm", "--model tiny", *parts):
        assert part in text, (part, text)


def test_unknown_hub_id_gives_clear_error():
    with pytest.raises(ModelLoadError) as info:
        _load("no-such-org/no-such-video-model")
    _assert_clear(info.value, "no-such-org/no-such-video-model", "not found")


def test_missing_directory_and_file_give_clear_errors(tmp_path):
    with pytest.raises(ModelLoadError) as info:
        _load(str(tmp_path / "missing" / "model"))
    _assert_clear(info.value, "no such directory")
    (tmp_path / "weights.bin").write_bytes(b"0")
    with pytest.raises(ModelLoadError) as info:
        _load(str(tmp_path / "weights.bin"))
    _assert_clear(info.value, "not a model directory")
    with pytest.raises(ModelLoadError) as info:
        _load(str(tmp_path))
    _assert_clear(info.value, "config.json")


def test_unsupported_architecture_gives_clear_error(tmp_path):
    config = LlamaConfig(
        vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2
    )
    config.architectures = ["LlamaForCausalLM"]
    config.save_pretrained(tmp_path)
    with pytest.raises(ModelLoadError) as info:
        _load(str(tmp_path))
    _assert_clear(info.value, "'llama'", "LlamaForCausalLM", "not supported")
