"""What one more stream costs, and whether it fits: the bounded cache makes the cost of a stream a known number.

Device KV per stream: every layer's preallocated buffers hold budget + recall + 1 tokens (the decode span)
plus one prefill chunk, rounded up to the buffers' growth step, at `bytes_per_token` (keys and values of
every attention layer, plus the per-token bookkeeping: positions, origin, stream index, attention), and on a hybrid
model (Qwen3.5) the linear-attention layers' fixed recurrent and convolution states (`state_bytes`). Host store per
stream: its byte bound (RAM, or a folder with --store-dir). Around the KV, each stream also costs (`StreamOverhead`):
its OS threads (the capture thread, FFmpeg's decoder and scaler threads), its decoder's frames, the frames of the clips
in flight (the clip queue, the clip being assembled and the one being ingested, at the model's frame size and the
configured fps) on the host, and its row of a batched answer's activations on the device. Pure arithmetic; the
caller supplies what memory is free.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from bus.refusals import AdmissionError  # noqa: F401 (raised here, caught by the callers)
from cache.config import CacheConfig
from cache.policies import POLICIES

GROW = 256  # StaticBoundedLayer buffers grow in multiples of this many tokens
USABLE_SHARE = 0.8  # of the free memory, the rest left to the prefill's activations, the page, the allocator
THREAD_BYTES = 2 * 2**20  # resident per OS thread: the stack in use and its share of the allocator's arenas
SOURCE_FRAME_PIXELS = 1920 * 1080  # the decoder's frames: a source's size is known only once opened; 1080p assumed
DECODED_BYTES_PER_PIXEL = 1.5  # YUV 4:2:0, what H.264/H.265 decoders hold
DECODER_HELD_FRAMES = 6  # frames a decoder keeps beyond one per thread (references, reordering)
CLIPS_IN_FLIGHT_BEYOND_QUEUE = 2  # the clip being assembled (capture thread) and the one being ingested (worker)
LOGIT_BYTES = 4  # float32 logits


@dataclass(frozen=True)
class KvShape:
    layers: int
    kv_heads: int
    head_dim: int
    element_bytes: int  # of keys and values (2 for bf16/fp16, 4 for fp32)
    position_dims: int = 1  # 3 for M-RoPE
    state_bytes: int = 0  # per stream, whatever its length: a hybrid model's linear-attention states

    @classmethod
    def of_model(cls, model, position_dims: int = 1) -> KvShape:
        """Read from a transformers model (its text config for a VLM). `layers` counts the attention layers only
        (a hybrid's `layer_types` marks the others "linear_attention")."""
        text = model.config.get_text_config()
        heads = text.num_attention_heads
        head_dim = getattr(text, "head_dim", None) or text.hidden_size // heads
        element = next(model.parameters()).element_size()
        types = getattr(text, "layer_types", None) or ["full_attention"] * text.num_hidden_layers
        linear = sum(t == "linear_attention" for t in types)
        return cls(
            len(types) - linear,
            getattr(text, "num_key_value_heads", heads),
            head_dim,
            element,
            position_dims,
            linear * linear_state_bytes(text, element) if linear else 0,
        )

    @property
    def bytes_per_token(self) -> int:
        kv = 2 * self.head_dim * self.element_bytes
        bookkeeping = 2 * self.position_dims * 8 + 8 + 4  # positions, origin (int64 x P), index, attention
        return self.layers * self.kv_heads * (kv + bookkeeping)


def linear_state_bytes(text, element_bytes: int) -> int:
    """One Gated DeltaNet layer's states (transformers' Qwen3.5): the convolution state, [conv_dim, kernel] in the
    model's dtype, and the recurrent state, [value heads, key dim, value dim] in float32 (the delta rule runs in
    float32 and hands its state back as such)."""
    key_dim = text.linear_num_key_heads * text.linear_key_head_dim
    value_dim = text.linear_num_value_heads * text.linear_value_head_dim
    conv = (2 * key_dim + value_dim) * text.linear_conv_kernel_dim * element_bytes
    recurrent = text.linear_num_value_heads * text.linear_key_head_dim * text.linear_value_head_dim * 4
    return conv + recurrent


@dataclass(frozen=True)
class ModelShape:
    """What a batched answer's row of activations depends on (the text model's sizes)."""

    hidden: int
    intermediate: int
    heads: int
    vocab: int
    element_bytes: int

    @classmethod
    def of_model(cls, model) -> ModelShape:
        text = model.config.get_text_config()
        element = next(model.parameters()).element_size()
        intermediate = getattr(text, "intermediate_size", None) or 4 * text.hidden_size
        return cls(text.hidden_size, intermediate, text.num_attention_heads, text.vocab_size, element)


@dataclass(frozen=True)
class CaptureShape:
    """How each stream is captured. frame_size: (width, height) of the frames given to the model, pixels.
    fps: frames sampled per second of stream time; clip_seconds: stream seconds per clip; queue_size: clips the
    capture queue holds; decoder_threads: FFmpeg's (0: FFmpeg picks one per core, plus one); scaler_threads: the
    threads FFmpeg's scaler runs when frames are resized (0: one per core)."""

    frame_size: tuple[int, int]
    fps: float
    clip_seconds: float
    queue_size: int = 2
    decoder_threads: int = 0
    scaler_threads: int = 0


@dataclass(frozen=True)
class StreamOverhead:
    """One stream's memory besides its KV: threads, decoder and frame buffers on the host, and its row of a
    batched answer's activations on the device. Bytes, except `threads` (a count)."""

    threads: int
    thread_bytes: int
    decoder_bytes: int
    frame_bytes: int
    answer_bytes: int

    @property
    def host_bytes(self) -> int:
        return self.thread_bytes + self.decoder_bytes + self.frame_bytes


NO_OVERHEAD = StreamOverhead(0, 0, 0, 0, 0)


def decoder_threads(requested: int) -> int:
    """The decoder threads FFmpeg runs for `requested` (0: automatic, one per core plus one; one on one core)."""
    if requested > 0:
        return requested
    cores = os.cpu_count() or 1
    return cores + 1 if cores > 1 else 1


def stream_overhead(capture: CaptureShape, model: ModelShape, span_tokens: int) -> StreamOverhead:
    """What a stream costs besides its KV. span_tokens: the keys a decode step of its answer attends over.

    threads: the capture thread, the decoder's and the scaler's (measured with --model tiny on 2 cores: 6 more
    OS threads per stream, 1 + 3 + 2). decoder: one source frame per decoder thread plus the frames it
    keeps (DECODER_HELD_FRAMES), at SOURCE_FRAME_PIXELS in YUV 4:2:0. frames: the clips in flight (the queue's, the
    one being assembled, the one being ingested) x frames per clip x width x height x 3 (RGB uint8). answer: its
    row in a batched decode step: the logits and their softmax (vocab floats each), the attention scores over the
    span (heads x span floats), and one layer's hidden and MLP activations (4 x hidden + 3 x intermediate).
    """
    scaler = capture.scaler_threads or os.cpu_count() or 1
    threads = 1 + decoder_threads(capture.decoder_threads) + scaler
    decoder_frames = decoder_threads(capture.decoder_threads) + DECODER_HELD_FRAMES
    decoder = int(decoder_frames * SOURCE_FRAME_PIXELS * DECODED_BYTES_PER_PIXEL)
    frames_per_clip = math.ceil(capture.fps * capture.clip_seconds - 1e-9)
    width, height = capture.frame_size
    clips = capture.queue_size + CLIPS_IN_FLIGHT_BEYOND_QUEUE
    frames = clips * frames_per_clip * width * height * 3
    answer = (
        2 * model.vocab * LOGIT_BYTES
        + model.heads * span_tokens * LOGIT_BYTES
        + (4 * model.hidden + 3 * model.intermediate) * model.element_bytes
    )
    return StreamOverhead(threads, threads * THREAD_BYTES, decoder, frames, answer)


@dataclass(frozen=True)
class StreamCost:
    device_tokens: int | None  # None: the policy never evicts, so no bound
    bytes_per_token: int
    host_bytes: int  # the host store's bound (0 without recall)
    host_in_ram: bool
    overhead: StreamOverhead = NO_OVERHEAD  # threads, decoder, frames, answer activations
    state_bytes: int = 0  # a hybrid model's fixed linear-attention states

    @property
    def device_bytes(self) -> int | None:
        return None if self.device_tokens is None else self.device_tokens * self.bytes_per_token + self.state_bytes


def stream_cost(shape: KvShape, cache: CacheConfig, chunk_size: int) -> StreamCost:
    """The memory one stream may take at most (`cache.store_bytes` must already be resolved, not 0)."""
    evicts = POLICIES[cache.policy].evicts
    tokens = None
    if evicts:
        tokens = -(-(cache.budget + cache.recall + 1 + max(chunk_size, cache.window)) // GROW) * GROW
    has_store = evicts and cache.recall > 0
    store = cache.store_bytes if has_store else 0
    return StreamCost(tokens, shape.bytes_per_token, store, not cache.store_dir, state_bytes=shape.state_bytes)


def check_fits(
    cost: StreamCost,
    streams: int,
    device_free: int,
    host_free: int,
    shared_memory: bool,
    held: tuple[int, int] = (0, 0),
    running: int = 0,
) -> str:
    """Raises AdmissionError when `streams` streams do not fit; returns the arithmetic as a line otherwise.

    device_free / host_free: bytes free now (after the model was loaded). shared_memory: the device is the
    CPU or a Jetson (device KV and host store draw on the same RAM). held: (device, host) bytes that streams
    already running among `streams` hold now (their buffers and stores): no longer free, so not needed again.
    running: how many of `streams` run already (their threads, decoders and frames are spent, not free; their
    answers' activations are not: those come with every answer).
    """
    if cost.device_bytes is None:
        return f"{streams} stream(s): policy without eviction, device KV unbounded (grows with the stream)"
    extra = cost.overhead
    held_device, held_host = held if cost.host_in_ram else (held[0], 0)
    held_host += running * extra.host_bytes  # activations come and go with answers: never held
    device = streams * (cost.device_bytes + extra.answer_bytes) - held_device
    host = streams * ((cost.host_bytes if cost.host_in_ram else 0) + extra.host_bytes) - held_host
    per_stream = (
        f"{_gb(cost.device_bytes)} device KV ({cost.device_tokens} tokens x {cost.bytes_per_token / 1024:.0f} KiB"
        + (f" + {_gb(cost.state_bytes)} linear-attention states)" if cost.state_bytes else ")")
        + (f" + {_gb(cost.host_bytes)} host store" if cost.host_bytes else "")
        + (
            f" + {_gb(extra.host_bytes)} for {extra.threads} threads, decoder and frames"
            f" + {_gb(extra.answer_bytes)} answer activations"
            if extra != NO_OVERHEAD
            else ""
        )
    )
    line = f"{streams} stream(s) x ({per_stream})"
    if held_device or held_host:
        line += f" less the {_gb(held_device + held_host)} the running streams hold already"
    advice = "lower --budget, --recall or --store-mb, or watch fewer streams"
    if shared_memory:
        need, free = device + host, device_free
        if need > USABLE_SHARE * free:
            raise AdmissionError(
                f"{line} = {_gb(need)}, more than {USABLE_SHARE:.0%} of the {_gb(free)} of memory free: {advice}"
            )
        return f"{line} = {_gb(need)} of {_gb(free)} free"
    if device > USABLE_SHARE * device_free:
        raise AdmissionError(
            f"{line}: device KV {_gb(device)}, more than {USABLE_SHARE:.0%} of the {_gb(device_free)} "
            f"of device memory free: {advice}"
        )
    if host > USABLE_SHARE * host_free:
        raise AdmissionError(
            f"{line}: host stores {_gb(host)}, more than {USABLE_SHARE:.0%} of the {_gb(host_free)} "
            f"of RAM free: {advice}"
        )
    return f"{line}: device {_gb(device)} of {_gb(device_free)} free, host {_gb(host)} of {_gb(host_free)} free"


def ingest_warning(prefill_seconds: list[float], live_streams: int, clip_seconds: float) -> str | None:
    """A warning when the live streams bring clips faster than the worker ingests them (measured), else None."""
    if not prefill_seconds or live_streams == 0:
        return None
    per_clip = sum(prefill_seconds) / len(prefill_seconds)
    capacity = 1.0 / per_clip if per_clip > 0 else float("inf")
    demand = live_streams / clip_seconds
    if demand <= capacity:
        return None
    return (
        f"{live_streams} stream(s) bring {demand:.2f} clips/s but this device ingests {capacity:.2f} clips/s "
        f"({per_clip:.2f} s a clip): clips will be dropped; lower --fps, raise --clip-seconds, or watch fewer streams"
    )


def _gb(n: int) -> str:
    if n >= 2**30:
        return f"{n / 2**30:.2f} GiB"
    return f"{n / 2**20:.0f} MiB" if n >= 2**20 else f"{n / 2**10:.0f} KiB"
