"""scripts/bench_families.py: the published sizes it puts back, the bytes it counts, and a --quick run end to end."""

from __future__ import annotations

import csv
import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch

from model.families import FAMILIES
from tests.support.hub_fixture import fixture_dir

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def load(name: str = "bench_families"):
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def meta_model(hub_id: str):
    config = load().full_config(hub_id, fixture_dir(hub_id))
    with torch.device("meta"):
        return FAMILIES[config.model_type].model_class(config)


@pytest.mark.parametrize("hub_id", list(load().PUBLISHED))
def test_published_sizes_give_the_published_decoder_and_parameter_count(hub_id):
    model = meta_model(hub_id)
    # the decoder shape scripts/model_shapes.py (and the README's KV column) states for the checkpoint
    assert load().kv_shape(model) == load("model_shapes").FULL[hub_id]
    params = sum(p.numel() for p in model.parameters())
    index = fixture_dir(hub_id) / "model.safetensors.index.json"
    published = json.loads(index.read_text())["metadata"]["total_size"] if index.exists() else 0
    if published:  # the published index's total_size: every parameter once, in the checkpoint's dtype
        config = json.loads((fixture_dir(hub_id) / "config.json").read_text())
        element = 4 if config.get("torch_dtype") == "float32" else 2
        assert params * element == published
    elif hub_id == "Qwen/Qwen3.5-0.8B":  # the published shard's bf16 bytes less the MTP head's and the header's
        assert params == 852_985_920  # (tests/fixtures/hub/FIXTURE-SOURCES.md: 1,746,942,600 bytes)
    else:  # Qwen3-VL-2B: a single file, about 4.3 GB in bf16; Qwen3.5-2B: its index rebuilt, no published size
        assert 2.0e9 < params < 2.3e9


def test_decode_reads_the_decoder_and_output_layer_not_the_vision_tower(tmp_path):
    bench = load()
    for hub_id in ("Qwen/Qwen2-VL-2B-Instruct", "HuggingFaceTB/SmolVLM2-2.2B-Instruct"):
        model = bench.build(hub_id, tmp_path / hub_id.replace("/", "--"), quick=True).model
        inner = model.model
        vision = [inner.visual] if hasattr(inner, "visual") else [inner.vision_model, inner.connector]
        not_read = sum(p.numel() for m in vision for p in m.parameters())
        if not model.config.tie_word_embeddings:  # an untied input embedding: one row per token
            not_read += model.get_input_embeddings().weight.numel()
        total = sum(p.numel() for p in model.parameters())
        assert bench.decoder_weight_bytes(model) == 4 * (total - not_read)


def test_quick_run_writes_rows_whose_kv_bytes_match_the_config_arithmetic(tmp_path):
    out = tmp_path / "out"
    table = load().main(["--quick", "--families", "qwen2-vl", "smolvlm2", "--out", str(out)])
    rows = {r["family"]: r for r in csv.DictReader((out / "bench_families.csv").open())}
    assert set(rows) == {"qwen2-vl", "smolvlm2"}
    for family, hub_id in (
        ("qwen2-vl", "Qwen/Qwen2-VL-2B-Instruct"),
        ("smolvlm2", "HuggingFaceTB/SmolVLM2-2.2B-Instruct"),
    ):
        r = rows[family]
        text = json.loads((fixture_dir(hub_id) / "config.json").read_text())
        text = text.get("text_config", text)  # the fixture's shrunk decoder (--quick)
        head_dim = text.get("head_dim") or text["hidden_size"] // text["num_attention_heads"]
        layers, kv_heads = text["num_hidden_layers"], text["num_key_value_heads"]
        arithmetic = layers * kv_heads * head_dim * 2 * 4  # K and V, float32
        assert int(r["kv_bytes_per_token_cache"]) == int(r["kv_bytes_per_token_fp32"]) == arithmetic
        assert int(r["kv_bytes_per_token_bf16"]) == arithmetic // 2
        positions = 3 if family == "qwen2-vl" else 1  # M-RoPE; app/admission.py adds positions, origin, index, mask
        assert int(r["admission_bytes_per_token_fp32"]) == arithmetic + layers * kv_heads * (2 * positions * 8 + 12)
        assert int(r["stream_kv_bf16_bytes"]) == int(r["stream_kv_tokens"]) * (
            arithmetic // 2 + layers * kv_heads * (2 * positions * 8 + 12)
        )
        assert float(r["read_bytes_per_token"]) > int(r["decoder_weight_bytes"])  # + the KV of the cached tokens
        assert float(r["decode_ms_per_token"]) > 0 and float(r["bound_ms_per_token"]) > 0
    # visual tokens of a default clip (4 frames of 640x480 fitted to the frame box: 2 x 18 x 13), as docs/models.md
    # counts them
    assert (rows["qwen2-vl"]["visual_tokens_per_clip"], rows["smolvlm2"]["visual_tokens_per_clip"]) == ("468", "324")
    steps = list(csv.DictReader((out / "bench_families_steps.csv").open()))
    assert [s["kind"] for s in steps if s["family"] == "smolvlm2"] == ["clip"] * 2 + ["decode"] * 4
    assert (out / "bench_families.png").stat().st_size > 10_000
    assert "Machine: " in table and table.count("load average") == 2 and "`Qwen/Qwen2-VL-2B-Instruct`" in table
    # --report-only rebuilds the same rows from the CSV
    assert load().main(["--report-only", "--out", str(out)]).splitlines()[1:] == table.splitlines()[1:]


def test_a_cuda_run_without_a_gpu_stops_with_the_reason(capsys):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(SystemExit) as stop:
        load().parse_args(["--device", "cuda"])
    assert stop.value.code == 2
    assert "torch sees no CUDA device" in capsys.readouterr().err
    args = load().parse_args([])  # the CPU's defaults: float32, the five 2B-class checkpoints
    assert args.dtype == torch.float32 and args.device.type == "cpu" and "qwen3.5-0.8b" not in args.families
