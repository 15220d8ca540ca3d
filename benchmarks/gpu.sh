#!/usr/bin/env bash
# The accelerator benchmark in one command (benchmarks/gpu.py): run from the repository's root on a
# machine with a GPU and JAX for it (pip install -e '.[gpu]'). Wheels under .whl/ (packages the
# machine lacks, downloaded elsewhere) are installed first; results go to $OUT or
# benchmarks/results (gpu.json, gpu.md).
set -euo pipefail
if compgen -G ".whl/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH="/tmp/site:${PYTHONPATH:-}"
fi
export PYTHONPATH="$PWD:${PYTHONPATH:-}" PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
python3 benchmarks/gpu.py --out "${OUT:-benchmarks/results}" "$@"
