"""CPU kernels for decoding one token, built on first use where the CPU has AVX2.

A decode step on a CPU is a memory-bound read of the weights and the cached keys and values. On the
README's AMD CPU, MKL's small products and SDPA read them at half the memory bandwidth or less, so two AVX2
kernels (`csrc/`) do the hot parts of a step:
- `edge_assistant::decode_attention`: the attention of one token, each key and value row read once for all
  the query heads that share it (the reference model's attention over a 2K-token span: about 15 -> 7.4 ms
  a step);
- `edge_assistant::one_row_linear`: a one-row product with a row-major weight (`cache.cpu.layouts` times it
  against MKL per weight shape and keeps the faster);
- `edge_assistant::int8_linear`: a product with int8 weights, any number of rows (`cache.cpu.int8_linear`,
  `--quantize int8`).
The first two read four rows a quarter of the matrix (or span) apart at a time: four memory streams at once read
faster than one on that CPU.

They are compiled with torch's C++ extension builder (g++ and ninja, the four sources side by side on all
cores) once per machine and torch version (about 20 s on 2 cores; most of it is parsing torch's headers, so each
source includes only those it uses: with `ATen/ATen.h` the build took 1.5 times the CPU time) into
`build_directory()`, a private folder of the machine's cache checked before each load (`kernel_folder`), one
process at a time (`build_lock`: a lock the system frees when its holder dies, so a build killed mid-way never
leaves the next start waiting), as
torch operators registered in C++ (a Python custom op cost
15 us a call, about 3 ms a step for the reference model's 210 products), so that a compiled decode step
calls each as one opaque op. `kernels_ready()` says whether they can be used; where the CPU lacks AVX2,
the build fails or `EDGE_ASSISTANT_CPU_KERNELS=0` is set, it says False and the model runs on SDPA and
MKL (same results up to float rounding).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import torch

from cache.cpu import kernel_folder

logger = logging.getLogger(__name__)

SOURCES = [
    Path(__file__).parent / "csrc" / n
    for n in ("bindings.cpp", "decode_attention.cpp", "one_row_linear.cpp", "int8_linear.cpp")
]
DISABLE_VARIABLE = "EDGE_ASSISTANT_CPU_KERNELS"
LIBRARY = "edge_assistant_cpu_kernels"
LOCK_FILE = "build.flock"
BUILD_WAIT_SECONDS = 300  # a build takes tens of seconds; longer than this, another process's build is stuck
_state: dict[str, bool] = {"enabled": True}  # "built": whether the ops are loaded, once tried
_building = threading.Lock()  # one build at a time; a second caller waits for its result


def kernels_ready() -> bool:
    """Whether the custom ops run the kernels (builds them the first time; False where they cannot)."""
    if not _state["enabled"]:
        return False
    if "built" in _state:  # no lock once known: compiled code traces this call, and a lock breaks its graph
        return _state["built"]
    with _building:
        if "built" not in _state:
            _state["built"] = _build()
    return _state["built"]


def build_in_background() -> threading.Thread:
    """Starts `kernels_ready()` on a thread, so that a first build (tens of seconds) overlaps other start-up
    work such as loading the model; a later `kernels_ready()` waits for it and returns its result."""
    thread = threading.Thread(target=kernels_ready, name="cpu-kernel-build", daemon=True)
    thread.start()
    return thread


def use_cpu_kernels(enabled: bool) -> None:
    """Turns the kernels on or off for this process (benchmarks compare them with SDPA and MKL)."""
    _state["enabled"] = enabled


def kernels_enabled() -> bool:
    """Whether `use_cpu_kernels` left them on (True unless turned off)."""
    return _state["enabled"]


def _build() -> bool:
    if os.environ.get(DISABLE_VARIABLE, "1") == "0":
        logger.info("CPU decode kernels disabled by %s=0", DISABLE_VARIABLE)
        return False
    if torch.backends.cpu.get_cpu_capability() not in ("AVX2", "AVX512"):
        logger.info("CPU decode kernels need AVX2; using SDPA and MKL")
        return False
    try:
        import ninja  # the pip package: its binary is not on PATH outside an activated venv

        os.environ["PATH"] = ninja.BIN_DIR + os.pathsep + os.environ.get("PATH", "")
    except ImportError:
        pass
    from torch.utils.cpp_extension import load

    started = time.perf_counter()
    try:
        directory = build_directory()
        library = directory / f"{LIBRARY}.so"
        with build_lock(directory):  # checked under the lock: a build in progress has no matching library yet
            if library.exists() and not kernel_folder.library_matches(directory, library):
                logger.warning("%s does not match the library built there: building it again", library)
                kernel_folder.discard_build(directory, keep=LOCK_FILE)
            if not library.exists():
                logger.info("building the CPU decode kernels into %s (once per machine, tens of seconds)", directory)
            load(
                name=LIBRARY,
                sources=[str(s) for s in SOURCES],
                # -fopenmp: at::parallel_for runs its threads only in code compiled with it (ATen's OpenMP backend
                # is a pragma in a header); the library links torch's own libgomp, already loaded by torch
                extra_cflags=["-O3", "-mavx2", "-mfma", "-fopenmp"],
                extra_ldflags=["-fopenmp"],
                build_directory=str(directory),
                is_python_module=False,  # loading the library registers its ops with torch
            )
            kernel_folder.record_library(directory, library)
    except (RuntimeError, OSError, ImportError) as e:  # no compiler or ninja, a failed or stuck build, an unsafe folder
        logger.warning("CPU decode kernels not built (%s: %s); using SDPA and MKL", type(e).__name__, e)
        return False
    _register_fakes()
    logger.info("CPU decode kernels ready in %.1f s", time.perf_counter() - started)
    return True


def build_directory() -> Path:
    """Where the kernels are built (cache/cpu/kernel_folder.py: a private folder per machine, checked), per
    torch version (a library built against one torch does not load into another) and per checkout and version
    of the sources (two checkouts sharing the folder would otherwise rebuild over each other at every start,
    each waiting for the other's lock). UnsafeKernelFolder where it is not safe to load from."""
    return kernel_folder.private_build_folder(
        kernel_folder.kernel_cache_root(), f"torch-{torch.__version__}-{_sources_digest()}"
    )


def _sources_digest() -> str:
    """12 hex digits of the sources' paths and contents (headers included)."""
    digest = hashlib.sha256()
    for path in sorted(SOURCES[0].parent.iterdir()):
        digest.update(str(path.resolve()).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


@contextlib.contextmanager
def build_lock(directory: Path, wait_seconds: float = BUILD_WAIT_SECONDS) -> Iterator[None]:
    """Holds the folder's build lock (`flock` on `build.flock`: the system releases it when its holder exits or
    is killed). torch's builder has a lock of its own, a file whose presence means "building" and which it waits
    on forever: one left by a killed build would hang every later start. Every build here takes this lock first,
    so a torch lock found while holding it is such a leftover, and is removed. TimeoutError when another process
    holds the lock for more than `wait_seconds` (its build is stuck; the caller runs on SDPA and MKL)."""
    fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        deadline = time.monotonic() + wait_seconds
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    stuck = f"another process has been building in {directory} for {wait_seconds:.0f} s"
                    raise TimeoutError(stuck) from None
                time.sleep(0.2)
        leftover = directory / "lock"
        if leftover.exists():
            logger.warning("removing %s, left by a build that did not finish", leftover)
            leftover.unlink(missing_ok=True)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def fits(*tensors: torch.Tensor) -> bool:
    """Whether these are tensors the kernels take: fp32 on the CPU."""
    return all(t.device.type == "cpu" and t.dtype == torch.float32 for t in tensors)


def _register_fakes() -> None:
    """Output shapes of the ops for tracing (torch.compile), which never runs the kernels."""

    @torch.library.register_fake("edge_assistant::decode_attention")
    def _(query, key, value, attended, scaling):  # query [B, H_q, 1, D], attended [N] or [B, N] -> [B, 1, H_q, D]
        batch, q_heads, _, dim = query.shape
        return query.new_empty(batch, 1, q_heads, dim)

    @torch.library.register_fake("edge_assistant::one_row_linear")
    def _(x, weight, bias):  # x [..., in] -> [..., out]
        return x.new_empty(*x.shape[:-1], weight.shape[0])

    @torch.library.register_fake("edge_assistant::int8_linear")
    def _(x, packed, weight_scale, bias, out_features):  # x [..., in] -> [..., out]
        return x.new_empty(*x.shape[:-1], out_features)


if __name__ == "__main__":  # `python -m cache.cpu.kernels`: builds them now (.ci/run does, before the tests)
    import sys

    logging.basicConfig(level=logging.INFO, format="cpu kernels: %(message)s")
    sys.exit(0 if kernels_ready() else 1)
