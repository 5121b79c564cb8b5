"""`twotower index build|info`: an autotuned vector index over a run's item embeddings (imports are lazy)."""
from __future__ import annotations

import argparse
import os
import json
from pathlib import Path

from twotower.errors import ConfigError

__all__ = ["register", "cmd_index_build", "cmd_index_info"]

TUNE_JSON = "tune.json"
TUNE_PNG = "recall_qps.png"


def register(sub: argparse._SubParsersAction) -> None:
    from twotower.cli.main import add_no_verify
    from twotower.index.autotune import IndexPolicy  # every default is declared there, once

    pol = IndexPolicy()
    p = sub.add_parser("index", help="build and inspect the vector index a run is served from")
    isub = p.add_subparsers(dest="index_cmd", required=True)
    b = isub.add_parser("build", help="autotune an index over the run's item embeddings and save it")
    # --run-dir: under torchrun, `--run` is taken as an abbreviation of torchrun's own --run-path
    b.add_argument("--run", "--run-dir", dest="run", required=True, help="run folder (alias --run-dir for torchrun)")
    b.add_argument("--index", default="auto",
                   help="auto (exact search when it fits --exact-budget-ms, else the fastest of flat, ivf, hnsw, ivfpq "
                        "meeting the recall target), flat, ivf, hnsw, ivfpq, exact, or a FAISS factory string; each "
                        "is searched at its cheapest setting (smallest nprobe / efSearch) meeting the target")
    b.add_argument("--exact-budget-ms", type=float, default=None,
                   help="with --index auto: choose exact search when its single-query p99 is at most this many ms "
                        f"(default {pol.exact_p99_ms:g})")
    b.add_argument("--target-recall", type=float, default=pol.target_recall,
                   help="recall@k against exact search (default %(default)s)")
    b.add_argument("--k", type=int, default=pol.k, help="k of the recall target (default %(default)s)")
    b.add_argument("--queries", type=int, default=pol.tune_queries,
                   help="user vectors sampled as tuning queries (default %(default)s)")
    b.add_argument("--max-train", type=int, default=None, help="cap on FAISS training vectors (default: every vector in one process, 100,000 "
                   "under torchrun), raised to FAISS's 39 per IVF list or PQ centroid")
    b.add_argument("--seed", type=int, default=pol.seed,
                   help="seed of the query sample, the training sample and FAISS's k-means / HNSW draws "
                        "(default %(default)s)")
    b.add_argument("--out", help="index folder (default RUN/index, which `twotower serve` picks up)")
    b.add_argument("--threads", type=int, help="torch/FAISS threads (default: TWOTOWER_THREADS or the library's)")
    b.add_argument("--nprobe", type=int, default=None,
                   help="pin nprobe of an IVF index (--index ivf, ivfpq or an IVF factory string; under torchrun the "
                        "merged one): measured and recorded as given, not swept (default: the smallest nprobe "
                        "reaching --target-recall)")
    b.add_argument("--ef-search", type=int, default=None,
                   help="pin efSearch of an HNSW index (--index hnsw or an HNSW factory string), measured and recorded "
                        "as given, not swept (default: the smallest efSearch reaching --target-recall)")
    add_no_verify(b)
    b.set_defaults(func=cmd_index_build)
    i = isub.add_parser("info", help="describe the saved index of a run and check it matches the model")
    i.add_argument("--run", required=True, help="run folder whose index to describe")
    i.add_argument("--index", dest="index_dir", help="index folder (default RUN/index)")
    i.add_argument("--json", action="store_true", help="print meta.json (+ the tuning summary) as JSON")
    add_no_verify(i)
    i.set_defaults(func=cmd_index_info)


