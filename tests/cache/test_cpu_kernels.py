"""The CPU decode kernels compute what the plain math computes, on every path through them, and the model
falls back to SDPA/MKL where they cannot be used.

The reference is the textbook formula in float64 (softmax(q K^T * scale) V with KV head h // group for query
head h, as transformers' repeat_kv), not the kernels' own output. The shapes reach each branch of the C++
code: the register-accumulator sums for group sizes 1-8 (slices of 32, 16 and 8 floats), the generic sums
(16 query heads per KV head, head sizes no slice divides), four-row blocks and their tails, and scalar dot
products for head sizes that are not a multiple of 8.
"""

import logging
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch

from cache.attention import one_query_attention
from cache.cpu import kernels as cpu_kernels
from cache.cpu.layouts import OneRowLinear, tune_linear_layouts
from tests.support.tiny_text_models import VOCAB, build_pair

REPO = Path(__file__).resolve().parents[2]
FP32 = {"atol": 2e-5, "rtol": 1e-4}  # float32 results against the float64 formula


pytestmark = pytest.mark.usefixtures("cpu_kernels_built")


def _reference_attention(query, key, value, mask, scaling):
    """[B, H_q, 1, D] x [B, H_kv, N, D] -> [B, 1, H_q, D], in float64."""
    group = query.shape[1] // key.shape[1]
    k = key.double().repeat_interleave(group, dim=1)
    v = value.double().repeat_interleave(group, dim=1)
    scores = (query.double() @ k.transpose(-1, -2)) * scaling
    scores = scores.masked_fill(~mask.reshape(1, 1, 1, -1), float("-inf"))
    return (torch.softmax(scores, dim=-1) @ v).transpose(1, 2)


@pytest.mark.parametrize(
    ("q_heads", "kv_heads", "dim", "tokens"),
    [
        (9, 3, 64, 2049),  # the reference model (group 3: slices of 32 floats)
        (12, 2, 128, 301),  # Qwen2-VL-2B (group 6: slices of 16)
        (28, 4, 128, 77),  # Qwen2-VL-7B (group 7: slices of 8)
        (8, 8, 64, 40),  # no grouping
        (16, 1, 64, 50),  # group 16: the generic sums
        (4, 4, 40, 13),  # 40 floats: no 32-float slice, four-row blocks still
        (6, 2, 36, 9),  # 36 floats: scalar dot tails
        (9, 3, 64, 3),  # fewer keys than a four-row block
        (4, 2, 64, 16500),  # 4 MB of keys per head: two threads share the heads
    ],
)
def test_decode_attention_matches_the_formula(q_heads, kv_heads, dim, tokens, two_threads):
    gen = torch.Generator().manual_seed(q_heads * 1000 + tokens)
    batch, capacity = 2, tokens + 17
    query = torch.randn(batch, q_heads, 1, dim, generator=gen)
    # a prefix of larger buffers, as the static cache hands them to attention
    key = torch.randn(batch, kv_heads, capacity, dim, generator=gen)[:, :, :tokens]
    value = torch.randn(batch, kv_heads, capacity, dim, generator=gen)[:, :, :tokens]
    mask = torch.rand(tokens, generator=gen) > 0.3
    mask[-1] = True  # a decoding token always sees itself
    scaling = dim**-0.5
    expected = _reference_attention(query, key, value, mask, scaling)
    got = torch.ops.edge_assistant.decode_attention(query, key, value, mask, scaling)
    torch.testing.assert_close(got.double(), expected, atol=2e-5, rtol=1e-4)
    # and through the attention function the model calls, with the model's 4-D mask
    via_model = one_query_attention(query, key, value, mask.view(1, 1, 1, -1), scaling)
    torch.testing.assert_close(via_model, got, atol=0, rtol=0)


