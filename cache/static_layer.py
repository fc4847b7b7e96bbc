"""A bounded-cache layer stored in preallocated buffers, so that a decode step has static shapes.

Every per-token tensor of a `BoundedLayer` (keys, values, positions, origin, token_index, attention) lives
in one buffer per layer of `capacity` tokens (vAttention's contiguous layout); the cached tokens are the
buffer's prefix `[0, length)`. Reading `layer.keys` gives a view of that prefix, so the cache, the policies,
re-rotation and recall read and assign the attributes exactly as they do on a `BoundedLayer`; assigning
copies into the buffer (eviction is an in-place compaction) and only reallocates when the tokens outgrow it.

A decode step (see `cache.decode.StaticDecoder`) claims the next slot before the forward; the model then
writes the new key and value into that slot with `index_copy_` and attends to a fixed `span` of slots,
the slots not filled yet hidden by the attention mask. Nothing changes shape from one step to the next,
which is what `torch.compile` (and CUDA graphs) need.
"""

from __future__ import annotations

import torch

from cache.layer import BoundedLayer

_FIELDS = ("keys", "values", "positions", "origin", "token_index", "attention")
_GROW = 256  # capacities are multiples of this many tokens


def _slots_buffer(like: torch.Tensor, capacity: int) -> torch.Tensor:
    """Zeros [B, H, capacity, ...] shaped as `like` (zeros, not empty: masked slots are multiplied by 0 in attention,
    NaN would leak), the first `capacity` slots of one more: laid out as a stream's row of a batch pool, whose last
    slot is scratch (`cache.batch_pool`), so a compiled decode step traced on these buffers also runs on a pooled
    cache's (a stream decoding alone after batched steps) without being traced again."""
    shape = (*like.shape[:2], capacity + 1, *like.shape[3:])
    return torch.zeros(shape, dtype=like.dtype, device=like.device)[:, :, :capacity]


def static_address(buffer: torch.Tensor) -> torch.Tensor:
    """Marks a CUDA buffer that compiled steps write in place as living at a fixed address, without which
    torch.compile skips CUDA graphs for a step that mutates its inputs (transformers' StaticCache does the same).
    A view is a tensor of its own and needs its own mark. Checked on an H200 (scripts/check_gpu.py: no CUDA graph
    skipped); a no-op on the CPU, where there are no CUDA graphs."""
    if buffer.is_cuda:
        torch._dynamo.mark_static_address(buffer)
    return buffer


def _field_property(name: str) -> property:
    def get(self: StaticBoundedLayer) -> torch.Tensor | None:
        buffer = self._buffers[name]
        return None if buffer is None else buffer[:, :, : self._lengths[name]]

    def set(self: StaticBoundedLayer, value: torch.Tensor | None) -> None:
        self._assign(name, value)

    return property(get, set, doc=f"{name} of the cached tokens: a view of the buffer's first tokens")


