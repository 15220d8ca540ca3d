#!/usr/bin/env bash
# Divergence DP (mirror-prox) at 24x24 and 32x32 on an accelerator, one command: the runs the
# 2-core CPU takes minutes for (issue 19). Run from the repository's root on a machine with a GPU
# and JAX for it; wheels under .whl/ are installed first; each run is capped at 150 s; the tables
# go to $OUT (or benchmarks/results) as divergence_dp4_gpu_*.txt. `bash benchmarks/gpu_divergence_dp.sh
# delta` runs instead the hockey-stick bounds beside (--beside distp-delta / ldp-delta), each
# capped at 90 s.
set -uo pipefail
if compgen -G ".whl/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH="/tmp/site:${PYTHONPATH:-}"
fi
export PYTHONPATH="$PWD:${PYTHONPATH:-}" PYTHONUNBUFFERED=1
out="${OUT:-benchmarks/results}"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
B="python3 benchmarks/divergence_optimality.py --no-reference --method pdhg --seeds 1 --gap-tol 1e-2"
cap="${CAP:-150}"
run() {  # grid kind objective seed [beside]
  local f="$out/divergence_dp4_gpu_$1_$2_$3_s$4${5:+_$5}.txt"
  timeout "$cap" $B --grid "$1" --kinds "$2" --objective "$3" --first-seed "$4" ${5:+--beside "$5"} --out "$f" \
    > /dev/null 2>&1
  local rc=$?  # 1: finished without converging (the row says how); 124: cut off
  [ "$rc" = 124 ] && echo "$1 $2 $3 ${5:-} seed $4: not finished in $cap s" | tee "$f"
  grep -m1 -- "-dp4-" "$f" || echo "$1 $2 $3 ${5:-} seed $4: rc $rc, no row"
}
if [ "${1:-}" = delta ]; then
  cap=90
  for beside in distp-delta ldp-delta; do
    run 24 kl-dp4 expected 0 "$beside"
    run 24 renyi2-dp4 expected 0 "$beside"
    run 32 kl-dp4 expected 0 "$beside"
  done
  exit 0
fi
run 24 renyi2-dp4 entry 1
run 24 renyi2-dp4 worst 2
run 24 kl-dp4 entry 1
run 32 renyi2-dp4 worst 1
run 32 renyi2-dp4 entry 1
run 32 kl-dp4 entry 1
