"""The attention implementation the bounded cache registers with transformers.

`bounded_sdpa` computes attention exactly as transformers' SDPA does and, only while a `BoundedCache` is
recording (see `BoundedCache.recording`), also hands each layer's queries and keys to that cache so it
can score the cached tokens. Decode steps outside a recording pay nothing extra. The vision towers of
VLMs keep plain `sdpa`.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Protocol

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from cache.cpu.kernels import fits, kernels_ready

ATTENTION_NAME = "bounded_sdpa"


class AttentionObserver(Protocol):
    def observe(self, layer_idx: int, query: torch.Tensor, key: torch.Tensor, scaling: float) -> None: ...


ACTIVE_OBSERVER: ContextVar[AttentionObserver | None] = ContextVar("bounded_cache_observer", default=None)


def bounded_sdpa_attention(
    module: torch.nn.Module,
    query: torch.Tensor,  # [B, H_q, T, D]
    key: torch.Tensor,  # [B, H_kv, N, D], cached + new tokens
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """SDPA attention; reports queries and keys to the recording cache, if any."""
    # one new token; transformers passes no mask where causality alone decides (then it sees every key)
    if query.shape[2] == 1 and (attention_mask is None or attention_mask.dtype == torch.bool):
        output = (one_query_attention(query, key, value, attention_mask, scaling or module.scaling), None)
    else:
        output = sdpa_attention_forward(module, query, key, value, attention_mask, scaling=scaling, **kwargs)
    # compiled decode steps never record (cache.decode.StaticDecoder), and dynamo cannot trace ContextVar.get
    observer = None if torch.compiler.is_compiling() else ACTIVE_OBSERVER.get()
    if observer is not None:
        scale = scaling if scaling is not None else module.scaling
        observer.observe(module.layer_idx, query, key, scale)
    return output


def one_query_attention(
    query: torch.Tensor,  # [B, H_q, 1, D]
    key: torch.Tensor,  # [B, H_kv, N, D]
    value: torch.Tensor,  # [B, H_kv, N, D]
    mask: torch.Tensor | None,  # [B or 1, 1, 1, N] bool, True = attend; None: every key
    scaling: float,
) -> torch.Tensor:
    """Attention of one new token (a decode step over a masked span of slots): [B, 1, H_q, D].

    The query heads that share a KV head become that head's query rows, so each key and value is read once
    (transformers' SDPA path repeats the KV heads whenever a mask is given). On an AVX2 CPU in fp32 the
    kernel of `cache.cpu.kernels` does it, about twice as fast as SDPA there. A [B, 1, 1, N] mask gives each
    batch row its own keys (several streams decoded together, `cache.batch_decode`); the kernel takes it too.
    """
    batch, tokens = key.shape[0], key.shape[2]
    if (mask is None or mask.numel() in (tokens, batch * tokens)) and kernel_takes(query, key, value):
        attended = None if mask is None else mask.reshape(-1)
        return torch.ops.edge_assistant.decode_attention(query, key, value, attended, scaling)
    q_heads, dim = query.shape[1], query.shape[3]
    kv_heads = key.shape[1]
    rows = query.reshape(batch, kv_heads, q_heads // kv_heads, dim)  # head h -> KV head h // group, as repeat_kv
    out = torch.nn.functional.scaled_dot_product_attention(rows, key, value, attn_mask=mask, scale=scaling)
    return out.reshape(batch, q_heads, 1, dim).transpose(1, 2).contiguous()


def kernel_takes(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> bool:
    """Whether `cache.cpu.kernels`' attention runs for these tensors (fp32 on the CPU, rows contiguous)."""
    return fits(query, key, value) and key.stride(-1) == 1 and value.stride(-1) == 1 and kernels_ready()


def register_attention() -> str:
    """Registers `bounded_sdpa` (attention and its mask function); returns the name. Idempotent."""
    AttentionInterface.register(ATTENTION_NAME, bounded_sdpa_attention)
    # Without a mask function the model passes attention_mask=None, and SDPA's causal flag then aligns to
    # the wrong corner when a prompt is prefilled onto a non-empty cache.
    AttentionMaskInterface.register(ATTENTION_NAME, sdpa_mask)
    return ATTENTION_NAME


def attention_probs(
    query: torch.Tensor,  # [B, H_q, R, D]: rows [start, start + R) of a forward of T new tokens
    key: torch.Tensor,  # [B, H_kv, N, D]: the cache after this forward (its last T keys are the new tokens)
    new_tokens: int,  # T
    start: int,
    scaling: float,
) -> torch.Tensor:
    """Causal softmax attention of the given query rows over all keys, in fp32: [B, H_q, R, N].

    One stream (batch 1, no padding): the mask is the causal one, so only the last T - start key columns
    need masking; every older key is visible to every new row.
    """
    batch, q_heads, rows, dim = query.shape
    kv_heads, n = key.shape[1], key.shape[2]
    q = query.float().reshape(batch, kv_heads, (q_heads // kv_heads) * rows, dim)
    logits = torch.matmul(q, key.float().transpose(-1, -2)).mul_(scaling)  # [B, H_kv, G * R, N]
    logits = logits.view(batch, q_heads, rows, n)
    cut = n - new_tokens + start  # first key column that some of these rows may not see
    row_pos = torch.arange(rows, device=key.device)[:, None]
    hidden = torch.arange(n - cut, device=key.device)[None, :] > row_pos  # key after the row's own token
    logits[..., cut:].masked_fill_(hidden, float("-inf"))
    return torch.softmax(logits, dim=-1)
