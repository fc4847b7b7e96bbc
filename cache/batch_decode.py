"""One decode step for several streams at once: the weights are read once per step for all of them.

Each stream keeps its own `BoundedCache` and `CachedRunner`; `BatchDecoder.step(tokens)` feeds token i to
stream i and returns each stream's next logits, exactly as `runner.decode_step` would (greedy answers are
token for token those of each stream alone, up to the float rounding of batched products):
```
pool rows    cache i's static buffers live in row i of [L, N, H_kv, C + 1, D] pool tensors (cache.batch_pool)
one forward  input_ids [n, 1], position_ids [n, 1] or [P, n, 1]; layer l writes row i's key at row i's slot
             and attends over [n, H_kv, span, D] with a per-row mask [n, 1, 1, span] (own length, own tokens)
hybrid       a linear-attention layer continues from row i of [n, ...] states: each active stream's states are
             copied in before the forward and back after it (cache.batch_states)
```
A stream whose cache cannot take the static path (`full`, `h2o`, dynamic storage: see
`StaticDecoder.can_step`) decodes through its runner, one after another, in the same call: still correct,
only not batched. Rows given no token (finished answers) sit the step out: inside the batched range they
write to the pool's scratch slot and attend to one slot, and their caches (linear-attention states included)
do not change.

The step is compiled (torch.compile; CUDA graphs on CUDA) when the runners' own steps are
(`compile_decode`): every input lives in a tensor filled in place and each range of rows keeps its own
layer objects, so a range is traced once and replayed; a compiled step that fails falls back to eager.
`BoundedCache.fork` of a pooled cache deep-copies the whole pool storage: fork before pooling.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import torch
from transformers import Cache
from transformers.cache_utils import CacheLayerMixin

from cache.batch_pool import BatchPool
from cache.batch_states import states_ready
from cache.bounded_cache import is_state_layer
from cache.decode import COMPILE_ERRORS, compile_decode, decode_forward
from cache.runner import CachedRunner
from cache.static_layer import static_address

logger = logging.getLogger(__name__)


class _RowsLayer(CacheLayerMixin):
    """What the model sees of one layer during a batched step: rows [start, stop) of the pool."""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, flat_slots: torch.Tensor, span: int) -> None:
        super().__init__()
        self.keys, self.values = keys, values  # [n, H_kv, C + 1, D]
        self.flat_slots = flat_slots  # [n * H_kv] int64: row i head h's slot in keys.view(-1, D)
        self.span = span
        self.is_initialized = True

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        return None

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        """Writes each row's new key/value ([n, H_kv, 1, D]) into its own slot; returns the span of every row."""
        dim = self.keys.shape[-1]
        self.keys.view(-1, dim).index_copy_(0, self.flat_slots, key_states.reshape(-1, dim))
        self.values.view(-1, dim).index_copy_(0, self.flat_slots, value_states.reshape(-1, dim))
        return self.keys[:, :, : self.span], self.values[:, :, : self.span]

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.span, 0

    def get_seq_length(self) -> int:
        return self.span - 1

    def get_max_length(self) -> int:
        return self.span


