#!/usr/bin/env bash
# Divergence DP (mirror-prox) at 24x24 and 32x32 on an accelerator, one command: the runs the
# 2-core CPU takes minutes for (issue 19). Run from the repository's root on a machine with a GPU
# and JAX for it; wheels under .whl/ are installed first; each run is capped at 150 s; the tables
# go to $OUT (or benchmarks/results) as divergence_dp4_gpu_*.txt.
set -uo pipefail
if compgen -G ".whl/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH="/tmp/site:${PYTHONPATH:-}"
fi
export PYTHONPATH="$PWD:${PYTHONPATH:-}" PYTHONUNBUFFERED=1
out="${OUT:-benchmarks/results}"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
B="python3 benchmarks/divergence_optimality.py --no-reference --method pdhg --seeds 1 --gap-tol 1e-2"
run() {  # grid kind objective seed
  local f="$out/divergence_dp4_gpu_$1_$2_$3_s$4.txt"
  timeout 150 $B --grid "$1" --kinds "$2" --objective "$3" --first-seed "$4" --out "$f" > /dev/null 2>&1 \
    || echo "$1 $2 $3 seed $4: not finished in 150 s (rc $?)" | tee "$f"
  grep -m1 -- "-dp4-" "$f" || true
}
run 24 renyi2-dp4 entry 1
run 24 renyi2-dp4 worst 2
run 24 kl-dp4 entry 1
run 32 renyi2-dp4 worst 1
run 32 renyi2-dp4 entry 1
run 32 kl-dp4 entry 1
