"""Does `twotower serve --workers N` scale with cores? Closed-loop load from `wrk` (C), which leaves the cores
to the server.

The service is bench/serve_load.py's: a small trained run's user tower over a 1,000,000-item clustered catalogue,
an autotuned IVF index (recall@10 >= 0.95), ``POST /recommend {"user_id", "k": 10}`` with seen-item exclusion,
each worker computing on one thread. bench/serve_load.py drives it from Python, whose client takes a good share
of a 2-core machine's CPU at these rates, so that its ``--workers 1,2`` ratio measured the client as much as the
server; `wrk` (``apt-get install wrk``) spends ~2% of a core here at 1,500 requests/s.

For each server set-up (``--workers``, and the shared socket of the code before, ``--shared-socket``) and each
connection count (``--connections``), `wrk` keeps that many keep-alive connections busy for ``--seconds``,
each sending its next request when the last is answered (closed loop: the rate is what the server sustains at
that concurrency; latency is each request's own, from send to answer). The table gives requests/s, p50 / p99,
non-2xx answers and `wrk`'s CPU; the summary takes, for each set-up, the best rate whose p99 meets ``--p99-ms``
with every answer a 200, and its ratio to the first set-up's.

    python bench/serve_scaling.py                                   # 1 and 2 workers, ~2 min after the index
    python bench/serve_scaling.py --workers 1,2 --shared-socket --index-cache /tmp/idx   # also the old socket
"""
from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _common import check_run, int_list, refuse_range  # noqa: E402
from serve_load import add_server_args, check_server_args, start_server, stop_server, train_tiny_run  # noqa: E402

LUA = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local reqs = {}
local i = 0
init = function(args)
  for line in io.lines(args[1]) do table.insert(reqs, wrk.format("POST", "/recommend", nil, line)) end
end
request = function()
  i = i % #reqs + 1
  return reqs[i]
end
done = function(summary, latency, requests)
  io.write(string.format('WRKJSON {"requests": %d, "duration_us": %d, "non2xx": %d, "errors": %d, ' ..
    '"p50_us": %d, "p99_us": %d}\\n', summary.requests, summary.duration, summary.errors.status,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    latency:percentile(50), latency:percentile(99)))
end
"""


def run_wrk(wrk: str, url: str, connections: int, seconds: float, script: Path, bodies: Path) -> dict:
    """One closed-loop run of ``wrk`` (one thread); its WRKJSON summary plus the CPU it used."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run([wrk, "-t1", f"-c{connections}", f"-d{seconds:g}s", "--timeout", "5s", "-s", str(script),
                          url, "--", str(bodies)], capture_output=True, text=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    found = re.search(r"WRKJSON (\{.*\})", out.stdout)
    if out.returncode != 0 or found is None:
        raise SystemExit(f"error: wrk failed (exit {out.returncode}): {out.stderr.strip() or out.stdout.strip()}")
    r = json.loads(found.group(1))
    secs = r["duration_us"] / 1e6
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"connections": connections, "rps": r["requests"] / secs, "p50": r["p50_us"] / 1e3,
            "p99": r["p99_us"] / 1e3, "non2xx": r["non2xx"], "errors": r["errors"], "wrk_cpu": cpu / secs}


def wait_for_workers(url: str, n: int, timeout_s: float = 300.0) -> None:
    """Until ``n`` worker pids have answered ``/healthz`` (each on a fresh connection): the server is ready once
    one worker is, and a worker still loading takes a core from the load measured."""
    import time

    import httpx

    seen: set[int] = set()
    deadline = time.time() + timeout_s
    while len(seen) < n:
        if time.time() > deadline:
            raise SystemExit(f"error: only {len(seen)} of {n} workers answered in {timeout_s:g} s")
        try:
            seen.add(httpx.get(url + "/healthz", timeout=5, headers={"Connection": "close"}).json()["pid"])
        except httpx.HTTPError:
            time.sleep(0.5)


def best(rows: list[dict], p99_ms: float) -> dict | None:
    """The highest rate whose p99 meets the target with every answer a 200."""
    ok = [r for r in rows if r["p99"] <= p99_ms and r["non2xx"] == 0 and r["errors"] == 0]
    return max(ok, key=lambda r: r["rps"]) if ok else None


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run", help="trained run whose user tower is used (default: a tiny synthetic run)")
    add_server_args(p, startup_timeout=600)
    p.add_argument("--workers", default="1,2", help="worker counts, measured in turn (default 1,2)")
    p.add_argument("--shared-socket", action="store_true",
                   help="also measure the largest worker count on one shared socket (the code before)")
    p.add_argument("--connections", default="1,2,4,8,16", help="wrk's connection counts (default 1,2,4,8,16)")
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--p99-ms", type=float, default=10.0)
    p.add_argument("--wrk", default="wrk", help="the wrk binary (default: wrk on PATH)")
    args = p.parse_args()
    counts = int_list("--workers", args.workers, 1, what="worker count")
    conns = int_list("--connections", args.connections, 1, what="connection count")
    for flag in ("seconds", "p99_ms"):
        refuse_range(args, flag, 0, lo_open=True)
    check_server_args(args)
    check_run(args.run)
    wrk = shutil.which(args.wrk)
    if wrk is None:
        raise SystemExit(f"error: --wrk {args.wrk}: not found; install it (Debian/Ubuntu: apt-get install wrk) "
                         "or give its path")
    setups = [(n, False) for n in counts] + ([(max(counts), True)] if args.shared_socket else [])
    tmp = tempfile.TemporaryDirectory(prefix="serve_scaling_")
    folder = Path(tmp.name)
    run_dir = Path(args.run) if args.run else train_tiny_run(folder)
    script = folder / "post.lua"
    script.write_text(LUA)
    results: list[tuple[str, list[dict]]] = []
    try:
        for n, shared in setups:
            args.workers, args.shared_socket_run = n, shared
            started = start_server(args, run_dir)
            if started is None:
                return 1
            server, url, users = started
            wait_for_workers(url, n)
            bodies = folder / "bodies.txt"
            bodies.write_text("".join(json.dumps({"user_id": u, "k": 10}) + "\n" for u in users))
            label = f"{n} worker{'s' if n > 1 else ''}" + (", one shared socket" if shared else "")
            rows: list[dict] = []
            try:
                print(f"\n== {label}: {args.n_items:,} items at {url}", flush=True)
                print(f"{'conns':>6}{'req/s':>9}{'p50ms':>8}{'p99ms':>8}{'non2xx':>8}{'errors':>8}{'wrk cpu':>9}")
                for c in conns:
                    r = run_wrk(wrk, url, c, args.seconds, script, bodies)
                    rows.append(r)
                    print(f"{c:>6}{r['rps']:>9.0f}{r['p50']:>8.2f}{r['p99']:>8.2f}{r['non2xx']:>8}{r['errors']:>8}"
                          f"{100 * r['wrk_cpu']:>8.1f}%", flush=True)
            finally:
                stop_server(server)
            results.append((label, rows))
    finally:
        tmp.cleanup()
    print(f"\nbest rate with p99 <= {args.p99_ms:g} ms and every answer a 200, on {os.cpu_count()} cores:")
    base = best(results[0][1], args.p99_ms)
    for label, rows in results:
        b = best(rows, args.p99_ms)
        if b is None:
            print(f"  {label:<34} none met the target")
            continue
        ratio = f"{b['rps'] / base['rps']:.2f}x" if base else "-"
        print(f"  {label:<34} {b['rps']:>7.0f} req/s at {b['connections']} connections (p99 {b['p99']:.2f} ms)"
              f"  {ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
