"""Index benchmark at catalogue scale: FAISS-BLAS flat (the baseline), exact, autotuned IVF, HNSW and IVF-PQ.

The baseline is FAISS ``IndexFlatIP`` with ``faiss.cvar.distance_compute_blas_threshold``
lowered to 1 (FAISS's default, 128,000 queries in this version, keeps batches on its
slower one-query loop); every "x BLAS" speed-up is measured against it in the same run.

Builds a seeded clustered catalogue of L2-normalised vectors (default
1,000,000 x 64: 5,000 Gaussian clusters plus noise, generated in chunks),
draws tuning and held-out evaluation queries from the same distribution, and
prints one table: build seconds, bytes per vector, recall@k vs exact on the
held-out queries, single-query and batched QPS, p50/p99 latency and the
speed-up over batched exact search. Then it says whether each target is met.

    .venv/bin/python bench/index_scale.py --n 1000000 --dim 64 --queries 1000 --threads 1
    .venv/bin/python bench/index_scale.py --n 100000 --skip-hnsw            # quick look
    .venv/bin/python bench/index_scale.py --ml100k-embeddings items.npy      # real item embeddings
"""
from __future__ import annotations

import argparse
import json
import logging
import resource
import sys
import time
from pathlib import Path

import numpy as np
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import check_json_out, refuse_below, refuse_range, write_json_out  # noqa: E402

from twotower.index import ExactIndex, FaissIndex, autotune, plot_recall_qps, tie_aware_recall
from twotower.index.autotune import measure_speed
from twotower.index.content_check import check_contents
from twotower.results import Results
from twotower.utils.runtime import set_threads

log = logging.getLogger("index_scale")


def _normalise(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True).clip(1e-12)).astype(np.float32)


def clustered(n: int, centers: np.ndarray, noise: float, rng: np.random.Generator, chunk: int = 100_000) -> np.ndarray:
    """``n`` points: a random centre plus isotropic noise (norm ~ ``noise``), normalised; made chunk by chunk."""
    dim = centers.shape[1]
    out = np.empty((n, dim), dtype=np.float32)  # [N, D]
    for s in range(0, n, chunk):
        m = min(chunk, n - s)
        lab = rng.integers(0, centers.shape[0], m)
        x = centers[lab] + (noise / np.sqrt(dim)) * rng.standard_normal((m, dim), dtype=np.float32)
        out[s : s + m] = _normalise(x)
    return out


def make_data(args: argparse.Namespace) -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
    rng = np.random.default_rng(args.seed)
    if args.ml100k_embeddings:
        base = _normalise(np.load(args.ml100k_embeddings, allow_pickle=False).astype(np.float32))
        # "more like this" queries: catalogue items with a little noise
        pick = lambda m: _normalise(base[rng.integers(0, len(base), m)]  # noqa: E731
                                    + 0.05 * rng.standard_normal((m, base.shape[1]), dtype=np.float32))
        return base, pick(args.tune_queries), pick(args.queries), f"embeddings {args.ml100k_embeddings}"
    centers = _normalise(rng.standard_normal((args.clusters, args.dim), dtype=np.float32))
    x = clustered(args.n, centers, args.noise, rng)
    tune_q = clustered(args.tune_queries, centers, args.noise, rng)
    eval_q = clustered(args.queries, centers, args.noise, rng)
    return x, tune_q, eval_q, f"{args.clusters} clusters, noise {args.noise}, seed {args.seed}"


class RawFlat:
    """FAISS ``IndexFlatIP`` searched directly, at whatever ``distance_compute_blas_threshold`` is set: the
    baseline the issue names, without :class:`FaissIndex`'s tie-correct re-fetch and sort."""

    factory = "Flat (raw IndexFlatIP)"
    search_params: dict = {}

    def __init__(self, x: np.ndarray) -> None:
        import faiss

        self.index = faiss.IndexFlatIP(x.shape[1])
        self.index.add(x)

    def search(self, queries: np.ndarray, k: int) -> Results:
        scores, rows = self.index.search(np.ascontiguousarray(queries, dtype=np.float32), k)
        return Results(scores=scores, ids=rows.astype(np.int64))  # ids are the rows here (0..n-1)

    def nbytes(self) -> int:
        return self.index.ntotal * self.index.d * 4


