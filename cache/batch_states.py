"""The linear-attention states of several streams, stacked for a batched decode step (hybrid models: Qwen3.5).

A Gated DeltaNet layer's memory is, per stream, a convolution state [1, C, K] (the model's dtype) and a recurrent
state [1, H, Dk, Dv] (float32), which the model updates in place at every forward. A batched step hands the model
one `Cache` whose layer l serves every row, so:
```
before the step   each active stream's states are copied into its row of [N, C, K] and [N, H, Dk, Dv] tensors
the forward       updates rows [start, stop) of them in place (`causal_conv1d_update`, `update_recurrent_state`)
after the step    each active row is copied back into its stream's own state tensors
```
Rows sitting the step out are copied neither in nor back: what the forward does to their rows is overwritten the
next time they take part. The streams' own tensors are never shared with the rows, so prefill, probes
(`save_states` / `restore_states`), `fork` and `reset` treat them as they treat a lone stream's. The price is a
copy per step: each active stream's states read and written twice more (docs/models.md costs it on Qwen3.5-2B).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from transformers.cache_utils import LinearAttentionLayer

from cache.bounded_cache import BoundedCache
from cache.static_layer import static_address


class RowsStates(LinearAttentionLayer):
    """What the model sees of one linear-attention layer during a batched step: rows [start, stop) of the stacked
    states, continuing from them (`has_previous_state`) and updated in place."""

    def __init__(self, conv: torch.Tensor, recurrent: torch.Tensor) -> None:
        super().__init__()
        self.conv_states[0], self.recurrent_states[0] = conv, recurrent  # [n, C, K], [n, H, Dk, Dv]
        self.is_conv_states_initialized[0] = self.is_recurrent_states_initialized[0] = True
        self.has_previous_state[0] = True
        self.conv_kernel_size[0] = conv.shape[-1]
        self.dtype, self.device = conv.dtype, conv.device


def states_ready(cache: BoundedCache) -> bool:
    """Whether `cache`'s linear-attention layers (if any) can take part in a batched step: one state each (conv and
    recurrent), both there and continuing from an earlier forward. True for a cache with no such layers."""
    return all(
        layer.number_of_states == 1
        and layer.has_previous_state[0]
        and layer.conv_states[0] is not None
        and layer.recurrent_states[0] is not None
        for layer in cache.state_layers
    )


class StackedStates:
    """The linear-attention states of N caches as rows of one tensor per layer and kind (row i: cache i), copied in
    before a batched step (`load`) and back after it (`store`). `like`: a cache whose states are there (shapes,
    dtypes and device are read from it). Empty (no tensors, nothing copied) on a model without such layers."""

    def __init__(self, caches: Sequence[BoundedCache], like: BoundedCache) -> None:
        self.caches = list(caches)
        rows = len(self.caches)
        layers = like.state_layers
        if layers and not states_ready(like):
            raise ValueError("the stacked states' shapes come from a cache whose linear-attention states are there")
        self.conv = [_rows_like(layer.conv_states[0], rows) for layer in layers]  # each [N, C, K]
        self.recurrent = [_rows_like(layer.recurrent_states[0], rows) for layer in layers]  # each [N, H, Dk, Dv]

    def fits(self, cache: BoundedCache) -> bool:
        """Whether `cache`'s states can go in a row: as many layers, each ready and of the rows' shapes."""
        layers = cache.state_layers
        if len(layers) != len(self.conv) or not states_ready(cache):
            return False
        return all(
            _same_kind(layer.conv_states[0], conv) and _same_kind(layer.recurrent_states[0], recurrent)
            for layer, conv, recurrent in zip(layers, self.conv, self.recurrent, strict=True)
        )

    @torch.inference_mode()
    def load(self, rows: Sequence[int]) -> None:
        """Copies each of `rows`' caches' states into its row."""
        for row in rows:
            for layer, conv, recurrent in zip(self.caches[row].state_layers, self.conv, self.recurrent, strict=True):
                conv[row].copy_(layer.conv_states[0][0])
                recurrent[row].copy_(layer.recurrent_states[0][0])

    @torch.inference_mode()
    def store(self, rows: Sequence[int]) -> None:
        """Copies each of `rows`' rows back into its cache's own states (in place: their addresses stay)."""
        for row in rows:
            for layer, conv, recurrent in zip(self.caches[row].state_layers, self.conv, self.recurrent, strict=True):
                layer.conv_states[0][0].copy_(conv[row])
                layer.recurrent_states[0][0].copy_(recurrent[row])

    def layer(self, index: int, start: int, stop: int) -> RowsStates:
        """Linear-attention layer `index` (counting those layers only) for rows [start, stop), marked static like
        the tensors its views view (see `BatchPool.layer`)."""
        conv, recurrent = self.conv[index][start:stop], self.recurrent[index][start:stop]
        return RowsStates(static_address(conv), static_address(recurrent))

    def bytes(self) -> int:
        """Bytes the rows hold (every layer, every row)."""
        return sum(t.numel() * t.element_size() for t in (*self.conv, *self.recurrent))


def _rows_like(state: torch.Tensor, rows: int) -> torch.Tensor:
    return static_address(torch.zeros((rows, *state.shape[1:]), dtype=state.dtype, device=state.device))


def _same_kind(state: torch.Tensor, rows: torch.Tensor) -> bool:
    return (
        state.shape[0] == 1
        and state.shape[1:] == rows.shape[1:]
        and state.dtype == rows.dtype
        and state.device == rows.device
    )
