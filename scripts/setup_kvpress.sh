#!/usr/bin/env bash
# Builds .venv-kvpress for scripts/kvpress_side_by_side.py: kvpress 0.5.5 needs transformers < 5.3, which
# the project itself does not use, so it gets its own virtual environment. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv-kvpress/bin/python ]; then
  python3 -m venv .venv-kvpress
fi
# torch pinned like requirements.txt (the CPU wheel on this project's machines)
.venv-kvpress/bin/pip install -q "torch==2.13.0" "kvpress==0.5.5" "transformers<5.3" tqdm
.venv-kvpress/bin/python -c "import kvpress, transformers; print('kvpress ready, transformers', transformers.__version__)"