class StaticBoundedLayer(BoundedLayer):
    """A `BoundedLayer` whose per-token tensors are prefixes of preallocated buffers (token axis: dim 2).

    capacity: tokens the buffers hold before they must grow (0: sized by the first tokens added).
    `step`: set by `StaticDecoder` while it decodes: (slot [1] int64, span) means "write the new token at
    `slot` and attend to the first `span` slots", and `update` then leaves the bookkeeping to `claim_slot`.
    """

    keys = _field_property("keys")
    values = _field_property("values")
    positions = _field_property("positions")
    origin = _field_property("origin")
    token_index = _field_property("token_index")
    attention = _field_property("attention")

    def __init__(self, capacity: int = 0) -> None:
        self._buffers: dict[str, torch.Tensor | None] = dict.fromkeys(_FIELDS)
        self._lengths: dict[str, int] = dict.fromkeys(_FIELDS, 0)
        self.capacity = capacity
        self.step: tuple[torch.Tensor, int] | None = None
        super().__init__()

    # -- storage ----------------------------------------------------------------------------------

    @property
    def length(self) -> int:
        """Cached tokens (the keys' prefix)."""
        return self._lengths["keys"]

    @torch.inference_mode()  # callers may evict outside inference mode; the buffers are inference tensors
    def _assign(self, name: str, value: torch.Tensor | None) -> None:
        """Makes `value` the prefix of buffer `name`: a view of that prefix only moves the end, anything
        else is copied in (in place unless it no longer fits)."""
        buffer = self._buffers[name]
        if value is None:
            self._lengths[name] = 0
            return
        count = value.shape[2]
        if buffer is not None and _is_prefix_of(value, buffer):
            self._lengths[name] = count
            return
        if buffer is not None and value.untyped_storage().data_ptr() == buffer.untyped_storage().data_ptr():
            value = value.clone()  # another part of the same buffer: never copy overlapping memory
        buffer = self._ensure(name, value, count)
        buffer[:, :, :count].copy_(value)
        self._lengths[name] = count

    def _ensure(self, name: str, like: torch.Tensor, count: int) -> torch.Tensor:
        """Buffer `name`, (re)allocated when missing, of another shape, dtype or device, or too small for `count`."""
        buffer = self._buffers[name]
        fits = (
            buffer is not None
            and buffer.dtype == like.dtype
            and buffer.device == like.device
            and buffer.shape[:2] == like.shape[:2]
            and buffer.shape[3:] == like.shape[3:]
        )
        if fits and buffer.shape[2] >= count:
            return buffer
        capacity = max(self.capacity, count, buffer.shape[2] * 3 // 2 if fits else 0)
        self.capacity = -(-capacity // _GROW) * _GROW
        grown = _slots_buffer(like, self.capacity)
        if fits:
            kept = self._lengths[name]
            grown[:, :, :kept].copy_(buffer[:, :, :kept])
        self._buffers[name] = static_address(grown)
        return grown

    @torch.inference_mode()
    def resize(self, capacity: int) -> None:
        """Reallocates every buffer to exactly `capacity` tokens (at least the cached ones). A decoder keeps one
        capacity, so a compiled step never sees other shapes, and a long prompt's growth is given back."""
        for name in _FIELDS:
            buffer = self._buffers[name]
            if buffer is None or buffer.shape[2] == capacity:
                continue
            count = self._lengths[name]
            if count > capacity:
                raise ValueError(f"{count} cached tokens do not fit in {capacity}")
            resized = _slots_buffer(buffer, capacity)
            resized[:, :, :count].copy_(buffer[:, :, :count])
            self._buffers[name] = static_address(resized)
        self.capacity = capacity

    @torch.inference_mode()
    def _append(self, name: str, value: torch.Tensor) -> None:
        # value: [B, H, T, ...] appended after the prefix, in place
        start = self._lengths[name]
        buffer = self._buffers[name]
        if buffer is None:
            self._assign(name, value)
            return
        buffer = self._ensure(name, value, start + value.shape[2])
        buffer[:, :, start : start + value.shape[2]].copy_(value)
        self._lengths[name] = start + value.shape[2]

    @torch.inference_mode()
    def share(self, buffers: dict[str, torch.Tensor]) -> None:
        """Makes `buffers` (one per field, [B, H, capacity, ...], e.g. this stream's row of a batch pool, see
        `cache.batch_pool`) this layer's buffers, copying the cached tokens in; a no-op when they already are.
        Later steps write into them in place until the tokens outgrow them or `resize` asks for another size."""
        if self.shares(buffers):
            return
        if self.length > buffers["keys"].shape[2]:
            raise ValueError(f"{self.length} cached tokens do not fit in {buffers['keys'].shape[2]}")
        for name in _FIELDS:
            count = self._lengths[name]
            old = self._buffers[name]
            if old is not None and count:
                buffers[name][:, :, :count].copy_(old[:, :, :count])
            self._buffers[name] = static_address(buffers[name])
        self.capacity = buffers["keys"].shape[2]

    def shares(self, buffers: dict[str, torch.Tensor]) -> bool:
        """Whether `buffers` are this layer's buffers (the very tensors)."""
        return all(self._buffers[name] is buffers[name] for name in _FIELDS)

    def set_length(self, count: int) -> None:
        """Marks the first `count` slots as the cached tokens, for a caller that wrote every field of the slots
        it adds itself (a batched decode step writes all streams' slots at once, `cache.batch_decode`)."""
        for name in _FIELDS:
            self._lengths[name] = count

    # -- the transformers Cache layer interface ---------------------------------------------------

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        self.dtype, self.device = key_states.dtype, key_states.device
        self.is_initialized = True

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        """Adds the new tokens' keys/values ([B, H_kv, T, D]); returns what attention reads: the cached
        tokens, or during a static decode step the whole span of slots (unfilled ones are masked)."""
        if self.step is not None:
            slot, span = self.step
            self._buffers["keys"].index_copy_(2, slot, key_states)
            self._buffers["values"].index_copy_(2, slot, value_states)
            return self._buffers["keys"][:, :, :span], self._buffers["values"][:, :, :span]
        if self.staged_positions is None:
            raise RuntimeError("positions of the new tokens were not staged (BoundedCache.stage_positions)")
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        batch, heads, new = key_states.shape[:3]
        if self.staged_positions.shape[2] != new:
            raise RuntimeError(f"staged positions for {self.staged_positions.shape[2]} tokens, model added {new}")
        self._append("keys", key_states)
        self._append("values", value_states)
        self._append_bookkeeping(batch, heads, new)
        return self.keys, self.values

    def _append_bookkeeping(self, batch: int, heads: int, new: int) -> None:
        device = self._buffers["keys"].device
        self._append("positions", self.staged_positions.expand(batch, heads, new, -1))
        self._append("origin", self.staged_origin.expand(batch, heads, new, -1))
        self._append("token_index", self.staged_index.expand(batch, heads, new))
        self._append("attention", torch.zeros(batch, heads, new, dtype=torch.float32, device=device))

    def claim_slot(self) -> int:
        """Before a static decode step: records the staged token's positions and makes room for its key and
        value, which the forward writes into the returned slot. The buffers must hold one more token."""
        slot = self.length
        buffers = self._buffers
        if slot >= buffers["keys"].shape[2]:
            raise RuntimeError(f"no free slot: the buffers hold {slot} tokens (resize them first)")
        # the hot path of every decode step: written in place, no tensor allocated
        buffers["positions"][:, :, slot] = self.staged_positions[:, :, 0]
        buffers["origin"][:, :, slot] = self.staged_origin[:, :, 0]
        buffers["token_index"][:, :, slot] = self.staged_index[:, :, 0]
        buffers["attention"][:, :, slot] = 0.0
        for name in _FIELDS:
            self._lengths[name] = slot + 1
        return slot

    def get_seq_length(self) -> int:
        return self.length

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.length + query_length, 0

    def reset(self) -> None:
        for name in _FIELDS:
            self._lengths[name] = 0
        self.step = None
        self.staged_positions = self.staged_origin = self.staged_index = None
        self.is_initialized = False

    def crop(self, max_length: int) -> None:
        if max_length < 0:
            max_length = self.length - abs(max_length)
        for name in _FIELDS:
            self._lengths[name] = min(self._lengths[name], max(max_length, 0))

    def reserved_bytes(self) -> int:
        """Bytes allocated for keys and values (the whole buffers, not only the cached tokens)."""
        return sum(
            b.numel() * b.element_size() for b in (self._buffers["keys"], self._buffers["values"]) if b is not None
        )


def _is_prefix_of(view: torch.Tensor, buffer: torch.Tensor) -> bool:
    """Whether `view` is `buffer[:, :, :n]` for some n (same memory, same strides, same start)."""
    return (
        view.data_ptr() == buffer.data_ptr()
        and view.stride() == buffer.stride()
        and view.shape[:2] == buffer.shape[:2]
        and view.shape[3:] == buffer.shape[3:]
        and view.shape[2] <= buffer.shape[2]
    )
