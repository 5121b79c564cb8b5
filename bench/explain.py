"""Explanations on MovieLens-100K: faithfulness of the history attribution, and explain latency.

    python bench/explain.py [--run DIR] [--epochs 10] [--users 50] [--k 10] [--seed 0] [--threads 1] [overrides...]

Without ``--run`` it trains the default configuration (recency-pooled history
+ user features) into ``--out``. Pairs: ``--users`` users drawn with ``--seed``
x their top-``--k`` unseen items (50 x 10 = 500 pairs). For each pair the
top-attributed history item and a different random one are deleted from the
user's history and the user re-embedded; the table gives the mean score drop
of each and the share of pairs where the top item's drop is larger.
Latency: ``explain_recommendation`` in-process, and ``POST /explain`` through
the service's TestClient when ``twotower.serving.create_app`` exists.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import check_json_out, check_run, refuse_below, write_json_out  # noqa: E402

from twotower.evaluation.table import format_table  # noqa: E402
from twotower.explain import METHODS, explain_recommendation, faithfulness  # noqa: E402
from twotower.pipeline.artifacts import TrainedRun  # noqa: E402
from twotower.utils.runtime import set_threads, threads_from_env  # noqa: E402


def sample_pairs(run: TrainedRun, n_users: int, k: int, seed: int) -> list[tuple[int, int]]:
    """``n_users`` random users with history x their top-k unseen items."""
    rng = np.random.default_rng(seed)
    users = np.flatnonzero(run.history.lengths() > 0)
    users = np.sort(rng.choice(users, size=min(n_users, len(users)), replace=False))
    scores = run.scores_for_users(users)  # [U, I]
    pairs = []
    for b, u in enumerate(users):
        s = scores[b]
        s[run.history.of(u)] = -np.inf
        pairs += [(int(u), int(i)) for i in np.argsort(-s, kind="stable")[:k]]
    return pairs


def percentiles(ms: list[float]) -> dict[str, float]:
    a = np.asarray(ms)
    return {"p50_ms": float(np.percentile(a, 50)), "p99_ms": float(np.percentile(a, 99)), "mean_ms": float(a.mean())}


def library_latency(run: TrainedRun, pairs: list[tuple[int, int]], calls: int) -> dict[str, float]:
    explain_recommendation(run, user_row=pairs[0][0], item_row=pairs[0][1])  # warm-up
    ms = []
    for n in range(calls):
        u, i = pairs[n % len(pairs)]
        t0 = time.perf_counter()
        explain_recommendation(run, user_row=u, item_row=i)
        ms.append(1000 * (time.perf_counter() - t0))
    return percentiles(ms)


def http_latency(run_dir: Path, run: TrainedRun, pairs: list[tuple[int, int]], calls: int) -> dict[str, float] | str:
    try:
        from fastapi.testclient import TestClient

        from twotower.serving import create_app
    except ImportError as e:
        return f"n/a ({e})"
    ms = []
    with TestClient(create_app(run_dir)) as client:
        body = lambda u, i: {"user_id": run.user_vocab.id_at(u), "item_id": run.item_vocab.id_at(i)}  # noqa: E731
        r = client.post("/explain", json=body(*pairs[0]))
        if r.status_code != 200:
            return f"n/a (POST /explain answered {r.status_code}: {r.text[:200]})"
        for n in range(calls):
            t0 = time.perf_counter()
            r = client.post("/explain", json=body(*pairs[n % len(pairs)]))
            ms.append(1000 * (time.perf_counter() - t0))
            r.raise_for_status()
    return percentiles(ms)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", help="an existing run folder (default: train one)")
    ap.add_argument("--out", help="where to train when --run is not given (default runs/bench_explain)")
    ap.add_argument("--epochs", type=int, help="epochs to train when --run is not given (default 10)")
    ap.add_argument("--users", type=int, default=50)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--calls", type=int, default=300, help="explain calls timed per path")
    ap.add_argument("--threads", type=int)
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("overrides", nargs="*", metavar="section.key=value",
                    help="config overrides when training, e.g. model.user.history=mean")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("twotower.data.movielens").setLevel(logging.INFO)  # the line saying where the data came from
    refuse_below(args, ("threads",))  # --threads 0 ran on TWOTOWER_THREADS without a word
    set_threads(args.threads or threads_from_env() or 1)
    json_out = check_json_out(args.json)  # before training: a bad path is one line, not a late traceback
    refuse_below(args, ("epochs", "users", "k", "calls"))  # a zero was an IndexError once the run had been trained
    check_run(args.run)
    # the training flags beside --run trained nothing and were dropped without a word
    unused = [flag for flag, value in (("--out", args.out), ("--epochs", args.epochs)) if value is not None]
    unused += [f"the override {o!r}" for o in args.overrides]
    if args.run and unused:
        ap.error(f"{', '.join(unused)} set{'s' if len(unused) == 1 else ''} how to train a run, and --run {args.run} "
                 "is benchmarked as it was trained: drop them, or drop --run to train one here")

    if args.run:
        run_dir = Path(args.run)
    else:
        from twotower.config import load_config
        from twotower.pipeline.run import train_run

        run_dir = Path(args.out or "runs/bench_explain")
        base = ["data.dataset=movielens-100k", f"train.epochs={args.epochs or 10}", "train.progress=false"]
        cfg = load_config(overrides=base + list(args.overrides))
        t0 = time.perf_counter()
        train_run(cfg, run_dir)
        print(f"trained {run_dir} in {time.perf_counter() - t0:.0f}s")
    run = TrainedRun.load(run_dir)
    u = run.config.model.user
    pairs = sample_pairs(run, args.users, args.k, args.seed)
    pools = f" + the window's pools {list(u.extra_pools)}" if u.extra_pools else ""  # the default reads two
    print(f"run {run_dir}: user tower history={u.history}{pools} (L={u.history_len}, decay={u.recency_decay}), "
          f"features={u.use_features}, ids={u.use_id}; {len(pairs)} (user, top-{args.k} item) pairs, seed {args.seed}")

    rows = []
    for method in METHODS:
        t0 = time.perf_counter()
        r = faithfulness(run, pairs, args.seed, method=method)
        rows.append({**r, "seconds": time.perf_counter() - t0})
    print(format_table(rows, ["method", "pairs", "skipped", "mean_drop_top", "mean_drop_random", "share_top_greater",
                              "share_ties", "seconds"], title="faithfulness: delete the top-attributed vs a random history item"))
    print()
    lib = library_latency(run, pairs, args.calls)
    http = http_latency(run_dir, run, pairs, args.calls)
    lat = [{"path": "explain_recommendation (library)", **lib}]
    if isinstance(http, dict):
        lat.append({"path": "POST /explain (TestClient)", **http})
    print(format_table(lat, ["path", "p50_ms", "p99_ms", "mean_ms"], title=f"explain latency over {args.calls} calls",
                       floatfmt=".2f"))
    if not isinstance(http, dict):
        print(f"POST /explain: {http}")
    if args.json:
        write_json_out(json_out, json.dumps({"faithfulness": rows, "latency": lat}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