def rss_gb() -> float:
    return psutil.Process().memory_info().rss / 2**30


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # Linux: KiB


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=1_000_000, help="catalogue size")
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--ivf-candidates", default="ivf",
                   help="';'-separated IVF specs autotune picks from for the IVF row (e.g. 'ivf;IVF16384_HNSW32,Flat')")
    p.add_argument("--clusters", type=int, default=5000)
    p.add_argument("--noise", type=float, default=1.0,
                   help="noise norm relative to unit cluster centres (recall at a given nprobe is very sensitive to it: see docs/benchmarks.md)")
    p.add_argument("--queries", type=int, default=1000, help="held-out evaluation queries")
    p.add_argument("--tune-queries", type=int, default=1000, help="queries used by autotune")
    p.add_argument("--latency-queries", type=int, default=200, help="queries timed one at a time")
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--target", type=float, default=0.95, help="recall@k target for autotuned IVF / HNSW")
    p.add_argument("--pq-target", type=float, default=0.90, help="recall@k target for IVF-PQ")
    p.add_argument("--speedup-target", type=float, default=20.0,
                   help="required batched QPS / FAISS-BLAS exact batched QPS")
    p.add_argument("--max-train", type=int, default=200_000, help="FAISS training sample size")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--skip-pq", action="store_true")
    p.add_argument("--exact-only", action="store_true", help="only the exact rows (baseline, ExactIndex, default FAISS)")
    p.add_argument("--skip-hnsw", action="store_true")
    p.add_argument("--pq-candidates", default="ivfpq;IVF{nlist},PQ32x4fs;ivfpq,Refine(SQ6);ivfpq,Refine(SQ8)",
                   help="';'-separated IVF-PQ factories to try")
    p.add_argument("--ml100k-embeddings", type=Path, default=None, help="item embeddings .npy [I, D] to use instead")
    p.add_argument("--plot", type=Path, default=None, help="write the IVF recall-vs-QPS sweep as PNG here")
    p.add_argument("--json", type=Path, default=None, help="write all rows as JSON here")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s", stream=sys.stderr)
    refuse_below(args, ("threads",))  # --threads 0 was torch's traceback
    if args.plot is not None and (args.plot.is_dir() or not args.plot.parent.is_dir()):
        # a folder was an IsADirectoryError after the tuning, losing the table and --json with it; a missing parent
        # was made, wherever it was (/nonexistent at the filesystem's root)
        raise SystemExit(f"error: --plot {args.plot}: " + ("is a folder; give a PNG file's path" if args.plot.is_dir()
                                                           else f"no folder {args.plot.parent} to write it in"))
    set_threads(args.threads)
    check_json_out(args.json)  # before the catalogue is built: a bad path is one line, not a late traceback
    # sizes and the embeddings file checked here too: a zero or a typo was a traceback from deep in the search
    refuse_below(args, ("n", "dim", "clusters", "queries", "tune_queries", "latency_queries", "k", "max_train"))
    # and the floats, NaN and infinity among them: --target nan passed every comparison
    for flag in ("target", "pq_target"):  # recall@k targets, as `index build --target-recall`
        refuse_range(args, flag, 0, 1, lo_open=True)
    refuse_range(args, "noise", 0)
    refuse_range(args, "speedup_target", 0, lo_open=True)
    from twotower.errors import ConfigError
    from twotower.index.faiss_index import check_factory_parses

    for flag, specs in (("--ivf-candidates", args.ivf_candidates), ("--pq-candidates", args.pq_candidates)):
        for spec in (c.strip() for c in specs.split(";") if c.strip()):  # a traceback after the baselines' timing
            try:
                check_factory_parses(spec)
            except ConfigError as e:
                raise SystemExit(f"error: {flag}: {e}") from None
    if args.ml100k_embeddings is not None and not args.ml100k_embeddings.is_file():
        raise SystemExit(f"error: --ml100k-embeddings {args.ml100k_embeddings}: no such file (an .npy of [I, D])")

    t0 = time.perf_counter()
    x, tune_q, eval_q, source = make_data(args)
    n, dim = x.shape
    ids = np.arange(n, dtype=np.int64)
    print(f"catalogue {n:,} x {dim} ({source}); {len(tune_q)} tune + {len(eval_q)} held-out queries; "
          f"k={args.k}; threads={args.threads}; generated in {time.perf_counter() - t0:.1f}s, RSS {rss_gb():.2f} GB",
          flush=True)

    rows: list[dict] = []

    def record(name: str, index, build_s: float, params: dict | None = None) -> dict:
        sp = measure_speed(index, eval_q, args.k, latency_queries=args.latency_queries)
        recall = tie_aware_recall(sp["results"].ids, eval_q, x, ids, kth, args.k)
        row = {"name": name, "factory": getattr(index, "factory", None) or "exact",
               "params": params if params is not None else index.search_params, "build_s": build_s,
               "bytes_per_vector": index.nbytes() / n, "recall": recall,
               **{k: v for k, v in sp.items() if k != "results"}, **content_check(index)}
        rows.append(row)
        log.info("%s: recall %.4f, %.0f QPS batched, RSS %.2f GB", name, recall, row["qps_batch"], rss_gb())
        return row

    def content_check(index) -> dict:  # noqa: ANN001
        """What opening a saved index of this catalogue adds (index/content_check.py: a fixed sample of items read
        back or searched for themselves): its milliseconds, and that an index of these very vectors passes it."""
        if not hasattr(index, "_stored_vectors"):  # the bare FAISS baseline is not a saved index
            return {}
        t = time.perf_counter()
        why = check_contents(index, lambda rows: x[rows])
        return {"check_ms": (time.perf_counter() - t) * 1e3, "check_passed": why is None}

    # the baseline: FAISS brute force on BLAS, as fast as exact search gets on this CPU
    import faiss

    default_threshold = faiss.cvar.distance_compute_blas_threshold
    t = time.perf_counter()
    blas = RawFlat(x)
    blas_build_s = time.perf_counter() - t
    faiss.cvar.distance_compute_blas_threshold = 1

    # exact reference: its own batched search gives the ground truth
    t = time.perf_counter()
    exact = ExactIndex().build(x, ids)
    build_s = time.perf_counter() - t
    gt = exact.search(eval_q, args.k)
    kth = gt.scores[:, min(args.k, n) - 1]
    faiss.cvar.distance_compute_blas_threshold = 1
    blas_row = record("FAISS-BLAS IndexFlatIP (baseline)", blas, blas_build_s)
    exact_row = record("exact (ExactIndex)", exact, build_s, {})
    faiss.cvar.distance_compute_blas_threshold = default_threshold
    flat_row = record("IndexFlatIP, default threshold", blas, blas_build_s)  # FAISS's own setting
    faiss.cvar.distance_compute_blas_threshold = 1
    t = time.perf_counter()
    wrapped = FaissIndex("flat").build(x, ids)  # sets the threshold per search, as every FaissIndex does
    record("FaissIndex('flat'), tie-correct", wrapped, time.perf_counter() - t)
    del wrapped
    # the exact index resets the threshold on its next search; measure the pair once more, interleaved,
    # so the exact / BLAS ratio is not one noisy sample on a shared machine
    def batched_qps(ix) -> float:  # noqa: ANN001
        faiss.cvar.distance_compute_blas_threshold = 1  # ExactIndex sets it per call; the baseline wants 1
        return measure_speed(ix, eval_q, args.k, latency_queries=1)["qps_batch"]

    again = [batched_qps(ix) for ix in (blas, exact, blas, exact)]
    ratio = (again[1] + again[3] + exact_row["qps_batch"]) / (again[0] + again[2] + blas_row["qps_batch"])
    del exact, blas

    reports = {}
    ivf_row = None
    if args.exact_only:
        args.skip_hnsw = args.skip_pq = True
    t = time.perf_counter()
    ivf_cands = [c for c in args.ivf_candidates.split(";") if c]
    if not args.exact_only:
        rep = autotune(x, ids, tune_q, k=args.k, target_recall=args.target, index="auto", candidates=ivf_cands,
                       max_train=args.max_train, latency_queries=args.latency_queries)
        reports["ivf"] = rep
        ivf_row = record("IVF (autotuned)", rep.index, rep.chosen.build_s, rep.params)
        ivf_row["tune_s"] = time.perf_counter() - t
        if args.plot:
            # the figure says what was measured: the catalogue, k, the target and the threads (its title gave the size alone)
            what = (f"item embeddings {args.ml100k_embeddings.name}" if args.ml100k_embeddings
                    else "a synthetic clustered catalogue")
            plot_recall_qps(rep, args.plot, source=what, threads=args.threads)
        rep.index = None  # free it

    if not args.skip_hnsw:
        t = time.perf_counter()
        rep = autotune(x, ids, tune_q, k=args.k, target_recall=args.target, index="hnsw",
                       latency_queries=args.latency_queries)
        reports["hnsw"] = rep
        record("HNSW (autotuned)", rep.index, rep.chosen.build_s, rep.params)["tune_s"] = time.perf_counter() - t
        rep.index = None

    pq_rows = []
    if not args.skip_pq:
        for cand in [c.strip() for c in args.pq_candidates.split(";") if c.strip()]:
            t = time.perf_counter()
            rep = autotune(x, ids, tune_q, k=args.k, target_recall=args.pq_target, index=cand,
                           max_train=args.max_train, latency_queries=args.latency_queries)
            reports[cand] = rep
            # the factory the build resolved (IVF512,PQ32x4fs), not the template asked for (IVF{nlist},PQ32x4fs)
            r = record(f"IVF-PQ {getattr(rep.index, 'factory', None) or cand}", rep.index, rep.chosen.build_s,
                       rep.params)
            r["tune_s"] = time.perf_counter() - t
            pq_rows.append(r)
            rep.index = None

    # ------------------------------------------------------------------ table
    # the fastest of the three FAISS-BLAS runs (docs/benchmarks.md quotes the IVF "x the fastest FAISS-BLAS run"):
    # the first sample alone, often the slowest on a shared machine, flattered every row's ratio
    ex_qps = max(blas_row["qps_batch"], again[0], again[2])
    flat_bpv = flat_row["bytes_per_vector"]
    print()
    print(f"{'index':<34}{'params':<24}{'build s':>8}{'B/vec':>8}{'mem':>6}{'recall':>8}"
          f"{'QPS 1q':>8}{'QPS batch':>10}{'p50 ms':>8}{'p99 ms':>8}{'x BLAS':>9}{'check ms':>9}")
    for r in rows:
        params = ",".join(f"{k}={v:g}" for k, v in r["params"].items())
        r["mem_vs_flat"] = r["bytes_per_vector"] / flat_bpv
        r["speedup_vs_exact_batch"] = r["qps_batch"] / ex_qps
        print(f"{(r['name'] + ' ' + r['factory'] if r['name'].startswith('IVF (') or r['name'].startswith('HNSW') else r['name'])[:33]:<34}"
              f"{params[:23]:<24}{r['build_s']:>8.1f}{r['bytes_per_vector']:>8.1f}{r['mem_vs_flat']:>6.2f}"
              f"{r['recall']:>8.4f}{r['qps_single']:>8.0f}{r['qps_batch']:>10.0f}{r['p50_ms']:>8.3f}"
              f"{r['p99_ms']:>8.3f}{r['speedup_vs_exact_batch']:>8.1f}x"
              + (f"{r['check_ms']:>9.1f}" if "check_ms" in r else f"{'-':>9}"))
    print(f"x BLAS: batched QPS over the fastest of the 3 FAISS-BLAS IndexFlatIP runs ({ex_qps:,.0f} QPS); the exact "
          "verdict below compares the sums of 3 interleaved runs each")
    failed = [r["name"] for r in rows if r.get("check_passed") is False]
    print("check ms: the content check a saved index gets when it is opened (a fixed sample of items read back or "
          "searched for themselves); " + (f"REFUSED its own vectors: {failed}" if failed else
                                         "every index of these vectors passed it"))
    print(f"\npeak RSS {peak_rss_gb():.2f} GB; total {time.perf_counter() - t0:.0f}s; threads={args.threads}")

    ok0 = ratio >= 0.9
    print(f"[{'MET' if ok0 else 'MISSED'}] exact search at {ratio:.2f}x FAISS-BLAS IndexFlatIP batched QPS (>= 0.9x; "
          f"3 interleaved runs each: exact {[round(v) for v in (exact_row['qps_batch'], again[1], again[3])]}, "
          f"BLAS {[round(v) for v in (blas_row['qps_batch'], again[0], again[2])]})")
    ok1 = ivf_row is not None and ivf_row["recall"] >= args.target and ivf_row["speedup_vs_exact_batch"] >= args.speedup_target
    print() if ivf_row is None else print(f"[{'MET' if ok1 else 'MISSED'}] autotuned IVF recall@{args.k} {ivf_row['recall']:.4f} (>= {args.target}) "
          f"at {ivf_row['speedup_vs_exact_batch']:.1f}x FAISS-BLAS batched QPS (>= {args.speedup_target:g}x)")
    if pq_rows:
        third = [r for r in pq_rows if r["mem_vs_flat"] <= 1 / 3 and r["recall"] >= args.pq_target]
        best3 = max(third, key=lambda r: r["qps_batch"], default=None)
        print(f"[{'MET' if best3 else 'MISSED'}] IVF-PQ recall@{args.k} >= {args.pq_target} at <= 1/3 of Flat memory"
              + (f": {best3['name']} {best3['params']} recall {best3['recall']:.4f}, "
                 f"{best3['mem_vs_flat']:.3f} of Flat, {best3['qps_batch']:.0f} QPS" if best3 else ""))
        eighth = [r for r in pq_rows if r["mem_vs_flat"] <= 1 / 8]
        best8 = max(eighth, key=lambda r: r["recall"], default=None)
        print("[INFO] best recall at <= 1/8 of Flat memory: "
              + (f"{best8['recall']:.4f} ({best8['name']} {best8['params']}, {best8['mem_vs_flat']:.3f} of Flat)"
                 if best8 else "no candidate that small"))
    if args.json:
        out = {"args": {k: str(v) for k, v in vars(args).items()}, "rows": rows,
               "sweeps": {k: v.to_dict() for k, v in reports.items()}, "peak_rss_gb": peak_rss_gb()}
        write_json_out(args.json, json.dumps(out, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
