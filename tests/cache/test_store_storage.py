"""Where the host store keeps its blocks: RAM or a folder, plain or int8/int4 (KIVI). A folder gives the same
answers as RAM; compression costs bounded error; a bad folder is a clear error at start, and a folder that
fails at run time is reported while the store goes on in RAM."""

import errno
import os
import shutil
import tempfile
from pathlib import Path

import pytest
import torch

from cache.bounded_cache import BoundedCache
from cache.config import CacheConfig
from cache.runner import CachedRunner
from cache.store.kv_quant import dequantize, quantize
from cache.store.payloads import FolderPayloads, StoreFolderError
from cache.store.recall import recall_for_prompt
from tests.support.tiny_text_models import VOCAB, build_pair

PROMPT, QUESTION, BUDGET, BLOCK = 150, 10, 48, 16


@pytest.mark.parametrize("bits", [8, 4])
@pytest.mark.parametrize("group_dim", [2, 3])
def test_quantization_error_is_at_most_half_a_step_per_group(bits, group_dim):
    x = torch.randn(2, 3, 32, 64, generator=torch.Generator().manual_seed(0))
    x[..., 5] *= 40  # an outlier channel, as keys have
    q = quantize(x, bits, group_dim)
    back = dequantize(q)
    step = ((x.amax(group_dim, keepdim=True) - x.amin(group_dim, keepdim=True)) / (2**bits - 1)).expand_as(x)
    assert ((back - x).abs() <= step / 2 + 2e-3 * x.abs().amax()).all()  # + float16 rounding of min and step
    assert q.nbytes < x.numel() * 4 * (bits / 32 + 0.07)  # codes plus per-group float16 min and step


def test_per_channel_keys_keep_an_outlier_channel_from_swamping_the_others():
    x = torch.randn(1, 1, 32, 64, generator=torch.Generator().manual_seed(1))
    x[..., 5] *= 40
    per_channel = (dequantize(quantize(x, 4, group_dim=2)) - x)[..., :5].abs().mean()
    per_token = (dequantize(quantize(x, 4, group_dim=3)) - x)[..., :5].abs().mean()
    assert per_channel * 5 < per_token


