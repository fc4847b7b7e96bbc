"""The buffers of several streams' static caches as rows of shared tensors, so one decode step reads them batched.

Every stream keeps its own `BoundedCache` (its own length, positions, eviction and store). The pool only
changes where each `StaticBoundedLayer` keeps its tokens: stream i's layer l uses row i of the pool's
tensors as its buffers (`StaticBoundedLayer.share`), so prefill, eviction, recall and its own decode steps
go on writing in place, and a batched step (`cache.batch_decode`) reads layer l of all streams as one
[N, H_kv, span, D] tensor: no copy of any stream's keys per step. A hybrid model's linear-attention states are
not shared but copied into rows of their own around each batched step (`cache.batch_states`).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from cache.batch_states import StackedStates
from cache.bounded_cache import BoundedCache
from cache.static_layer import StaticBoundedLayer, static_address

FIELDS = ("keys", "values", "positions", "origin", "token_index", "attention")


class BatchPool:
    """The static layers of N caches as rows of shared tensors (row i: cache i).

    keys/values: one tensor per layer, `layer_tensors[name][l]` [N, H_kv, C + 1, D] (the model's dtype), so
    that no two tensors a decode step writes share memory (torch.compile copies whole buffers that alias one
    another). The bookkeeping, one tensor per field for all layers: positions/origin [L, N, H_kv, C + 1, P]
    int64; token_index [L, N, H_kv, C + 1] int64; attention [L, N, H_kv, C + 1] float32. Cache i's layer l
    holds row i of them, its first C slots; the last slot, outside every cache's buffers, is scratch that a row
    sitting out a batched step writes its throwaway key and value to. `like` is a cache whose first layer
    holds tokens: the head count, head size, position components, dtype and device are read from it.
    `states`: the rows of a hybrid model's linear-attention states (empty on other models).
    """

    def __init__(self, caches: Sequence[BoundedCache], capacity: int, like: BoundedCache) -> None:
        self.caches = list(caches)
        self.capacity = capacity
        self.scratch = capacity  # the slot no cache's buffers include
        layer = like.kv_layers[0]
        if not isinstance(layer, StaticBoundedLayer) or not layer.is_initialized:
            raise ValueError("the pool's shapes come from a static cache that holds tokens")
        layers, rows = len(like.kv_layers), len(self.caches)
        self.num_layers = layers
        heads, dim = layer.keys.shape[1], layer.keys.shape[3]
        parts = layer.positions.shape[3]
        device = layer.keys.device
        lead = (layers, rows, heads, capacity + 1)
        kv_shape = (*lead[1:], dim)
        self.layer_tensors = {
            name: [static_address(torch.zeros(kv_shape, dtype=layer.keys.dtype, device=device)) for _ in range(layers)]
            for name in ("keys", "values")
        }
        self.tensors = {
            "positions": torch.zeros(*lead, parts, dtype=torch.long, device=device),
            "origin": torch.zeros(*lead, parts, dtype=torch.long, device=device),
            "token_index": torch.zeros(*lead, dtype=torch.long, device=device),
            "attention": torch.zeros(*lead, dtype=torch.float32, device=device),
        }
        self._views = [[self._row_views(index, row) for index in range(layers)] for row in range(rows)]
        self.states = StackedStates(self.caches, like)

    def _row_views(self, layer: int, row: int) -> dict[str, torch.Tensor]:
        views = {name: t[layer][row : row + 1, :, : self.capacity] for name, t in self.layer_tensors.items()}
        views.update({name: t[layer, row : row + 1, :, : self.capacity] for name, t in self.tensors.items()})
        return views

    def fits(self, cache: BoundedCache) -> bool:
        """Whether `cache`'s layers can live in a row: static layers of the pool's shapes, holding tokens (and,
        on a hybrid model, linear-attention states of the rows' shapes)."""
        layers = cache.kv_layers
        if len(layers) != self.num_layers or not all(isinstance(layer, StaticBoundedLayer) for layer in layers):
            return False
        first, keys = layers[0], self.layer_tensors["keys"][0]
        return (
            first.is_initialized
            and first.length <= self.capacity
            and first.keys.shape[1] == keys.shape[1]
            and first.keys.shape[3] == keys.shape[3]
            and first.keys.dtype == keys.dtype
            and first.keys.device == keys.device
            and first.positions.shape[3] == self.tensors["positions"].shape[4]
            and self.states.fits(cache)
        )

    def adopt(self, row: int) -> None:
        """Makes row `row` cache `row`'s buffers, copying its tokens in where they live elsewhere (the first
        time, or after a long prompt grew its buffers); a few identity checks when they are already there."""
        for layer, views in zip(self.caches[row].kv_layers, self._views[row], strict=True):
            layer.share(views)

    def layer(self, index: int, start: int, stop: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values of layer `index` for rows [start, stop): [n, H_kv, C + 1, D] views, marked static like
        the tensors they view (a view is a tensor of its own: unmarked, a compiled step that writes it skips CUDA
        graphs, as check_gpu.py saw on an H200)."""
        keys, values = self.layer_tensors["keys"][index], self.layer_tensors["values"][index]
        return static_address(keys[start:stop]), static_address(values[start:stop])

    def bytes(self) -> int:
        """Bytes the pool holds (every field, every row, scratch slots and linear-attention state rows included)."""
        tensors = [*self.tensors.values(), *self.layer_tensors["keys"], *self.layer_tensors["values"]]
        return sum(t.numel() * t.element_size() for t in tensors) + self.states.bytes()
