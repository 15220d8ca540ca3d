"""The accelerator benchmark: one command on a machine with a GPU, its table written with the
device named.

Measures, in one run: the device's copy bandwidth (a STREAM-like ``y = 2·x`` on 1 GiB of float32,
bytes read and written), then stages of ``benchmarks/scaling.py`` (each in its own process, with
its own time limit, so that one slow stage does not lose the others): ``dp.design`` with
``method="pdhg"`` at ``gap_tol = 10⁻²`` on pure DistP grids and geo-indistinguishability, and the
exact LP (HiGHS, on the host's CPUs) of the same problems for the ratio.

    bash benchmarks/gpu.sh                       # the default stages, results in benchmarks/results/
    python benchmarks/gpu.py --stages distp:32:lp distp:32:design:0.01 --limit 120 --out DIR

Writes ``DIR/gpu.json`` and ``DIR/gpu.md`` (default ``benchmarks/results``).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import subprocess
import sys
import time

STAGES = ["distp:32:lp", "distp:32:design:0.01", "geo:12:lp", "geo:12:design:0.01",
          "distp:48:design:0.01", "distp:64:design:0.01"]
"""``kind:n:stage`` (``stage`` as in ``scaling.py --one``: ``lp`` or ``design:<gap_tol>``)."""


def bandwidth() -> dict:
    """Copy bandwidth of the default device: ``y = 2·x`` on 2^28 float32 (1 GiB each way)."""
    import jax
    import jax.numpy as jnp

    x = jnp.ones(2**28, jnp.float32)
    f = jax.jit(lambda v: v * 2.0)
    f(x).block_until_ready()
    best = float("inf")
    for _ in range(10):
        t = time.perf_counter()
        f(x).block_until_ready()
        best = min(best, time.perf_counter() - t)
    moved = 2 * x.size * 4
    return {"device": jax.devices()[0].device_kind, "platform": jax.devices()[0].platform,
            "jax": jax.__version__, "copy_gb_s": moved / best / 1e9}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stages", nargs="+", default=STAGES)
    ap.add_argument("--limit", type=float, default=100.0, help="seconds per stage")
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--out", default="benchmarks/results")
    args = ap.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    info = {"machine": platform.platform(), "cpus": os.cpu_count(), **bandwidth()}
    print(json.dumps(info), flush=True)
    rows = []
    scaling = pathlib.Path(__file__).with_name("scaling.py")
    for stage in args.stages:
        kind, n, rest = stage.split(":", 2)
        cmd = [sys.executable, str(scaling), "--one", kind, n, rest, "--steps", str(args.steps)]
        env = {**os.environ, **({"JAX_PLATFORMS": "cpu"} if rest == "lp" else {})}
        start = time.perf_counter()
        try:
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=args.limit, env=env,
                                 check=False)
            row = (json.loads(res.stdout.strip().splitlines()[-1]) if res.returncode == 0
                   else {"error": (res.stderr.strip().splitlines() or ["?"])[-1]})
        except subprocess.TimeoutExpired:
            row = {"error": f"not finished in {args.limit:g} s"}
        row.update(stage=stage, wall=time.perf_counter() - start)
        rows.append(row)
        print(json.dumps(row), flush=True)
        (out / "gpu.json").write_text(json.dumps({**info, "rows": rows}, indent=1))
    lines = [f"Device: {info['device']} ({info['platform']}, JAX {info['jax']}), copy bandwidth "
             f"{info['copy_gb_s']:.0f} GB/s; host: {info['cpus']} CPUs, {info['machine']}.", "",
             "| stage | seconds | steps | status | certified gap | device peak MB | note |",
             "|---|---:|---:|---|---:|---:|---|"]
    for r in rows:
        gap = f"{100 * r['certified_gap']:.3f} %" if "certified_gap" in r else "-"
        lines.append(f"| {r['stage']} | {r.get('seconds', r['wall']):.1f} | {r.get('steps', '-')} | "
                     f"{r.get('status', '-')} | {gap} | {r.get('device_peak_mb', 0):.0f} | "
                     f"{r.get('error', '')} |")
    (out / "gpu.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
