"""Scale-out benchmark: data-parallel training and a distributed index build, 1 vs 2 processes.

(a) Training: ``torchrun --standalone --nproc-per-node W -m twotower train``
on MovieLens-100K (dropout and history dropout 0, so 1 and 2 processes run the same global
batches and should print the same losses up to float32 rounding); reports
examples/s from the run's ``log.jsonl`` (``train_seconds`` per epoch) and the
loss per epoch. On 2 shared cores no speed-up is expected: the point is equal
results.

(b) Index: a synthetic catalogue (default 10,000,000 x 64, 4,096 Gaussian
clusters, L2-normalised) generated chunk by chunk from a seed -- chunk ``j``
of 100,000 rows always has the same content, whichever rank makes it, and the
catalogue never exists in memory as float32 (2.56 GB). W gloo ranks
(``mp.spawn``) run :func:`twotower.index.distributed_build.build_index_distributed`:
rank 0 trains ``IVF4096,PQ16`` on a sample, every rank adds its shard in
chunks, rank 0 merges. Reports per-rank peak RSS (psutil, sampled) and
times; recall of the merged index vs the exact top-10 over the whole
catalogue (computed by streaming the chunks again) on a query sample:
R10@10 (top-10 overlap) and R10@100 (true top-10 within the index's top 100).

    .venv/bin/python bench/scale_out.py                            # both parts, 1 and 2 processes
    .venv/bin/python bench/scale_out.py --skip-train --n 1000000    # quick index run
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PeakRSS, int_list, refuse_below, refuse_range  # noqa: E402

GEN_CHUNK = 100_000  # rows per generated chunk: the unit of content (and of work per add call)


# ---------------------------------------------------------------- (a) training
def train_once(world: int, epochs: int, out: Path, threads: int) -> dict:
    env = {**os.environ, "TWOTOWER_THREADS": str(threads), "OMP_NUM_THREADS": str(threads)}
    env.pop("WORLD_SIZE", None)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(world),
           "-m", "twotower", "-q", "train", "--dataset", "movielens-100k", "--out", str(out), "--epochs", str(epochs),
           "--no-eval", "--no-progress", "model.user.dropout=0", "model.item.dropout=0", "train.patience=100",
           "train.history_dropout=0"]  # each rank draws its own masks, as for MLP dropout
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"training with {world} processes failed:\n{proc.stderr[-3000:]}")
    log = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    n_examples = sum(1 for _ in open(out / "data" / "train.csv")) - 1  # causal: one example per interaction
    train_s = [r["train_seconds"] for r in log]
    return {"world": world, "examples": n_examples, "examples_per_s": n_examples / np.mean(train_s),
            "epoch_s": float(np.mean(train_s)), "wall_s": wall, "loss": [r["loss"] for r in log],
            "acc": [r["inbatch_accuracy"] for r in log]}


# ---------------------------------------------------------------- (b) index build
def _normalise(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True).clip(1e-12)).astype(np.float32)


def _centers(seed: int, clusters: int, dim: int) -> np.ndarray:
    return _normalise(np.random.default_rng([seed, 0]).standard_normal((clusters, dim), dtype=np.float32))


def make_chunk(j: int, n: int, centers: np.ndarray, seed: int, noise: float = 0.6) -> np.ndarray:
    """Rows ``[j * GEN_CHUNK, ...)`` of the catalogue ``[C, D]``: the same bytes on any rank."""
    rng = np.random.default_rng([seed, 1, j])
    m = min(GEN_CHUNK, n - j * GEN_CHUNK)
    dim = centers.shape[1]
    lab = rng.integers(0, centers.shape[0], m)
    return _normalise(centers[lab] + (noise / np.sqrt(dim)) * rng.standard_normal((m, dim), dtype=np.float32))


def _queries(args: argparse.Namespace, centers: np.ndarray) -> np.ndarray:
    rng = np.random.default_rng([args.seed, 2])
    lab = rng.integers(0, centers.shape[0], args.queries)
    x = centers[lab] + (0.6 / np.sqrt(args.dim)) * rng.standard_normal((args.queries, args.dim), dtype=np.float32)
    return _normalise(x)


def _index_worker(rank: int, world: int, port: int, args: argparse.Namespace, out_dir: str) -> None:
    import faiss
    import psutil
    import torch

    from twotower.index.distributed_build import build_index_distributed, shard_range
    from twotower.training import distributed as tdist

    torch.set_num_threads(args.threads)
    faiss.omp_set_num_threads(args.threads)
    # a sample short of the quantizer's training points is said once, above the table (main), not once per build
    logging.getLogger("twotower.index.distributed_build").setLevel(logging.ERROR)
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    if world > 1:
        tdist.init_from_env("gloo")
    centers = _centers(args.seed, args.clusters, args.dim)
    n_chunks = -(-args.n // GEN_CHUNK)

    def vectors_fn(shard: int, n_shards: int):
        lo, hi = shard_range(n_chunks, shard, n_shards)  # whole generated chunks per rank
        for j in range(lo, hi):
            x = make_chunk(j, args.n, centers, args.seed)
            yield np.arange(j * GEN_CHUNK, j * GEN_CHUNK + len(x), dtype=np.int64), x

    def train_sample() -> np.ndarray:
        picks = np.linspace(0, n_chunks - 1, -(-args.train_size // GEN_CHUNK)).round().astype(int)
        return np.concatenate([make_chunk(int(j), args.n, centers, args.seed) for j in picks])[: args.train_size]

    base_mb = psutil.Process().memory_info().rss / 2**20
    t0 = time.perf_counter()
    with PeakRSS() as peak:
        index = build_index_distributed(vectors_fn, args.factory, train_sample, None, n_total=args.n)
    stats = {"rank": rank, "world": world, "seconds": time.perf_counter() - t0, "peak_rss_mb": peak.peak_mb,
             "base_rss_mb": base_mb}
    if index is not None:
        stats.update({k: v for k, v in index._build_params.items() if k.endswith("seconds")})
        stats["ntotal"] = len(index)
        queries = _queries(args, centers)
        truth = np.load(Path(out_dir) / "truth.npy", allow_pickle=False)
        for nprobe in args.nprobe:
            index.set_search_params(nprobe=nprobe)
            found = index.search(queries, 100).ids  # [Q, 100]
            stats[f"R10@10_np{nprobe}"] = float(np.mean([len(set(f[:10]) & set(t)) / 10 for f, t in zip(found, truth)]))
            # the usual IVF-PQ yardstick: the true top-10 found among the index's top 100
            stats[f"R10@100_np{nprobe}"] = float(np.mean([len(set(f) & set(t)) / 10 for f, t in zip(found, truth)]))
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps(stats))
    tdist.cleanup()
    os._exit(0)


def exact_truth(args: argparse.Namespace) -> np.ndarray:
    """Exact top-10 ids of the queries over the whole catalogue, streamed chunk by chunk."""
    centers = _centers(args.seed, args.clusters, args.dim)
    q = _queries(args, centers)
    best_s = np.full((len(q), 10), -np.inf, np.float32)
    best_i = np.full((len(q), 10), -1, np.int64)
    for j in range(-(-args.n // GEN_CHUNK)):
        x = make_chunk(j, args.n, centers, args.seed)
        s = q @ x.T  # [Q, C]
        # a last chunk of 10 rows or fewer (--n 100005) is taken whole: argpartition's kth=10 was out of its bounds
        top = np.argpartition(-s, 10, axis=1)[:, :10] if s.shape[1] > 10 else np.broadcast_to(np.arange(s.shape[1]),
                                                                                              s.shape)
        cand_s = np.concatenate([best_s, np.take_along_axis(s, top, 1)], axis=1)
        cand_i = np.concatenate([best_i, top + j * GEN_CHUNK], axis=1)
        keep = np.argsort(-cand_s, axis=1, kind="stable")[:, :10]
        best_s, best_i = np.take_along_axis(cand_s, keep, 1), np.take_along_axis(cand_i, keep, 1)
    return best_i


def _training_shortfall(args: argparse.Namespace) -> str | None:
    """One line when ``--train-size`` is short of the training vectors the factory's k-means want (FAISS said it
    once per PQ sub-quantiser and build, 16 lines for PQ16 over the table); None when it is enough."""
    import faiss

    from twotower.index.faiss_index import min_training_points, resolve_factory

    resolved = resolve_factory(args.factory, args.n, args.dim)
    need = min_training_points(faiss.index_factory(args.dim, resolved, faiss.METRIC_INNER_PRODUCT))
    if need <= args.train_size:
        return None
    return (f"note: {resolved} wants {need:,} training vectors (39 per centroid), --train-size gives "
            f"{args.train_size:,}: FAISS trains it on fewer, and the recall below includes what that costs")


def build_once(world: int, args: argparse.Namespace, work: Path) -> list[dict]:
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(_index_worker, args=(world, port, args, str(work)), nprocs=world, join=True)
    return [json.loads((work / f"rank{r}.json").read_text()) for r in range(world)]


# ---------------------------------------------------------------- main
def counts(flag: str, text: str) -> list[int]:
    """``--worlds 1,2`` / ``--nprobe 16,64``: a comma list of integers of at least 1, refused in the one line of every
    bench flag (``error: --worlds: must be at least 1, got 0``); argparse's usage lines and exit status 2 read as
    another kind of mistake."""
    return int_list(flag, text, 1)


def check_numbers(args: argparse.Namespace) -> None:
    """The number flags refused in the one line of every bench flag, before any work. They were not checked: after
    the training part had run, --queries 0 reported a recall of nan, --seed -1, --clusters 0 and --train-size 0 were
    numpy tracebacks, --threads 0 torch's ("set_num_threads expects a positive integer"), and --dim 0 killed the
    rank (SIGFPE)."""
    refuse_below(args, ("threads", "epochs", "dim", "clusters", "train_size", "queries"))
    refuse_range(args, "n", 10)  # the recall is of the exact top 10: a smaller catalogue has no 10 to find
    refuse_range(args, "seed", 0)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--worlds", default="1,2", help="process counts to compare")
    p.add_argument("--threads", type=int, default=1, help="torch/FAISS threads per process")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--n", type=int, default=10_000_000, help="catalogue size")
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--clusters", type=int, default=4096)
    p.add_argument("--factory", default="IVF4096,PQ16")
    p.add_argument("--train-size", type=int, default=4096 * 40, help="vectors the quantizer is trained on")
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--nprobe", default="16,64")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--skip-train", action="store_true")
    p.add_argument("--skip-index", action="store_true")
    args = p.parse_args()
    worlds = counts("--worlds", args.worlds)
    args.nprobe = counts("--nprobe", args.nprobe)
    check_numbers(args)

    with tempfile.TemporaryDirectory(prefix="scale_out_") as tmp:
        tmp_path = Path(tmp)
        if not args.skip_train:
            # folders by position: a repeated count (1,2,1,2: interleaved for the noise) gets its own
            rows = [train_once(w, args.epochs, tmp_path / f"run{i}-{w}", args.threads) for i, w in enumerate(worlds)]
            print(f"\n(a) training, MovieLens-100K, {args.epochs} epoch{'s' if args.epochs != 1 else ''}, global batch "
                  "512, dropout 0, "
                  f"{args.threads} thread(s) per process")
            print(f"{'procs':>5}  {'examples':>8}  {'epoch_s':>7}  {'examples/s':>10}  {'wall_s':>6}  loss per epoch / acc")
            for r in rows:
                print(f"{r['world']:>5}  {r['examples']:>8}  {r['epoch_s']:>7.1f}  {r['examples_per_s']:>10.0f}  "
                      f"{r['wall_s']:>6.1f}  {' '.join(f'{v:.6f}' for v in r['loss'])} / "
                      f"{' '.join(f'{v:.4f}' for v in r['acc'])}")
            if len(rows) > 1:
                diff = max(abs(a - b) for r in rows[1:] for a, b in zip(r["loss"], rows[0]["loss"]))
                print(f"max |loss difference| vs {rows[0]['world']} process(es): {diff:.2e}")
            sys.stdout.flush()
        if not args.skip_index:
            t0 = time.perf_counter()
            np.save(tmp_path / "truth.npy", exact_truth(args), allow_pickle=False)
            truth_s = time.perf_counter() - t0
            print(f"\n(b) index build: {args.n:,} x {args.dim} synthetic catalogue (generated per chunk of "
                  f"{GEN_CHUNK:,}; float32 in full would be {args.n * args.dim * 4 / 2**30:.2f} GiB), "
                  f"{args.factory}, train sample {args.train_size:,}, {args.threads} thread(s) per rank; "
                  f"exact top-10 for {args.queries} queries streamed in {truth_s:.0f}s")
            short = _training_shortfall(args)
            if short:
                print(short)
            recall_cols = [f"R10@{k}_np{v}" for v in args.nprobe for k in (10, 100)]
            print(f"{'procs':>5}  {'rank':>4}  {'total_s':>7}  {'train_s':>7}  {'add_s':>6}  {'merge_s':>7}  "
                  f"{'base_MB':>7}  {'peak_MB':>7}  " + "  ".join(f"{c:>12}" for c in recall_cols))
            for i, w in enumerate(worlds):
                work = tmp_path / f"index{i}-{w}"
                work.mkdir()
                (work / "truth.npy").symlink_to(tmp_path / "truth.npy")
                for s in build_once(w, args, work):
                    rec = "  ".join(f"{s[c]:>12.3f}" if c in s else f"{'':>12}" for c in recall_cols)
                    print(f"{w:>5}  {s['rank']:>4}  {s['seconds']:>7.1f}  {s.get('train_seconds', float('nan')):>7.1f}  "
                          f"{s.get('add_seconds', float('nan')):>6.1f}  {s.get('merge_seconds', float('nan')):>7.1f}  "
                          f"{s['base_rss_mb']:>7.0f}  {s['peak_rss_mb']:>7.0f}  {rec}")
                sys.stdout.flush()
            print("train/add/merge seconds are rank 0's build phases (add on rank 0 = its own shard); "
                  "peak_MB = sampled RSS peak of that rank during the build, base_MB = RSS before it; "
                  "R10@k_npP = share of the exact top-10 found in the merged index's top k at nprobe P")


if __name__ == "__main__":
    main()