@pytest.mark.parametrize(
    ("q_heads", "kv_heads", "dim", "tokens"),
    [
        (9, 3, 64, 2049),  # the reference model
        (4, 2, 64, 40),  # the tiny test models
        (16, 1, 64, 50),  # the generic sums
        (6, 2, 36, 9),  # scalar dot tails
        (4, 2, 64, 16500),  # two threads share the heads
    ],
)
def test_a_mask_per_batch_row_matches_the_formula_and_each_row_alone(q_heads, kv_heads, dim, tokens, two_threads):
    """Several streams decoded together: each batch row has its own mask (its own length); every row equals the
    float64 formula over its own keys, and the kernel run on that row alone, bit for bit."""
    gen = torch.Generator().manual_seed(q_heads * 7 + tokens)
    batch, capacity = 3, tokens + 5
    query = torch.randn(batch, q_heads, 1, dim, generator=gen)
    key = torch.randn(batch, kv_heads, capacity, dim, generator=gen)[:, :, :tokens]
    value = torch.randn(batch, kv_heads, capacity, dim, generator=gen)[:, :, :tokens]
    lengths = [tokens, max(1, tokens // 3), max(1, tokens - 4)]  # prefixes, as rows of a batch pool
    mask = torch.arange(tokens)[None] < torch.tensor(lengths)[:, None]  # [B, N]
    mask[1, -1] = True  # and a gap: any pattern per row
    scaling = dim**-0.5
    got = torch.ops.edge_assistant.decode_attention(query, key, value, mask, scaling)
    via_model = one_query_attention(query, key, value, mask.view(batch, 1, 1, tokens), scaling)
    torch.testing.assert_close(via_model, got, atol=0, rtol=0)
    for b in range(batch):
        row = slice(b, b + 1)
        expected = _reference_attention(query[row], key[row], value[row], mask[b], scaling)
        torch.testing.assert_close(got[row].double(), expected, **FP32)
        alone = torch.ops.edge_assistant.decode_attention(query[row], key[row], value[row], mask[b], scaling)
        torch.testing.assert_close(got[row], alone, atol=0, rtol=0)
    cpu_kernels.use_cpu_kernels(False)  # the SDPA path takes the same per-row mask
    try:
        sdpa = one_query_attention(query, key, value, mask.view(batch, 1, 1, tokens), scaling)
    finally:
        cpu_kernels.use_cpu_kernels(True)
    torch.testing.assert_close(sdpa, got, **FP32)


def test_no_mask_means_every_key_with_the_kernel_and_without():
    gen = torch.Generator().manual_seed(5)
    query, key, value = torch.randn(1, 6, 1, 64, generator=gen), *torch.randn(2, 1, 2, 90, 64, generator=gen)
    expected = _reference_attention(query, key, value, torch.ones(90, dtype=torch.bool), 0.125)
    torch.testing.assert_close(one_query_attention(query, key, value, None, 0.125).double(), expected, **FP32)
    cpu_kernels.use_cpu_kernels(False)
    try:
        torch.testing.assert_close(one_query_attention(query, key, value, None, 0.125).double(), expected, **FP32)
    finally:
        cpu_kernels.use_cpu_kernels(True)


def test_decode_attention_refuses_what_it_cannot_do():
    query, key = torch.randn(1, 4, 1, 8), torch.randn(1, 2, 5, 8)
    with pytest.raises(RuntimeError, match="hides every key"):
        torch.ops.edge_assistant.decode_attention(query, key, key, torch.zeros(5, dtype=torch.bool), 1.0)
    two_rows = torch.ones(2, 5, dtype=torch.bool)
    two_rows[1] = False  # one row of a per-row mask sees nothing
    with pytest.raises(RuntimeError, match="hides every key"):
        torch.ops.edge_assistant.decode_attention(
            query.expand(2, -1, -1, -1), *[key.expand(2, -1, -1, -1)] * 2, two_rows, 1.0
        )
    with pytest.raises(RuntimeError, match=r"\[N\] or \[B, N\]"):  # neither shared nor one per row
        torch.ops.edge_assistant.decode_attention(query, key, key, torch.ones(2, 5, dtype=torch.bool), 1.0)
    with pytest.raises(RuntimeError, match="fp32"):
        torch.ops.edge_assistant.decode_attention(query.double(), key.double(), key.double(), torch.ones(5) > 0, 1.0)


@pytest.mark.parametrize(
    ("out_features", "in_features"),
    [(576, 576), (49, 64), (3, 37), (1536, 576), (4099, 576)],  # the last: 9 MB, two threads share the rows
)
def test_one_row_linear_matches_the_formula(out_features, in_features, two_threads):
    gen = torch.Generator().manual_seed(out_features + in_features)
    weight = torch.randn(out_features, in_features, generator=gen)
    bias = torch.randn(out_features, generator=gen)
    x = torch.randn(1, 1, in_features, generator=gen)
    expected = x.double() @ weight.double().T + bias.double()
    got = torch.ops.edge_assistant.one_row_linear(x, weight, bias)
    assert got.shape == (1, 1, out_features)
    torch.testing.assert_close(got.double(), expected, atol=1e-4, rtol=1e-5)
    no_bias = torch.ops.edge_assistant.one_row_linear(x, weight, None)
    torch.testing.assert_close(no_bias.double(), expected - bias.double(), atol=1e-4, rtol=1e-5)


@pytest.mark.parametrize("rows", [2, 3, 5, 8, 16])
@pytest.mark.parametrize(("out_features", "in_features"), [(576, 576), (3, 37), (4099, 576), (578, 1000)])
def test_a_few_rows_match_the_formula_and_each_row_alone(rows, out_features, in_features, two_threads):
    """A batched decode step multiplies one row per stream: each equals the float64 formula, and the kernel on
    that row alone, bit for bit (pairs of rows, an odd last row, scalar tails, the two-thread split; from 3 rows
    on, tiles of 3 weight rows by up to 4 rows: tails of 1 and 2 weight rows, an input dimension in chunks)."""
    gen = torch.Generator().manual_seed(rows * 31 + out_features)
    weight = torch.randn(out_features, in_features, generator=gen)
    bias = torch.randn(out_features, generator=gen)
    x = torch.randn(rows, 1, in_features, generator=gen)
    got = torch.ops.edge_assistant.one_row_linear(x, weight, bias)
    assert got.shape == (rows, 1, out_features)
    torch.testing.assert_close(got.double(), x.double() @ weight.double().T + bias.double(), atol=1e-4, rtol=1e-5)
    for r in range(rows):
        alone = torch.ops.edge_assistant.one_row_linear(x[r : r + 1], weight, bias)
        torch.testing.assert_close(got[r : r + 1], alone, atol=0, rtol=0)


def test_tuning_picks_the_kernel_and_keeps_outputs(monkeypatch):
    _, model, _ = build_pair("llama-gqa")
    ids = torch.arange(3, 40)[None] % VOCAB
    with torch.inference_mode():
        expected_prefill = model(input_ids=ids).logits
        expected_step = model(input_ids=ids[:, :1]).logits
    monkeypatch.setattr("cache.cpu.layouts._fastest", lambda weight, rounds: "kernel")
    tune_linear_layouts(model)
    gate = model.model.layers[0].mlp.gate_proj
    assert type(gate) is OneRowLinear and gate.weight.is_contiguous()
    calls = []
    kernel = torch.ops.edge_assistant.one_row_linear
    monkeypatch.setattr(torch.ops.edge_assistant, "one_row_linear", lambda *a: calls.append(1) or kernel(*a))
    with torch.inference_mode():
        torch.testing.assert_close(model(input_ids=ids[:, :1]).logits, expected_step, atol=1e-5, rtol=0)
        assert calls  # one row: the kernel ran
        calls.clear()
        torch.testing.assert_close(model(input_ids=ids).logits, expected_prefill, atol=1e-5, rtol=0)
        assert not calls  # a prompt of many rows: MKL
    # tuning again another way undoes the kernel choice
    monkeypatch.setattr("cache.cpu.layouts._fastest", lambda weight, rounds: "column")
    tune_linear_layouts(model)
    assert type(gate) is torch.nn.Linear and gate.weight.stride() == (1, gate.weight.shape[0])


def test_disabled_kernels_fall_back_to_the_same_results():
    gen = torch.Generator().manual_seed(0)
    query, key, value = torch.randn(1, 6, 1, 64, generator=gen), *torch.randn(2, 1, 2, 70, 64, generator=gen)
    mask = torch.ones(1, 1, 1, 70, dtype=torch.bool)
    with_kernel = one_query_attention(query, key, value, mask, 0.125)
    cpu_kernels.use_cpu_kernels(False)
    try:
        assert not cpu_kernels.kernels_ready()
        without = one_query_attention(query, key, value, mask, 0.125)
    finally:
        cpu_kernels.use_cpu_kernels(True)
    torch.testing.assert_close(with_kernel, without, atol=1e-5, rtol=0)


def test_a_failed_build_leaves_sdpa_and_says_why(monkeypatch, caplog):
    def no_compiler(**kwargs):
        raise RuntimeError("Error building extension: g++ not found")

    monkeypatch.setattr("torch.utils.cpp_extension.load", no_compiler)
    monkeypatch.setattr(cpu_kernels, "_state", {"enabled": True})  # as in a process that has not built yet
    with caplog.at_level(logging.WARNING, logger="cache.cpu.kernels"):
        assert not cpu_kernels.kernels_ready()
    assert "g++ not found" in caplog.text and "using SDPA and MKL" in caplog.text
    query, key = torch.randn(1, 2, 1, 8), torch.randn(1, 1, 4, 8)
    out = one_query_attention(query, key, key, torch.ones(1, 1, 1, 4, dtype=torch.bool), 1.0)
    torch.testing.assert_close(out.double(), _reference_attention(query, key, key, torch.ones(4) > 0, 1.0))


def test_the_switch_variable_turns_them_off(monkeypatch):
    monkeypatch.setenv(cpu_kernels.DISABLE_VARIABLE, "0")
    monkeypatch.setattr(cpu_kernels, "_state", {"enabled": True})
    assert not cpu_kernels.kernels_ready()


def test_a_lock_left_by_a_killed_build_is_removed_under_the_build_lock(tmp_path, caplog):
    """torch's builder waits forever on its `lock` file; one left by a killed build must not hang the next."""
    leftover = tmp_path / "lock"
    leftover.touch()
    with caplog.at_level(logging.WARNING, logger="cache.cpu.kernels"), cpu_kernels.build_lock(tmp_path):
        assert not leftover.exists() and "did not finish" in caplog.text


HOLD_THE_LOCK = """
import sys, time
from pathlib import Path
from cache.cpu import kernels
with kernels.build_lock(Path(sys.argv[1])):
    print("holding", flush=True)
    time.sleep(120)
"""


def test_a_running_build_is_waited_for_and_a_killed_one_frees_the_lock(tmp_path):
    """A second builder waits while the first lives (and gives up after its bound, leaving torch's lock alone);
    once the first is killed (SIGKILL: no clean-up runs), the lock is free at once."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_THE_LOCK, str(tmp_path)], stdout=subprocess.PIPE, text=True, cwd=REPO
    )
    try:
        assert holder.stdout.readline().strip() == "holding"
        (tmp_path / "lock").touch()  # torch's lock of the holder's build in progress
        with pytest.raises(TimeoutError, match="another process has been building"):
            with cpu_kernels.build_lock(tmp_path, wait_seconds=0.5):
                pass
        assert (tmp_path / "lock").exists()
    finally:
        holder.kill()
        holder.wait(timeout=30)
    with cpu_kernels.build_lock(tmp_path, wait_seconds=5):
        assert not (tmp_path / "lock").exists()


def test_a_build_in_the_background_is_waited_for_and_never_run_twice(monkeypatch):
    """The app starts the build while the model loads; its later `kernels_ready()` must wait for that build's
    result instead of starting a second compiler on the same folder."""
    started, release, builds = threading.Event(), threading.Event(), []

    def slow_build() -> bool:
        builds.append(threading.current_thread().name)
        started.set()
        release.wait(10)
        return True

    monkeypatch.setattr(cpu_kernels, "_build", slow_build)
    monkeypatch.setattr(cpu_kernels, "_state", {"enabled": True})
    background = cpu_kernels.build_in_background()
    assert started.wait(10)
    waiter_result = []
    waiter = threading.Thread(target=lambda: waiter_result.append(cpu_kernels.kernels_ready()))
    waiter.start()
    waiter.join(0.2)
    assert waiter.is_alive()  # still waiting for the background build
    release.set()
    waiter.join(10)
    background.join(10)
    assert waiter_result == [True] and builds == ["cpu-kernel-build"]


def test_the_kernels_folder_is_the_machines_not_the_data_folders(tmp_path, monkeypatch):
    """A test's or a benchmark's own data folder uses the kernels already built (no rebuild per data folder);
    the folder is created private whatever the umask."""
    from cache.cpu.kernels import build_directory

    monkeypatch.setenv("EDGE_ASSISTANT_KERNEL_CACHE", str(tmp_path / "kernels"))
    monkeypatch.setenv("EDGE_ASSISTANT_DATA", str(tmp_path / "first"))
    old = os.umask(0o002)
    try:
        first = build_directory()
    finally:
        os.umask(old)
    monkeypatch.setenv("EDGE_ASSISTANT_DATA", str(tmp_path / "second"))
    assert build_directory() == first and first.parent == tmp_path / "kernels"
    assert [oct(p.stat().st_mode & 0o777) for p in (first.parent, first)] == ["0o700", "0o700"]


@pytest.mark.parametrize("planted", ["open folder", "link"])
def test_a_kernel_folder_others_could_write_is_refused_and_nothing_in_it_loaded(tmp_path, monkeypatch, caplog, planted):
    """The library runs as the assistant's user: one in a folder another user could write to, reached through
    a link, or writable by others itself is never loaded; the warning names the folder and the fix."""
    from cache.cpu import kernels

    monkeypatch.setenv("EDGE_ASSISTANT_KERNEL_CACHE", str(tmp_path / "kernels"))
    folder = kernels.build_directory()
    library = folder / f"{kernels.LIBRARY}.so"
    library.write_bytes(b"planted")
    if planted == "open folder":
        os.chmod(folder.parent, 0o777)
    else:
        elsewhere = tmp_path / "elsewhere"
        folder.rename(elsewhere)
        folder.symlink_to(elsewhere, target_is_directory=True)
    loads = []
    monkeypatch.setattr("torch.utils.cpp_extension.load", lambda **kw: loads.append(kw))
    monkeypatch.setattr(kernels, "_state", {"enabled": True})
    monkeypatch.setenv(kernels.DISABLE_VARIABLE, "1")
    with caplog.at_level("WARNING", logger="cache.cpu.kernels"):
        assert kernels.kernels_ready() is False
    assert loads == [] and "using SDPA and MKL" in caplog.text
    fix = {"open folder": "chmod 700", "link": "not a folder"}[planted]
    assert fix in caplog.text and str(tmp_path) in caplog.text


@pytest.mark.parametrize("change", ["changed", "open to others"])
def test_a_library_that_does_not_match_its_build_record_is_built_again(tmp_path, monkeypatch, change):
    """A library changed since its build (or cut short by a killed build), or that others may write, is
    removed before the build runs, never loaded as it is."""
    from cache.cpu import kernel_folder, kernels

    monkeypatch.setenv("EDGE_ASSISTANT_KERNEL_CACHE", str(tmp_path / "kernels"))
    folder = kernels.build_directory()
    library = folder / f"{kernels.LIBRARY}.so"
    library.write_bytes(b"built")
    kernel_folder.record_library(folder, library)
    assert kernel_folder.library_matches(folder, library)
    if change == "changed":
        library.write_bytes(b"changed")
    else:
        os.chmod(library, 0o666)
    assert not kernel_folder.library_matches(folder, library)
    found = []

    def fake_load(**kw):  # what a build finds in its folder, then its "library"
        found.append(sorted(p.name for p in folder.iterdir()))
        library.write_bytes(b"rebuilt")

    monkeypatch.setattr("torch.utils.cpp_extension.load", fake_load)
    monkeypatch.setattr(kernels, "_register_fakes", lambda: None)
    monkeypatch.setattr(kernels, "_state", {"enabled": True})
    monkeypatch.setenv(kernels.DISABLE_VARIABLE, "1")
    if torch.backends.cpu.get_cpu_capability() not in ("AVX2", "AVX512"):
        pytest.skip("the kernels are not built without AVX2")
    assert kernels.kernels_ready() is True
    assert found == [[kernels.LOCK_FILE]] and kernel_folder.library_matches(folder, library)  # the lock only