def stream_and_recall(tmp_path: Path | None = None, quant: str = "none", recall: int = PROMPT, on_half=None):
    """Streams PROMPT tokens in two halves (chunks of 16 that evict), recalls for a question, prefills it."""
    _, bounded, dims = build_pair("llama-gqa")
    config = CacheConfig(policy="window", budget=BUDGET, window=8, recall=recall, block=BLOCK, store_bytes=2**24,
                         store_dir=str(tmp_path) if tmp_path else "", store_quant=quant)  # fmt: skip
    cache = BoundedCache.for_model(bounded, config)
    runner = CachedRunner(bounded, cache, position_dims=dims, chunk_size=16)
    gen = torch.Generator().manual_seed(3)
    prompt = torch.randint(3, VOCAB, (1, PROMPT), generator=gen)
    question = torch.randint(3, VOCAB, (1, QUESTION), generator=gen)
    with torch.inference_mode():
        runner.prefill(input_ids=prompt[:, : PROMPT // 2])
        if on_half:
            on_half(cache)
        runner.prefill(input_ids=prompt[:, PROMPT // 2 :])
        stats = recall_for_prompt(runner, input_ids=question)
        logits = runner.prefill(input_ids=question, evict_to=BUDGET - 4 + stats.tokens)
    return cache, stats, logits


def test_a_folder_store_recalls_exactly_what_a_ram_store_does(tmp_path):
    ram, ram_stats, ram_logits = stream_and_recall()
    disk, disk_stats, disk_logits = stream_and_recall(tmp_path)
    assert disk.store.where == "disk" and not disk.store.errors
    files = list(tmp_path.glob("kv-store-*/*.pt"))
    assert len(files) == len(disk.store.blocks) > 0
    assert disk_stats.tokens == ram_stats.tokens > 0
    torch.testing.assert_close(disk_logits, ram_logits, atol=0, rtol=0)
    disk.reset()
    assert not list(tmp_path.glob("kv-store-*/*.pt"))  # a reset frees the disk too


def test_compressed_stores_are_smaller_and_recall_close_to_exact():
    plain, _, exact = stream_and_recall()
    errors, sizes = {}, {}
    for quant in ("int8", "int4"):
        cache, stats, logits = stream_and_recall(quant=quant)
        assert stats.tokens > 0
        errors[quant] = float((logits - exact).abs().max())
        sizes[quant] = cache.store.bytes / plain.store.bytes
    assert 0 < errors["int8"] < errors["int4"]  # the recalled KV really is the quantised one, and int4 is coarser
    assert errors["int8"] < 0.05 * float(exact.abs().max())
    assert sizes["int8"] < 0.4 and sizes["int4"] < 0.25  # summaries (kept in float) are part of the bytes


def test_a_missing_folder_is_a_clear_error_at_start(tmp_path):
    with pytest.raises(StoreFolderError, match=r"does not exist: create it \(mkdir -p .*\) or leave out --store-dir"):
        stream_and_recall(tmp_path / "nope")


def test_a_file_instead_of_a_folder_is_a_clear_error_at_start(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(StoreFolderError, match="is not a folder"):
        stream_and_recall(tmp_path / "file")


def _unwritable_folder(tmp_path: Path) -> Path:
    if os.geteuid() != 0:
        folder = tmp_path / "ro"
        folder.mkdir(mode=0o500)
        return folder
    try:  # root writes anywhere permissions say no; sysfs refuses new files even to root
        tempfile.TemporaryFile(dir="/sys").close()
    except OSError:
        return Path("/sys")
    pytest.skip("no folder here refuses writes to this user")


def test_a_read_only_folder_is_a_clear_error_at_start(tmp_path):
    with pytest.raises(StoreFolderError, match="cannot write to store folder .*choose a writable folder"):
        stream_and_recall(_unwritable_folder(tmp_path))


def test_a_folder_without_room_for_the_bound_is_a_clear_error_at_start(tmp_path):
    _, bounded, _ = build_pair("llama-gqa")
    huge = shutil.disk_usage(tmp_path).free * 2
    config = CacheConfig(policy="window", budget=BUDGET, window=8, recall=16, store_bytes=huge, store_dir=str(tmp_path))
    with pytest.raises(StoreFolderError, match="MiB free, but the store may grow to .* lower --store-mb"):
        BoundedCache.for_model(bounded, config)


def test_a_folder_removed_at_run_time_is_reported_and_the_store_goes_on_in_ram(tmp_path):
    def remove_folder(cache):
        assert cache.store.tokens > 0 and cache.store.where == "disk"
        shutil.rmtree(tmp_path)

    cache, stats, logits = stream_and_recall(tmp_path, on_half=remove_folder)
    store = cache.store
    assert store.where == "ram"
    errors = store.take_errors()
    assert any("cannot write" in e and "RAM only" in e for e in errors)
    assert any("could not be read back" in e for e in errors)  # the blocks that were on disk are lost ...
    assert store.lost_tokens > 0 and all(b.home.where == "ram" for b in store.blocks)
    assert store.tokens + store.lost_tokens == PROMPT + QUESTION  # ... and counted; the rest came back
    assert stats.tokens > 0 and torch.isfinite(logits).all()
    assert not store.errors  # taken once


def test_a_full_disk_at_run_time_is_reported_once_and_the_store_goes_on_in_ram(tmp_path, monkeypatch):
    calls = []

    def full_disk(self, key, payload):
        calls.append(key)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def fill_disk(cache):
        monkeypatch.setattr(FolderPayloads, "put", full_disk)

    cache, stats, _ = stream_and_recall(tmp_path, on_half=fill_disk)
    errors = cache.store.take_errors()
    assert len(calls) == 1 and len(errors) == 1  # one failed write, then RAM only
    assert "No space left on device" in errors[0]
    assert cache.store.tokens == PROMPT + QUESTION and cache.store.lost_tokens == 0  # nothing lost
    assert stats.tokens > 0


def test_the_store_does_not_change_what_the_stream_computes_between_questions():
    """Recall acts only at questions: streamed logits (and so the stream's perplexity) are the same with it."""
    _, bounded, dims = build_pair("llama-gqa")
    tokens = torch.randint(3, VOCAB, (1, PROMPT), generator=torch.Generator().manual_seed(5))
    logits = {}
    for recall in (0, 32):
        config = CacheConfig(policy="inf-mllm", budget=BUDGET, window=8, recall=recall, block=BLOCK, store_bytes=2**24)
        runner = CachedRunner(bounded, BoundedCache.for_model(bounded, config), position_dims=dims, chunk_size=16)
        with torch.inference_mode():
            logits[recall] = torch.cat([runner.prefill(input_ids=tokens[:, i : i + 16], all_logits=True)
                                        for i in range(0, PROMPT, 16)], dim=1)  # fmt: skip
        assert (runner.cache.store is not None) == (recall > 0)
    torch.testing.assert_close(logits[32], logits[0], atol=0, rtol=0)
