"""ModelConfig validation and device / dtype resolution (no model needed)."""

import pytest
import torch

from model.config import ModelConfig, resolve_device, resolve_dtype


def test_defaults_are_valid():
    cfg = ModelConfig()
    assert cfg.model == "Qwen/Qwen2-VL-2B-Instruct"
    assert (cfg.device, cfg.dtype, cfg.trust_remote_code) == ("auto", "auto", False)


@pytest.mark.parametrize("device", ["cpu", "cuda", "cuda:1", "auto"])
def test_valid_devices(device):
    assert ModelConfig(device=device).device == device


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"device": "gpu"}, "cuda:N"),
        ({"device": "cuda:x"}, "cuda:N"),
        ({"dtype": "fp16"}, "bfloat16"),
        ({"dtype": "int8"}, "float32"),
        ({"model": "  "}, "tiny"),
    ],
)
def test_invalid_values_name_the_allowed_ones(kwargs, named):
    with pytest.raises(ValueError, match=named):
        ModelConfig(**kwargs)


def test_resolve_device_cpu_and_auto(monkeypatch):
    assert resolve_device("cpu") == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == torch.device("cpu")
    with pytest.raises(ValueError, match="CUDA is not available"):
        resolve_device("cuda:0")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto") == torch.device("cuda")


def test_resolve_dtype():
    assert resolve_dtype("auto", "cpu") == torch.float32
    assert resolve_dtype("bfloat16", "cpu") == torch.bfloat16
    assert resolve_dtype("float16", torch.device("cpu")) == torch.float16
    with pytest.raises(ValueError, match="float32"):
        resolve_dtype("half", "cpu")


@pytest.mark.parametrize(("bf16", "expected"), [(True, torch.bfloat16), (False, torch.float16)])
def test_resolve_dtype_auto_on_gpu(monkeypatch, bf16, expected):
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: bf16)
    assert resolve_dtype("auto", "cuda:0") == expected
    assert resolve_dtype("float32", "cuda:0") == torch.float32