class BatchDecoder:
    """Decode steps of several streams' runners as one batched forward (see the module docstring).

    runners: one per stream, all on the same model. The pool is made at the first batched step (the caches
    must hold tokens by then) with the largest of the runners' decode capacities; `pool` is None before.
    """

    def __init__(self, runners: Sequence[CachedRunner]) -> None:
        if not runners:
            raise ValueError("no runners to decode")
        model = runners[0].model
        if any(r.model is not model for r in runners) or len({r.position_dims for r in runners}) != 1:
            raise ValueError("a batched step needs every runner on the same model")
        self.runners = list(runners)
        self.model = model
        self.device = runners[0].device
        self.position_dims = runners[0].position_dims
        self.span = max(r.decoder.span for r in runners)
        self.capacity = max(r.decoder.capacity for r in runners)
        self.pool: BatchPool | None = None
        # the model's layers in order: (is a linear-attention layer, its index among the layers of its kind)
        kinds = [is_state_layer(layer) for layer in runners[0].cache.layers]
        self._layout = [(state, kinds[:i].count(state)) for i, state in enumerate(kinds)]
        rows = len(runners)
        self.input_ids = torch.zeros(rows, 1, dtype=torch.long, device=self.device)
        self.positions = torch.zeros(rows, dtype=torch.long, device=self.device)
        self.slots = torch.zeros(rows, dtype=torch.long, device=self.device)
        self.mask = torch.zeros(rows, 1, 1, self.span, dtype=torch.bool, device=self.device)
        self._slots = torch.arange(self.span, device=self.device)
        self._ranges: dict[tuple[int, int], tuple[Cache, torch.Tensor]] = {}  # (start, stop) -> layers, flat slots
        self._compiled = compile_decode(batched_forward, self.device) if runners[0].decoder.compiled else None
        self.batched_steps = 0  # forwards that decoded two or more rows together (for tests and logs)

    @property
    def compiled(self) -> bool:
        return self._compiled is not None

    def batchable(self, row: int) -> bool:
        """Whether row `row`'s next token can go through the batched static step (on a hybrid model, once its
        linear-attention states continue from a forward)."""
        runner = self.runners[row]
        return runner.decoder.can_step() and runner.cache.kv_layers[0].length < self.span and states_ready(runner.cache)

    @torch.inference_mode()
    def step(self, tokens: Sequence[int | None]) -> list[torch.Tensor | None]:
        """Feeds `tokens[i]` to stream i (None: it sits this step out); returns its next logits [1, vocab] (None
        for rows given no token). Rows that can take the static path go in one forward, the others alone."""
        if len(tokens) != len(self.runners):
            raise ValueError(f"{len(tokens)} tokens for {len(self.runners)} streams")
        given = [i for i, t in enumerate(tokens) if t is not None]
        together = [i for i in given if self.batchable(i)]
        if len(together) < 2:  # one row alone is what its runner does anyway
            together = []
        logits: list[torch.Tensor | None] = [None] * len(tokens)
        if together:
            for row, row_logits in zip(together, self._batched(together, tokens), strict=True):
                logits[row] = row_logits
        for row in given:
            if row not in together:
                logits[row] = self.runners[row].decode_step(tokens[row])
        return logits

    def _ensure_pool(self, rows: list[int]) -> BatchPool:
        caches = [r.cache for r in self.runners]
        if self.pool is None:
            self.pool = BatchPool(caches, self.capacity, like=caches[rows[0]])
            logger.info("batch pool of %d streams: %.1f MB", len(caches), self.pool.bytes() / 2**20)
        for row in rows:
            if not self.pool.fits(caches[row]):
                raise ValueError(f"stream {row}'s cache does not fit the batch pool (another model or shape)")
            self.pool.adopt(row)
        return self.pool

    def _batched(self, rows: list[int], tokens: Sequence[int | None]) -> list[torch.Tensor]:
        pool = self._ensure_pool(rows)
        start, stop = rows[0], rows[-1] + 1
        active = set(rows)
        ids, positions, slots, seen = [], [], [], []
        origins, indices = [], []
        for row in range(start, stop):
            if row in active:
                cache = self.runners[row].cache
                slot, position = cache.kv_layers[0].length, cache.next_position
                origin, index = cache.count_decoded(position)
                ids.append(tokens[row])
                positions.append(position)
                slots.append(slot)
                seen.append(slot + 1)
                origins.append(origin)
                indices.append(index)
            else:  # sits out: writes to scratch, attends to slot 0 (whatever it holds), its cache untouched
                ids.append(0)
                positions.append(0)
                slots.append(pool.scratch)
                seen.append(1)
        count = stop - start
        self._write_bookkeeping(pool, rows, [slots[r - start] for r in rows], positions, origins, indices, start)
        for row in rows:
            for layer in self.runners[row].cache.kv_layers:
                layer.set_length(slots[row - start] + 1)
        self.input_ids[:count, 0].copy_(torch.tensor(ids))
        self.positions[:count].copy_(torch.tensor(positions))
        self.slots[:count].copy_(torch.tensor(slots))
        seen_slots = torch.tensor(seen, device=self.device)[:, None]
        torch.lt(self._slots[None], seen_slots, out=self.mask[:count].view(count, -1))  # row i: slots [0, seen_i)
        pool.states.load(rows)  # a hybrid's linear-attention states, into their rows (nothing elsewhere)
        out = self._forward(pool, start, stop)  # [n, vocab]
        pool.states.store(rows)
        self.batched_steps += 1
        results = []
        for row in rows:
            results.append(out[row - start : row - start + 1])
            self.runners[row].keep_headroom()
        return results

    def _write_bookkeeping(self, pool, rows, slots, positions, origins, indices, start) -> None:
        """Positions, origin, token index and zero attention of every active row's new slot, all layers at once."""
        device = self.device
        row_index = torch.tensor(rows, device=device)
        slot_index = torch.tensor(slots, device=device)
        parts = pool.tensors["positions"].shape[-1]
        pos = torch.tensor([positions[r - start] for r in rows], device=device)[:, None, None, None]
        origin = torch.tensor(origins, device=device)[:, None, None, None]
        where = (slice(None), row_index, slice(None), slot_index)  # -> [k, L, H_kv, ...]
        pool.tensors["positions"][where] = pos.expand(-1, -1, -1, parts)
        pool.tensors["origin"][where] = origin.expand(-1, -1, -1, parts)
        pool.tensors["token_index"][where] = torch.tensor(indices, device=device)[:, None, None]
        pool.tensors["attention"][where] = 0.0

    def _rows_cache(self, pool: BatchPool, start: int, stop: int) -> tuple[Cache, torch.Tensor]:
        """The layers a step over rows [start, stop) sees, made once per range (a compiled step is traced once
        per range and then sees the same objects), and where each row's new keys go in them."""
        if (start, stop) not in self._ranges:
            heads = pool.layer_tensors["keys"][0].shape[1]
            flat_slots = static_address(torch.zeros((stop - start) * heads, dtype=torch.long, device=self.device))
            layers = [
                pool.states.layer(i, start, stop)
                if state
                else _RowsLayer(*pool.layer(i, start, stop), flat_slots, self.span)
                for state, i in self._layout
            ]
            self._ranges[(start, stop)] = Cache(layers=layers), flat_slots
        return self._ranges[(start, stop)]

    def _forward(self, pool: BatchPool, start: int, stop: int) -> torch.Tensor:
        count = stop - start
        cache, flat_slots = self._rows_cache(pool, start, stop)
        heads = flat_slots.numel() // count
        # row i, head h, slot s is row (i * heads + h) * (C + 1) + s of a layer's keys viewed as [-1, D]
        first_of_head = torch.arange(count * heads, device=self.device) * (pool.capacity + 1)
        torch.add(first_of_head, self.slots[:count].repeat_interleave(heads), out=flat_slots)
        position_ids = self.positions[:count, None]  # [n, 1]
        if self.position_dims > 1:
            position_ids = position_ids[None].expand(self.position_dims, count, 1)
        inputs = (self.model, cache, self.input_ids[:count], position_ids, self.mask[:count])
        if self._compiled is not None:
            try:
                return self._compiled(*inputs).clone()  # CUDA graphs overwrite their outputs at the next replay
            except COMPILE_ERRORS as e:  # the step only writes the rows' new slots: running it again is safe
                logger.warning("compiled batched step failed (%s: %s); decoding eagerly", type(e).__name__, e)
                self._compiled = None
        return batched_forward(*inputs)


def batched_forward(
    model: torch.nn.Module, cache: Cache, input_ids: torch.Tensor, position_ids: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """One forward of one token per row over the rows' span of slots: logits [n, vocab]. `decode_forward` under
    a code object of its own: torch.compile keys its traces by code object, and this keeps the batched steps'
    traces (and their recompilation limit) apart from the one-stream steps'."""
    return decode_forward(model, cache, input_ids, position_ids, mask)
