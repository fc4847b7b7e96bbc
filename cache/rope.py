"""Re-rotation of cached keys: moves a key stored at RoPE position p to position p + delta.

Keys are cached after RoPE. Rotating by delta multiplies each frequency pair by the rotation of angle
delta * inv_freq, which is the same for RoPE and for M-RoPE when all of a token's components move by
the same delta (what `compact_positions` produces).
"""

from __future__ import annotations

import torch


class KeyRotator:
    """Rotates keys in the rotate_half layout used by Llama, Qwen2 and Qwen2-VL style models."""

    def __init__(self, inv_freq: torch.Tensor) -> None:
        self.inv_freq = inv_freq.detach().float()  # [D/2]

    @classmethod
    def from_model(cls, model: torch.nn.Module) -> KeyRotator:
        """Finds the text decoder's rotary embedding (`rotary_emb.inv_freq`) of a transformers model."""
        decoder = model.get_decoder() if hasattr(model, "get_decoder") else model
        rotary = getattr(decoder, "rotary_emb", None)
        if rotary is None or not hasattr(rotary, "inv_freq"):
            raise ValueError(
                f"{type(model).__name__}: no rotary embedding found on its text decoder; "
                "use positions='original' for this model"
            )
        rope_type = getattr(rotary, "rope_type", "default")
        if rope_type not in ("default", "linear", "llama3", "yarn", "longrope"):
            raise ValueError(
                f"rope type {rope_type!r} changes its frequencies with length; "
                "re-rotation is not supported, use positions='original'"
            )
        return cls(rotary.inv_freq)

    def rotate(self, keys: torch.Tensor, delta: torch.Tensor) -> torch.Tensor:
        """keys: [B, H_kv, N, D]; delta: [B, H_kv, N] (positions to move by). Returns rotated keys."""
        head_dim, rotary = keys.shape[-1], self.inv_freq.numel() * 2
        if rotary > head_dim:
            raise ValueError(f"rotary size {rotary} > head dim {head_dim}")
        angle = delta.float()[..., None] * self.inv_freq.to(keys.device)  # [B, H_kv, N, R/2]
        cos, sin = angle.cos(), angle.sin()
        half = rotary // 2
        k = keys[..., :rotary].float()
        first, second = k[..., :half], k[..., half:]
        # rotate_half layout: dimension i pairs with i + R/2; partial RoPE (R < D, e.g. Qwen3.5's quarter) rotates
        # the leading R dimensions, as transformers' apply_rotary_pos_emb does, and leaves the rest as they are
        turned = torch.cat([first * cos - second * sin, second * cos + first * sin], dim=-1).to(keys.dtype)
        return turned if rotary == head_dim else torch.cat([turned, keys[..., rotary:]], dim=-1)
