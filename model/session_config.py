"""A streaming session's settings, apart from the session itself (model.session imports transformers; the
command line reads these fields for its flags without loading it)."""

from __future__ import annotations

from dataclasses import dataclass, field

from model.change import ChangeConfig


@dataclass
class SessionConfig:
    """max_new_tokens: answer length cap, also the headroom kept free in the cache at each question.
    chunk_size: tokens per prefill forward; bounds peak activation memory whatever the clip length.
    compile_decode: compile the static decode step with torch.compile (CUDA graphs on a GPU); the first
    answer waits for the compilation, and decoding falls back to eager where compiling fails.
    change: which visual tokens of a clip enter the cache (model/change.py: unchanged ones are dropped).

    A field with `metadata={"help": ...}` is a command-line flag and a --config key (app/config_flags.py)."""

    max_new_tokens: int = field(default=64, metadata={"help": "answer length cap (also the cache headroom)"})
    chunk_size: int = field(default=512, metadata={"help": "tokens per prefill step (bounds peak memory)"})
    compile_decode: bool = field(
        default=False,
        metadata={
            "flag": "--compile",
            "help": "compile the decode step with torch.compile (CUDA graphs on a GPU) for faster answers under an "
            "evicting policy; the first answer waits for the compilation (tens of seconds), and decoding goes on "
            "eagerly where compiling fails",
        },
    )
    change: ChangeConfig = field(default_factory=ChangeConfig)

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.chunk_size < 1:
            raise ValueError(f"chunk_size must be >= 1, got {self.chunk_size}")
