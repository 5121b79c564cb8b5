"""Load test of `twotower serve` over a 1,000,000-item catalogue, on 127.0.0.1 only.

What is served: a small trained run's user tower (``--run``, or a tiny
synthetic run trained here in ~20 s, embedding dim 64) with its item
embeddings *replaced* by ``--n-items`` clustered synthetic unit vectors
(``--clusters`` Gaussian blobs, seeded, centred on the run's own item vectors
and then on random unit vectors, so its users' queries land among the items
they would score highly, as a trained model's do), an
autotuned IVF index over them (recall@10 >= 0.95 vs exact, FAISS training on
a 100k sample) and synthetic metadata (title, genres). Requests are
``POST /recommend {"user_id": <a real user of the run>, "k": 10}`` with
seen-item exclusion, i.e. the real hot path: cached user vector -> IVF search
with exclusions -> metadata -> JSON.

Phase 1 raises an open-loop arrival rate (requests sent on a fixed schedule,
not waiting for answers; a hand-written keep-alive HTTP/1.1 client, since
httpx costs milliseconds of CPU per request) step by step until p99 >= ``--p99-ms`` or errors
appear; the last passing rate is the sustainable rate (if none meets the p99
target, e.g. on busy shared cores, the highest rate served in full is used and
the miss is printed). Phase 2 sends twice
that for ``--overload-seconds``: the service must answer zero 5xx, shed the
excess with 429, and still be healthy afterwards. Every phase has a fixed
request count and a per-request timeout, so the script stops by itself.

With ``--workers 1,2`` the whole measurement runs once per worker count
(``twotower serve --workers N``'s machinery: the vectors and the saved index
memory-mapped by every worker) and ends with the throughput ratio at the same
p99 target. Each worker has its own 429 gate (``--max-concurrency`` and
``--max-queue`` are per worker).

    python bench/serve_load.py                      # full run (~4 min on 2 cores)
    python bench/serve_load.py --n-items 100000 --overload-seconds 10   # quick
    python bench/serve_load.py --n-items 200000 --workers 1,2 --overload-seconds 10
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from twotower.serving.middleware import WAIT_REJECTION_MARK

HERE = Path(__file__).resolve()
_WAIT_MARK = WAIT_REJECTION_MARK.encode()  # in a 429's body when the gate refused it for its expected wait


# ---------------------------------------------------------------------- server side
def synthetic_catalogue(n: int, dim: int, clusters: int, seed: int, anchors: np.ndarray | None = None) -> np.ndarray:
    """[N, D] unit vectors in ``clusters`` blobs (noise 0.35 around unit centres).

    The first centres are ``anchors`` (the run's own item vectors), the rest random: the run's user vectors
    then meet the catalogue where a trained model's would, next to the items they score highly, instead of
    probing an unrelated point cloud from outside (where every top 10 is a near-tie and no ANN recall means much).
    """
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, dim)).astype(np.float32)
    if anchors is not None:
        a = np.asarray(anchors, dtype=np.float32)[:clusters]
        centres[: len(a)] = a
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    out = np.empty((n, dim), dtype=np.float32)
    for s in range(0, n, 1 << 17):
        e = min(n, s + (1 << 17))
        c = rng.integers(0, clusters, e - s)
        v = centres[c] + 0.35 / np.sqrt(dim) * rng.standard_normal((e - s, dim)).astype(np.float32)
        out[s:e] = v / np.linalg.norm(v, axis=1, keepdims=True)
    return out


def train_tiny_run(folder: Path) -> Path:
    """A synthetic run (300 users with 20 tastes, 500 items, dim 64) whose user tower embeds the load's users."""
    from _common import train_synthetic_run as _train

    # small batches for enough steps on 6,000 interactions (the defaults' 512 collapse it in a few epochs)
    return _train(folder, users=300, items=500, per_user=20, tastes=20, epochs=10,
                  extra=("train.batch_size=64", "loss.temperature=0.1"))


def serve(args: argparse.Namespace) -> None:
    """Subprocess entry: build the 1M-item service and run uvicorn on 127.0.0.1."""
    import uvicorn

    from twotower.index import autotune
    from twotower.index.autotune import IndexPolicy
    from twotower.pipeline.artifacts import TrainedRun
    from twotower.serving import RecommenderService, ServiceSettings, create_app
    from twotower.utils.runtime import set_threads

    set_threads(1)
    t0 = time.perf_counter()
    run = TrainedRun.load(args.run)
    run_items = run.item_embeddings()
    dim = run_items.shape[1]
    vectors = synthetic_catalogue(args.n_items, dim, args.clusters, seed=1, anchors=run_items)
    ids = np.arange(args.n_items, dtype=np.int64)
    users = np.flatnonzero(run.history.lengths() > 0)[:200]
    queries = run.user_vectors(users).astype(np.float32)
    # the catalogue is seeded; the recall was tuned on this run's users, so the run is part of the key
    key = f"n{args.n_items}-c{args.clusters}-d{dim}-{run.fingerprint()[:12]}"
    cache = Path(args.index_cache) / key if args.index_cache else None
    if cache is not None and (cache / "tune.json").exists():  # saved with the index: a complete cache
        from twotower.index import load_index

        index = load_index(cache)
        recall = json.loads((cache / "tune.json").read_text())["recall"]
        if recall < IndexPolicy.target_recall and not args.allow_low_recall:
            # cached by a run with --allow-low-recall: the same rule as a fresh build below, not served silently
            print(f"SERVER refused: the index in {cache} has recall@10 {recall:.3f} < "
                  f"{IndexPolicy.target_recall}; pass --allow-low-recall to serve it anyway", flush=True)
            raise SystemExit(2)
        print(f"SERVER reuses the index autotuned before ({cache}): recall@10 {recall:.3f}", flush=True)
    else:
        set_threads(args.build_threads or os.cpu_count() or 1)  # the build may use every core; serving runs on one
        report = autotune(vectors, ids, queries, k=10, target_recall=IndexPolicy.target_recall, index="ivf",
                          max_train=100_000, latency_queries=50)
        set_threads(1)
        print(report.table(), flush=True)
        if not report.met_target and not args.allow_low_recall:
            # the service's own rule (RecommenderService.load): an index below its recall target is not served
            print(f"SERVER refused: {report.reason}; pass --allow-low-recall to serve it anyway", flush=True)
            raise SystemExit(2)
        index, recall = report.index, report.chosen.recall
        if cache is not None:  # the same catalogue (seeded) for the next worker count: build it once
            index.save(cache, model_fingerprint=run.fingerprint(), tuning={"recall": recall})
    index.model_fingerprint = run.fingerprint()
    settings = ServiceSettings(max_concurrency=args.max_concurrency, max_queue=args.max_queue, threads=1,
                               max_wait_ms=None if args.max_wait_ms <= 0 else args.max_wait_ms,
                               port=args.port, workers=args.workers)
    service = RecommenderService(run, index, settings=settings, catalog=synthetic_item_catalog(args.n_items),
                                 item_vectors=vectors)
    print(f"SERVER built in {time.perf_counter() - t0:.1f}s: {args.n_items:,} items, index {index.factory} "
          f"{index.search_params}, recall@10 {recall:.3f}", flush=True)
    if args.workers > 1:
        serve_workers(args, run, service, settings)
        return
    uvicorn.run(create_app(service=service, settings=settings), host="127.0.0.1", port=args.port,
                log_level="warning", access_log=False)


def synthetic_item_catalog(n: int):  # noqa: ANN201 - ItemCatalog (imported lazily)
    """Ids ``s0..`` with a title and pipe-joined genres each (the metadata every answer carries)."""
    from twotower.serving import ItemCatalog

    genres = ["Action", "Comedy", "Drama", "Horror", "Romance", "Sci-Fi"]
    cols = {
        "title": [f"Synthetic item {r}" for r in range(n)],
        "genres": [genres[r % 6] + ("|" + genres[(r // 6) % 6] if r % 5 == 0 else "") for r in range(n)],
    }
    return ItemCatalog([f"s{r}" for r in range(n)], cols)


def serve_workers(args: argparse.Namespace, run, service, settings) -> None:  # noqa: ANN001
    """``twotower serve --workers N``'s machinery over the synthetic catalogue: vectors and index mapped."""
    from dataclasses import asdict

    from twotower.serving.listen import bind_listening
    from twotower.serving.workers import WorkerSpec, run_workers, share_arrays, shared_dir

    # a Ctrl-C while the vectors or the index are written removes the folder, as `twotower serve` does
    with shared_dir() as shared:
        share_arrays(service, shared)
        service.index.save(shared / "index", model_fingerprint=run.fingerprint())
        spec = WorkerSpec(shared_dir=str(shared), settings=asdict(settings), run_dir=str(args.run),
                          index_dir=str(shared / "index"), fingerprint=run.fingerprint())
        del service
        # bound as `twotower serve --workers N` binds (one SO_REUSEPORT socket a worker, where the kernel spreads
        # connections over them); --shared-socket: the one socket every worker accepted on before
        copies = 1 if getattr(args, "shared_socket", False) else args.workers
        sockets = bind_listening("127.0.0.1", args.port, every_address=False, copies=copies)
        run_workers(spec, workers=args.workers, log_level="warning", factory="serve_load:worker_app",
                    sockets=sockets)


def worker_app():  # noqa: ANN201 - FastAPI
    """uvicorn app factory of each worker (``serve_load:worker_app``): the parent's spec, this catalogue."""
    from twotower.serving import ServiceSettings, create_app
    from twotower.serving.workers import SPEC_ENV, ITEM_VECTORS, WorkerSpec, open_shared_service

    spec = WorkerSpec.read(os.environ[SPEC_ENV])
    n_items = np.load(Path(spec.shared_dir) / ITEM_VECTORS, mmap_mode="r", allow_pickle=False).shape[0]
    service = open_shared_service(spec, catalog=synthetic_item_catalog(n_items))
    return create_app(service=service, settings=ServiceSettings(**spec.settings))


# ---------------------------------------------------------------------- load side
async def _connection_worker(host: str, port: int, jobs: asyncio.Queue, bodies: list[bytes], out: list,
                             timeout: float, reasons: dict[str, int] | None = None) -> None:
    """One keep-alive HTTP/1.1 connection: take (scheduled time, i) jobs, send, read the answer.

    ``reasons`` counts the 429s by the gate's reason, read from the answer: ``wait`` (the expected wait
    for a compute slot was over --max-wait-ms) or ``queue_full`` (max_concurrency + max_queue admitted).

    Hand-written HTTP keeps the load generator cheap (httpx costs several ms of
    CPU per request, which on 2 shared cores measures the client, not the service).
    """
    reader = writer = None
    while True:
        job = await jobs.get()
        if job is None:
            break
        scheduled, i = job
        try:
            if writer is None:
                reader, writer = await asyncio.open_connection(host, port)
            writer.write(bodies[i % len(bodies)])
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
            status = head[9:12].decode()
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            body = await asyncio.wait_for(reader.readexactly(length), timeout)
            out.append((status, time.perf_counter() - scheduled))
            if status == "429" and reasons is not None:
                why = "wait" if _WAIT_MARK in body else "queue_full"
                reasons[why] = reasons.get(why, 0) + 1
            if b"connection: close" in head.lower():
                writer.close()
                reader = writer = None
        except asyncio.TimeoutError:
            out.append(("timeout", time.perf_counter() - scheduled))
            if writer is not None:
                writer.close()
            reader = writer = None
        except (OSError, asyncio.IncompleteReadError) as e:
            out.append((type(e).__name__, time.perf_counter() - scheduled))
            reader = writer = None
    if writer is not None:
        writer.close()


async def phase(url: str, users: list[str], rate: float, seconds: float, timeout: float, connections: int = 64) -> dict:
    """Open-loop: ``rate * seconds`` requests on a fixed schedule over ``connections`` keep-alive connections.

    Latency runs from each request's *scheduled* send time, so time spent
    waiting for a free connection counts (no coordinated omission).
    """
    host, port = url.split("//")[1].split(":")
    bodies = []
    for u in users:
        payload = json.dumps({"user_id": u, "k": 10}).encode()
        bodies.append(b"POST /recommend HTTP/1.1\r\nHost: " + host.encode() + b"\r\nContent-Type: application/json"
                      b"\r\nContent-Length: " + str(len(payload)).encode() + b"\r\n\r\n" + payload)
    n = max(1, int(rate * seconds))
    jobs: asyncio.Queue = asyncio.Queue()
    out: list = []
    reasons: dict[str, int] = {}
    workers = [asyncio.create_task(_connection_worker(host, int(port), jobs, bodies, out, timeout, reasons))
               for _ in range(connections)]
    t0 = time.perf_counter()
    for i in range(n):
        at = t0 + i / rate
        delay = at - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        jobs.put_nowait((at, i))
    for _ in workers:
        jobs.put_nowait(None)
    await asyncio.gather(*workers)
    wall = time.perf_counter() - t0
    status: dict[str, int] = {}
    for key, _ in out:
        status[key] = status.get(key, 0) + 1
    ms = np.asarray([lat for key, lat in out if key == "200"]) * 1e3
    ok = status.get("200", 0)
    return {
        "rate": rate, "sent": n, "ok": ok, "429": status.get("429", 0),
        "5xx": sum(v for k, v in status.items() if k.isdigit() and k.startswith("5")),
        "other": sum(v for k, v in status.items() if k not in ("200", "429") and not k.startswith("5")),
        "ok_rps": ok / wall, "p50": float(np.percentile(ms, 50)) if ok else float("nan"),
        "p99": float(np.percentile(ms, 99)) if ok else float("nan"), "status": status, "reasons_429": reasons,
        "lat_ok_ms": ms.tolist(),  # for callers that aggregate several phases (bench/soak.py)
    }


def row(name: str, r: dict) -> str:
    return (f"{name:<12}{r['rate']:>8.0f}{r['sent']:>8}{r['ok']:>8}{r['429']:>7}{r['5xx']:>6}{r['other']:>7}"
            f"{r['ok_rps']:>9.0f}{r['p50']:>9.2f}{r['p99']:>9.2f}")


def error_note(r: dict) -> str:
    """What a ramp step answered with 5xx says: the service failed (its log has the traceback), whatever the rate."""
    return (f"the service answered {r['5xx']} of {r['sent']} requests at {r['rate']:.0f}/s with a 5xx (statuses "
            f"{r['status']}): an error in the service, not its load; the server's log above has the traceback")


HEADER = f"{'phase':<12}{'target':>8}{'sent':>8}{'200':>8}{'429':>7}{'5xx':>6}{'other':>7}{'ok/s':>9}{'p50ms':>9}{'p99ms':>9}"


async def load(args: argparse.Namespace, url: str, users: list[str], summary: dict | None = None) -> int:
    """Phase 1 and 2 against ``url``; 0 when the overload was shed cleanly. Fills ``summary`` (rates, p99s)."""
    import httpx

    print(HEADER, flush=True)
    await phase(url, users, 50, 2, args.timeout)  # warm-up (not reported)
    passed: dict | None = None  # highest rate meeting the p99 target
    kept_up: dict | None = None  # highest rate served in full (no errors, >= 90% of the rate)
    rate = args.start_rate
    while rate <= args.max_rate:
        r = await phase(url, users, rate, args.step_seconds, args.timeout)
        full = r["ok"] == r["sent"] and r["ok_rps"] >= 0.9 * rate and r["p99"] < 20 * args.p99_ms
        good = full and r["p99"] < args.p99_ms
        print(row("find" + (" ok" if good else " slow" if full else " FAIL"), r), flush=True)
        if r["429"]:
            print(f"  the 429s by the gate's reason: {r['reasons_429']}", flush=True)
        if not full:
            if r["5xx"]:  # an error of the service, not the load: the ramp's verdict would blame the rate
                print(error_note(r), flush=True)
                return 1
            break
        kept_up = r
        passed = r if good else passed
        rate *= args.step
    if kept_up is None:
        print(f"the service could not keep up with {args.start_rate}/s; lower --start-rate")
        return 1
    if passed is None:
        print(f"NOTE: no rate met p99 < {args.p99_ms:g} ms on this machine; using the highest rate served in full")
    chosen = kept_up if args.sustainable == "full" else (passed or kept_up)
    sustainable = chosen["rate"]
    over_rate = args.overload_rate or 2 * sustainable
    over = await phase(url, users, over_rate, args.overload_seconds, args.timeout)
    print(row("overload", over), flush=True)
    async with httpx.AsyncClient(base_url=url, timeout=5) as c:
        await asyncio.sleep(1)
        health = (await c.get("/healthz")).status_code
        after = await c.post("/recommend", json={"user_id": users[0], "k": 10})
        metrics = (await c.get("/metrics")).text
    rejected = next((line.split()[-1] for line in metrics.splitlines()
                     if line.startswith("twotower_overload_rejections_total")), "?")
    label = (f"p99 < {args.p99_ms:g} ms, no errors" if chosen is passed else
             "highest rate served in full, no 429" if args.sustainable == "full" else
             "served in full; p99 target NOT met")
    print(f"\nsustainable rate ({label}): {sustainable:.0f} req/s, "
          f"p50 {chosen['p50']:.2f} ms, p99 {chosen['p99']:.2f} ms")
    print(f"overload at {over_rate:.0f} req/s for {args.overload_seconds:g}s: {over['5xx']} 5xx, "
          f"{over['429']} answered 429 (server counted {rejected}; by reason {over['reasons_429']}), {over['ok']} served, "
          f"statuses {over['status']}")
    print(f"after overload: /healthz {health}, /recommend {after.status_code}")
    ok = over["5xx"] == 0 and health == 200 and after.status_code == 200
    print("PASS" if ok else "FAIL")
    if summary is not None:
        summary.update(rate=sustainable, met_p99=chosen is passed, p50=chosen["p50"], p99=chosen["p99"],
                       ok_rps=chosen["ok_rps"], over_rate=over_rate, over_429=over["429"], over_5xx=over["5xx"],
                       over_ok_rps=over["ok_rps"], over_p99=over["p99"], passed=ok)
    return 0 if ok else 1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(args: argparse.Namespace, run_dir: Path):  # noqa: ANN201 - (Popen, url, users) | None
    """Start the service over ``args.n_items`` items in a subprocess on 127.0.0.1; wait until it is ready.

    Returns ``(process, url, user ids)``, or None (after stopping it) when it exits or is not ready in time.
    Shared by this script and bench/soak.py.
    """
    import httpx

    from twotower.pipeline.artifacts import TrainedRun

    run = TrainedRun.load(run_dir)
    users = [run.user_vocab.id_at(r) for r in np.flatnonzero(run.history.lengths() > 0)]
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, str(HERE), "--serve", "--run", str(run_dir), "--port", str(port),
           "--n-items", str(args.n_items), "--clusters", str(args.clusters),
           "--max-concurrency", str(args.max_concurrency), "--max-queue", str(args.max_queue),
           "--max-wait-ms", str(args.max_wait_ms),
           "--workers", str(getattr(args, "workers", 1)), "--build-threads", str(args.build_threads)]
    if args.index_cache:
        cmd += ["--index-cache", str(args.index_cache)]
    if args.allow_low_recall:
        cmd.append("--allow-low-recall")
    if getattr(args, "shared_socket_run", False):  # bench/serve_scaling.py: the workers on one shared socket
        cmd.append("--shared-socket")
    env = dict(os.environ, TWOTOWER_THREADS="1", OMP_NUM_THREADS="1")
    server = subprocess.Popen(cmd, env=env)
    deadline = time.time() + args.startup_timeout
    while True:
        if server.poll() is not None:
            print(f"server exited with {server.returncode} before it was ready")
            return None
        try:
            if httpx.get(url + "/readyz", timeout=1).status_code == 200:
                return server, url, users
        except httpx.HTTPError:
            pass
        if time.time() > deadline:
            print("server not ready in time")
            stop_server(server)
            return None
        time.sleep(1)


def stop_server(server: subprocess.Popen) -> None:
    server.send_signal(signal.SIGINT)
    try:
        server.wait(20)
    except subprocess.TimeoutExpired:
        server.kill()


def add_server_args(p: argparse.ArgumentParser, *, startup_timeout: float) -> None:
    """The flags :func:`start_server` passes on to the server process (this script's and bench/soak.py's)."""
    from twotower.serving import ServiceSettings

    p.add_argument("--n-items", type=int, default=1_000_000)
    p.add_argument("--clusters", type=int, default=2000)
    p.add_argument("--max-concurrency", type=int, default=2)
    p.add_argument("--max-queue", type=int, default=8)
    p.add_argument("--max-wait-ms", type=float, default=ServiceSettings().max_wait_ms or 0.0,
                   help="the 429 gate's bound on a request's expected wait for a compute slot "
                        "(default: the service's, %(default)s ms; 0: bounded by --max-queue only)")
    p.add_argument("--startup-timeout", type=float, default=startup_timeout)
    p.add_argument("--allow-low-recall", action="store_true",
                   help="serve the autotuned index even if it misses recall@10 0.95 (refused otherwise)")
    p.add_argument("--index-cache", help="folder keeping the autotuned index, so later runs and worker counts "
                                          "reuse it instead of training it again (the catalogue is seeded)")
    p.add_argument("--build-threads", type=int, default=0,
                   help="threads for the index build (default 0: every core; serving always runs on one)")


def check_server_args(args: argparse.Namespace) -> None:
    """The server's flags checked before the run is trained and the server started: a zero size or an
    --index-cache that is a file was a traceback from the server process and "server exited with 1"."""
    from twotower.cli.paths import check_output_dir
    from twotower.errors import ConfigError

    from _common import refuse_below, refuse_range

    refuse_below(args, ("n_items", "clusters", "max_concurrency"))
    # NaN passed every comparison: --max-wait-ms nan went to the server, --startup-timeout nan waited for nothing
    refuse_range(args, "max_wait_ms", 0, 3_600_000)  # 0: off; the server's own bound above
    refuse_range(args, "startup_timeout", 0, lo_open=True)
    if args.index_cache:
        try:
            check_output_dir(args.index_cache, "--index-cache")
        except ConfigError as e:
            raise SystemExit(f"error: {e}") from None


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run", help="trained run whose user tower is used (default: a tiny synthetic run)")
    add_server_args(p, startup_timeout=600)
    p.add_argument("--workers", default="1",
                   help="server processes; a comma list (1,2 or 1,2,1,2) measures each in turn and prints the "
                        "ratios to the first")
    p.add_argument("--start-rate", type=float, default=50)
    p.add_argument("--step", type=float, default=1.5, help="rate multiplier between phase-1 steps")
    p.add_argument("--max-rate", type=float, default=5000)
    p.add_argument("--step-seconds", type=float, default=5)
    p.add_argument("--overload-seconds", type=float, default=60)
    p.add_argument("--overload-rate", type=float, default=None,
                   help="phase-2 rate (default: twice the sustainable rate)")
    p.add_argument("--p99-ms", type=float, default=10.0)
    p.add_argument("--sustainable", choices=["p99", "full"], default="p99",
                   help="sustainable rate: the highest meeting --p99-ms (default) or the highest served in full "
                        "without 429s ('full'; then 2x it really overloads)")
    p.add_argument("--timeout", type=float, default=5.0, help="per-request client timeout (s)")
    p.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--shared-socket", action="store_true", help=argparse.SUPPRESS)  # bench/serve_scaling.py's A/B
    args = p.parse_args()
    try:
        counts = [int(w) for w in str(args.workers).split(",") if w]
    except ValueError:
        raise SystemExit(f"error: --workers: expected worker counts like 1 or 1,2, got {args.workers!r}") from None
    if not counts or min(counts) < 1:
        raise SystemExit(f"error: --workers: expected positive worker counts, got {args.workers!r}")
    if args.serve:
        args.workers = counts[0]
        serve(args)
        return 0
    from _common import check_run, refuse_range

    check_server_args(args)
    # the ramp multiplies the rate by --step: 1 or less never ends while the service keeps up. Refused in the one
    # line of the server's flags (check_server_args): argparse's usage and exit 2 read as another kind of mistake
    # (--overload-rate: None, twice the sustainable rate, passes)
    for flag, lo in (("step", 1), ("start_rate", 0), ("max_rate", 0), ("step_seconds", 0), ("overload_seconds", 0),
                     ("overload_rate", 0), ("p99_ms", 0), ("timeout", 0)):
        refuse_range(args, flag, lo, lo_open=True)
    check_run(args.run)
    tmp = tempfile.TemporaryDirectory(prefix="serve_load_")
    run_dir = Path(args.run) if args.run else train_tiny_run(Path(tmp.name))
    results: list[tuple[int, dict]] = []  # (workers, summary) in the order measured
    code = 0
    try:
        for n in counts:
            args.workers = n
            started = start_server(args, run_dir)
            if started is None:
                return 1
            server, url, users = started
            try:
                print(f"\n== {n} worker(s): service up at {url}: {args.n_items:,} items; load = POST /recommend "
                      f"k=10 for {len(users)} users", flush=True)
                results.append((n, {}))
                code |= asyncio.run(load(args, url, users, results[-1][1]))
            finally:
                stop_server(server)
    finally:
        tmp.cleanup()
    if len(results) > 1:
        print_workers_table(results, args, os.cpu_count() or 0)
    return code


def print_workers_table(results: list[tuple[int, dict]], args: argparse.Namespace, cores: int) -> None:
    """Throughput per worker count at the same p99 target, and how each shed its overload rate."""
    first, head = results[0]
    base = head.get("rate") or float("nan")
    print(f"\nworkers on {cores} cores, {args.n_items:,} items, p99 target {args.p99_ms:g} ms, "
          f"max_concurrency {args.max_concurrency} + max_queue {args.max_queue} per worker, "
          f"max_wait_ms {args.max_wait_ms or 'off'}")
    print(f"{'workers':>7}{'rate/s':>9}{'x ' + str(first):>7}{'p50ms':>8}{'p99ms':>8}{'met':>5}"
          f"{'over/s':>8}{'429':>7}{'5xx':>5}{'200/s':>8}{'200 p99':>9}")
    for n, r in results:
        if not r:
            continue
        print(f"{n:>7}{r['rate']:>9.0f}{r['rate'] / base:>6.2f}x{r['p50']:>8.2f}{r['p99']:>8.2f}"
              f"{'yes' if r['met_p99'] else 'no':>5}{r['over_rate']:>8.0f}{r['over_429']:>7}{r['over_5xx']:>5}"
              f"{r['over_ok_rps']:>8.0f}{r['over_p99']:>9.2f}")


if __name__ == "__main__":
    sys.exit(main())