def _policy(args: argparse.Namespace):  # noqa: ANN202 - IndexPolicy
    """The flags as an IndexPolicy (validated there), errors naming the flag the user typed."""
    from twotower.index.autotune import IndexPolicy

    flags = {"target_recall": "--target-recall", "k": "--k", "tune_queries": "--queries",
             "exact_p99_ms": "--exact-budget-ms", "seed": "--seed"}
    # --seed checked here too: a negative one reached numpy after the run had loaded, as a traceback
    over = {"target_recall": args.target_recall, "k": args.k, "tune_queries": args.queries, "seed": args.seed}
    if args.max_train is not None and args.max_train < 1:  # was "max_train must be ...", after the run loaded
        raise ConfigError(f"--max-train must be a positive integer, got {args.max_train}")
    _pin(args)
    if args.exact_budget_ms is not None:
        over["exact_p99_ms"] = args.exact_budget_ms
    try:
        return IndexPolicy(**over)
    except ConfigError as e:
        msg = str(e)
        for field, flag in flags.items():
            if msg.startswith(field + " "):
                msg = flag + msg[len(field):]
        raise ConfigError(msg) from None


def _pin(args: argparse.Namespace) -> dict[str, int] | None:
    """The setting --nprobe / --ef-search pins (None: swept), refused before the run loads where it cannot apply."""
    nprobe, ef_search = getattr(args, "nprobe", None), getattr(args, "ef_search", None)
    for flag, value in (("--nprobe", nprobe), ("--ef-search", ef_search)):
        if value is not None and value < 1:
            raise ConfigError(f"{flag} must be a positive integer, got {value}")
    if nprobe is not None and ef_search is not None:
        raise ConfigError("--nprobe pins an IVF index and --ef-search an HNSW one: pass the one of the --index built")
    if nprobe is None and ef_search is None:
        return None
    flag, kinds = ("--nprobe", "ivf, ivfpq or an IVF factory string") if nprobe is not None else \
        ("--ef-search", "hnsw or an HNSW factory string")
    spec = args.index.strip().lower()
    if spec in ("auto", "exact", "flat") or (spec == "hnsw" and nprobe is not None) \
            or (spec in ("ivf", "ivfpq") and ef_search is not None):
        # auto compares several index types, each at its own cheapest setting: one knob value cannot fit them all
        raise ConfigError(f"{flag} pins a setting of one index type: --index {kinds}, not --index {spec}")
    if ef_search is not None and int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise ConfigError("--ef-search: an HNSW index cannot be built across ranks; run `twotower index build` in "
                          "one process")
    return {"nprobe": nprobe} if nprobe is not None else {"efSearch": ef_search}


def sample_query_rows(run, n: int, seed: int):  # noqa: ANN001, ANN201 - TrainedRun, np.ndarray
    """Up to ``n`` user rows with a training history (seeded), sorted."""
    import numpy as np

    rows = np.flatnonzero(run.history.lengths() > 0)
    if rows.size == 0:
        rows = np.arange(len(run.user_vocab))
    if rows.size > n:
        rows = np.sort(np.random.default_rng(seed).choice(rows, n, replace=False))
    return rows.astype(np.int64)


def cmd_index_build(args: argparse.Namespace) -> int:
    from twotower.cli.paths import check_artefact_dir, run_writer
    from twotower.index.storage import is_index_dir
    from twotower.utils.runtime import set_threads, threads_from_env

    policy = _policy(args)
    # the index folder is swapped in whole, removing what was there: never the run, a file or someone's folder
    out = check_artefact_dir(args.out or Path(args.run) / "index", kind="vector index", is_same_kind=is_index_dir)
    set_threads(args.threads or threads_from_env())
    # the index, tune.json and recall_qps.png of one build, from a run no `train` is rewriting meanwhile
    with run_writer(args.run, out, "twotower index build"):
        return _build(args, policy, out)


