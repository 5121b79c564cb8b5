"""Soak test of `twotower serve` over a 1,000,000-item catalogue, on 127.0.0.1 only.

Same service as ``bench/serve_load.py`` (a tiny trained run's user tower, 1M
clustered synthetic items, an autotuned IVF index, synthetic metadata; built in
a ``serve_load.py --serve`` subprocess), then a constant open-loop rate of
``POST /recommend {"user_id", "k": 10}`` for ``--seconds`` (default 600), in
``--chunk-seconds`` slices (a bounded loop: fixed request count per slice, a
per-request timeout). After every slice it prints the server's RSS (psutil on
the server pid), status counts and p50/p99; at the end the totals, the RSS at
start and end, and whether the service is still healthy.

    python bench/soak.py --rate 300                   # 10 minutes at 300 req/s (~12 min with setup)
    python bench/soak.py --rate 100 --seconds 30 --n-items 100000   # quick check
"""
from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parent))
import serve_load  # noqa: E402  (the setup and the load generator are shared)


def rss_mb(pid: int) -> float:
    import psutil

    return psutil.Process(pid).memory_info().rss / 2**20


async def soak(args: argparse.Namespace, url: str, users: list[str], pid: int) -> int:
    import httpx

    await serve_load.phase(url, users, 50, 2, args.timeout)  # warm-up (not reported)
    rss_start = rss_mb(pid)
    print(f"RSS at start (after warm-up): {rss_start:.1f} MiB", flush=True)
    print(f"{'t_s':>6}{'sent':>8}{'200':>8}{'429':>7}{'5xx':>6}{'other':>7}{'ok/s':>9}{'p50ms':>9}{'p99ms':>9}"
          f"{'rss_MiB':>10}", flush=True)
    totals: dict[str, int] = {}
    lat: list[np.ndarray] = []
    t0 = time.perf_counter()
    rss_series = [rss_start]
    while time.perf_counter() - t0 < args.seconds:
        left = args.seconds - (time.perf_counter() - t0)
        r = await serve_load.phase(url, users, args.rate, min(args.chunk_seconds, max(left, 1.0)), args.timeout)
        for k, v in r["status"].items():
            totals[k] = totals.get(k, 0) + v
        lat.append(np.asarray(r.get("lat_ok_ms", []), dtype=np.float64))
        rss_series.append(rss_mb(pid))
        print(f"{time.perf_counter() - t0:>6.0f}{r['sent']:>8}{r['ok']:>8}{r['429']:>7}{r['5xx']:>6}{r['other']:>7}"
              f"{r['ok_rps']:>9.0f}{r['p50']:>9.2f}{r['p99']:>9.2f}{rss_series[-1]:>10.1f}", flush=True)
    wall = time.perf_counter() - t0
    ms = np.concatenate(lat) if lat else np.empty(0)
    async with httpx.AsyncClient(base_url=url, timeout=5) as c:
        health = (await c.get("/healthz")).status_code
        after = await c.post("/recommend", json={"user_id": users[0], "k": 10})
    sent = sum(totals.values())
    five = sum(v for k, v in totals.items() if k.isdigit() and k.startswith("5"))
    print(f"\nsoak: {wall:.0f}s at {args.rate:g} req/s: {sent} sent, statuses {totals}")
    if ms.size:
        print(f"latency of 200s: p50 {np.percentile(ms, 50):.2f} ms, p99 {np.percentile(ms, 99):.2f} ms, "
              f"max {ms.max():.1f} ms")
    print(f"server RSS: start {rss_start:.1f} MiB, end {rss_series[-1]:.1f} MiB, max {max(rss_series):.1f} MiB "
          f"(change {rss_series[-1] - rss_start:+.1f} MiB)")
    print(f"after soak: /healthz {health}, /recommend {after.status_code}")
    ok = five == 0 and health == 200 and after.status_code == 200
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run", help="trained run whose user tower is used (default: a tiny synthetic run)")
    p.add_argument("--rate", type=float, default=200, help="constant request rate (use the sustainable rate "
                                                            "serve_load.py reports)")
    p.add_argument("--seconds", type=float, default=600)
    p.add_argument("--chunk-seconds", type=float, default=30)
    serve_load.add_server_args(p, startup_timeout=900)
    p.add_argument("--timeout", type=float, default=5.0)
    args = p.parse_args()
    from _common import check_run, refuse_below

    serve_load.check_server_args(args)
    # in the one line of the server's flags, not argparse's usage and exit 2
    refuse_below(args, ("rate", "seconds", "chunk_seconds", "timeout"), 0, lo_open=True)
    check_run(args.run)
    tmp = tempfile.TemporaryDirectory(prefix="soak_")
    run_dir = Path(args.run) if args.run else serve_load.train_tiny_run(Path(tmp.name))
    started = serve_load.start_server(args, run_dir)
    if started is None:
        tmp.cleanup()
        return 1
    server, url, users = started
    try:
        print(f"service up at {url} (pid {server.pid}): {args.n_items:,} items; soak {args.seconds:g}s at "
              f"{args.rate:g} req/s", flush=True)
        return asyncio.run(soak(args, url, users, server.pid))
    finally:
        serve_load.stop_server(server)
        tmp.cleanup()


if __name__ == "__main__":
    sys.exit(main())
