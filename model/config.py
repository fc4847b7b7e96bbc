"""Which model to load, on which device, in which precision."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import torch

DEVICES = ("auto", "cpu", "cuda", "cuda:N")
DTYPES = {
    "auto": None,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
    "float32": torch.float32,
}
QUANTIZE_CHOICES = ("none", "int8")
_DEVICE_RE = re.compile(r"^(auto|cpu|cuda|cuda:\d+)$")


@dataclass
class ModelConfig:
    """Model selection.

    model: a Hugging Face id, a local directory, or "tiny" / "tiny-qwen2-vl" / "tiny-qwen2.5-vl" / "tiny-qwen3-vl" /
        "tiny-smolvlm2" (random weights built locally; "tiny" is the Qwen2-VL one), or "demo" (a small Qwen2-VL
        trained here on generated scenes, shipped in model/demo_model; it knows only those scenes).
    device: "auto" (CUDA when present, else CPU), "cpu", "cuda" or "cuda:N".
    dtype: "auto" (bf16 on GPU, fp16 where bf16 is unsupported, fp32 on CPU), "bfloat16", "float16" or
        "float32".
    trust_remote_code: passed to transformers; only needed for families outside the supported ones.
    quantize: "none" or "int8" (CPU, fp32: every linear layer with int8 weights and per-token int8 products,
        model/quantize.py).

    A field with `metadata={"help": ...}` is a command-line flag and a --config key (app/config_flags.py).
    """

    model: str = field(
        default="Qwen/Qwen2-VL-2B-Instruct",
        metadata={
            "help": "Hugging Face id, local directory, 'demo' (trained here on generated scenes only: offline answers "
            "about the demo video) or 'tiny' (random weights, gibberish answers, offline)"
        },
    )
    device: str = field(default="auto", metadata={"help": "auto (CUDA when present), cuda, cuda:N or cpu"})
    dtype: str = field(
        default="auto", metadata={"help": "auto (bf16/fp16 on GPU, fp32 on CPU), bfloat16, float16, float32"}
    )
    trust_remote_code: bool = field(default=False, metadata={"help": "allow code shipped with the model"})
    quantize: str = field(
        default="none",
        metadata={
            "help": "int8: every linear layer with int8 weights and products (CPU only; 4x smaller weights, "
            "about 2x faster clips; quality in docs/benchmarks.md)",
            "choices": QUANTIZE_CHOICES,
        },
    )

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model.strip():
            raise ValueError("model must be a Hugging Face id, a local directory or 'tiny'; got an empty value")
        if not _DEVICE_RE.fullmatch(str(self.device)):
            raise ValueError(f"device must be one of {', '.join(DEVICES)}; got {self.device!r}")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)}; got {self.dtype!r}")
        if self.quantize not in QUANTIZE_CHOICES:
            raise ValueError(f"quantize must be one of {', '.join(QUANTIZE_CHOICES)}; got {self.quantize!r}")
        if self.quantize == "int8" and (self.device.startswith("cuda") or self.dtype not in ("auto", "float32")):
            raise ValueError(
                "quantize int8 runs on the CPU in float32 (its kernel is AVX2); use it with --device cpu or auto "
                f"and --dtype auto or float32, not --device {self.device} --dtype {self.dtype}"
            )


def resolve_device(name: str) -> torch.device:
    """'auto' -> cuda when available, else cpu; anything else as given ('cuda' means the current GPU)."""
    if not _DEVICE_RE.fullmatch(str(name)):
        raise ValueError(f"device must be one of {', '.join(DEVICES)}; got {name!r}")
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {name!r} was asked for but CUDA is not available; use --device cpu")
    return device


def resolve_dtype(name: str, device: torch.device | str) -> torch.dtype:
    """'auto' -> bfloat16 on a GPU that supports it, float16 on one that does not (some Jetson builds),
    float32 on CPU. Explicit names map to the torch dtype."""
    if name not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}; got {name!r}")
    explicit = DTYPES[name]
    if explicit is not None:
        return explicit
    device = torch.device(device)
    if device.type == "cuda":
        # emulated bf16 (pre-Ampere GPUs) is slow: prefer fp16 there
        native_bf16 = torch.cuda.is_bf16_supported(including_emulation=False)
        return torch.bfloat16 if native_bf16 else torch.float16
    return torch.float32