def _build(args: argparse.Namespace, policy, out: Path) -> int:  # noqa: ANN001 - IndexPolicy
    import dataclasses
    import time

    import numpy as np

    from twotower.index import ExactIndex, autotune, plot_recall_qps
    from twotower.pipeline.artifacts import TrainedRun

    run = TrainedRun.load(args.run)
    train_cfg = run.config.train  # the run's own progress settings: an HNSW graph over 1M items takes minutes
    policy = dataclasses.replace(policy, log_every_s=train_cfg.log_every_s if train_cfg.progress else None)
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        return _build_distributed(args, run, out, policy)
    vectors = run.item_embeddings()  # [I, D]
    ids = np.arange(run.n_items, dtype=np.int64)
    fp = run.fingerprint()
    query_rows = sample_query_rows(run, args.queries, args.seed)
    queries = run.user_vectors(query_rows).astype(np.float32)  # [Q, D]
    print(f"index build: {len(ids):,} items of dim {vectors.shape[1]}, {len(query_rows)} user queries, "
          f"k={args.k}, target recall {args.target_recall:g}")
    if args.index.strip().lower() == "exact":
        t0 = time.perf_counter()
        index = ExactIndex().build(vectors, ids)
        summary = {"index": "exact", "spec": "exact", "params": {}, "k": args.k, "n": len(ids),
                   "dim": int(vectors.shape[1]), "build_s": round(time.perf_counter() - t0, 3), "rows": []}
        index.save(out, model_fingerprint=fp, tuning=summary)  # tune.json checksummed with the index
        print(f"saved exact index to {out} (model {fp})")
        return 0
    report = autotune(vectors, ids, queries, index=args.index, max_train=args.max_train, policy=policy,
                      params=_pin(args))
    # the measured recall is what serve trusts, so tune.json is written and checksummed with the index
    report.index.save(out, model_fingerprint=fp, tuning=report.to_dict())
    print(report.table())
    print(f"why: {report.reason}")
    c = report.chosen
    if report.index.is_exact and c.factory == "exact":
        print(f"chosen: exact search, {c.qps_batch:,.0f} QPS batched, p99 {c.p99_ms:.3f} ms single")
        print(f"saved to {out} (model {fp}); choice and measurements in {out / TUNE_JSON}")
        return 0
    plot_recall_qps(report, out / TUNE_PNG)
    verdict = "meets" if report.met_target else "does NOT meet"
    print(f"chosen: {c.factory} {c.params} recall@{args.k} {c.recall:.4f} ({verdict} {args.target_recall:g}), "
          f"{c.qps_batch:,.0f} QPS batched, p99 {c.p99_ms:.3f} ms single; exact {report.exact_qps_batch:,.0f} QPS")
    print(f"saved to {out} (model {fp}); table {out / TUNE_JSON}, plot {out / TUNE_PNG}")
    return 0


def _build_distributed(args: argparse.Namespace, run, out: Path, policy) -> int:  # noqa: ANN001 - TrainedRun, IndexPolicy
    """Under torchrun: each rank encodes its shard of the catalogue; one IVF index is trained once and merged.

    Rank 0 then measures the merged index against exact search as ``autotune`` measures its candidates, sets
    ``nprobe`` to the smallest value reaching the recall target (or measures the one ``--nprobe`` gives), and
    saves that record as ``tune.json``: serving trusts, and refuses, such an index like any other.
    """
    import time

    import numpy as np
    import torch

    from twotower.index import tune_index
    from twotower.index.distributed_build import build_index_distributed, shard_range
    from twotower.index.faiss_index import training_sample_size
    from twotower.training import distributed as tdist

    spec = args.index.strip()
    if spec.lower() in ("auto", "exact", "flat", "hnsw") or "HNSW" in spec or "Refine" in spec or spec.endswith("RFlat"):
        raise ConfigError(
            f"--index {spec!r} cannot be built across ranks; use ivf, ivfpq or an IVF factory string "
            "(or run `twotower index build` in one process to autotune any index type)"
        )
    if args.nprobe is not None:  # every rank refuses alike before any work: rank 0 alone left the others waiting
        from twotower.index.autotune import check_pin

        with torch.no_grad():
            dim = int(run.model.item_tower(torch.zeros(1, dtype=torch.long)).shape[1])
        check_pin(spec, {"nprobe": args.nprobe}, run.n_items, dim)
    tdist.init_from_env()
    try:
        n = run.n_items
        fp = run.fingerprint()
        chunk = 65536

        @torch.no_grad()
        def vectors_fn(rank: int, world: int):  # noqa: ANN202
            start, stop = shard_range(n, rank, world)
            for s in range(start, stop, chunk):
                rows = torch.arange(s, min(s + chunk, stop))
                yield rows.numpy().astype(np.int64), run.model.item_tower(rows).numpy().astype(np.float32)

        @torch.no_grad()
        def sample() -> np.ndarray:
            dim = int(run.model.item_tower(torch.zeros(1, dtype=torch.long)).shape[1])
            m = training_sample_size(spec, n, dim, args.max_train or 100_000)
            rows = np.sort(np.random.default_rng(args.seed).choice(n, m, replace=False))
            return run.model.item_tower(torch.as_tensor(rows)).numpy().astype(np.float32)

        t0 = time.perf_counter()
        index = build_index_distributed(vectors_fn, spec, sample, out, n_total=n, nprobe=args.nprobe,
                                        model_fingerprint=fp)
        if tdist.is_main() and index is not None:
            build_s = time.perf_counter() - t0
            query_rows = sample_query_rows(run, args.queries, args.seed)  # at most the users with a history
            print(f"built {index.factory} over {n:,} items on {tdist.world_size()} ranks in {build_s:.1f} s; "
                  f"measuring it against exact search on {len(query_rows)} user queries")
            queries = run.user_vectors(query_rows).astype(np.float32)
            report = tune_index(index, run.item_embeddings(), np.arange(n, dtype=np.int64), queries, policy=policy,
                                build_s=build_s, params=None if args.nprobe is None else {"nprobe": args.nprobe})
            index.save(out, model_fingerprint=fp, tuning=report.to_dict())  # tune.json: what serve trusts
            print(report.table())
            c = report.chosen
            verdict = "meets" if report.met_target else "does NOT meet"
            print(f"chosen: {c.factory} {c.params} recall@{policy.k} {c.recall:.4f} ({verdict} "
                  f"{policy.target_recall:g}), {c.qps_batch:,.0f} QPS batched; exact {report.exact_qps_batch:,.0f} QPS")
            print(f"saved to {out} (model {fp}); table {out / TUNE_JSON}")
        tdist.barrier()
    finally:
        tdist.cleanup()
    return 0


def cmd_index_info(args: argparse.Namespace) -> int:
    from twotower.index.storage import read_meta, read_tuning
    from twotower.pipeline.artifacts import TrainedRun
    from twotower.pipeline.recommend import open_run_index

    run = TrainedRun.load(args.run)
    directory = Path(args.index_dir) if args.index_dir else Path(args.run) / "index"
    meta = read_meta(directory)
    open_run_index(run, directory)  # as recommend and serve: checksums, the run's model and its item rows as ids
    tune = read_tuning(directory)  # checked against meta.json like the index files
    if args.json:
        print(json.dumps({"meta": meta, "tune": tune, "fingerprint_match": True}, indent=2))
        return 0
    print(f"index {directory}: {meta['backend']} {meta.get('factory') or ''} params {meta.get('params')}")
    print(f"  {meta['count']:,} vectors of dim {meta['dim']}, metric {meta['metric']}, exact={meta.get('is_exact')}, "
          f"created {meta.get('created')}")
    print(f"  built for model {meta.get('model_fingerprint')} = this run's model (checksums verified)")
    if tune and tune.get("chosen"):
        c = tune["chosen"]
        print(f"  tuned: recall@{tune['k']} {c['recall']:.4f} (target {tune['target_recall']:g}), "
              f"{c['qps_batch']:,.0f} QPS batched, p50 {c['p50_ms']:.3f} ms, p99 {c['p99_ms']:.3f} ms single")
    if tune and tune.get("reason"):
        print(f"  why: {tune['reason']}")
    return 0
