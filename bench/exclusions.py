"""Per-request exclusions at their bound: k=10 with 0, 10, 100 and 500 excluded ids, exact and IVF, 1M items.

``exclude_items`` (POST /recommend, /similar-items), ``--exclude-items`` and ``exclude=`` all reach
``VectorIndex.search(..., exclude=)``: one fetch of ``k + len(exclude)`` candidates (rounded up to a power of
two), the excluded ids dropped. The excluded ids here are the worst case: each query's own exact top-``E``,
so every one of them is fetched and dropped and the answer is ranks ``E+1..E+10``. ``ServiceSettings.max_exclude``
is 500.

Builds bench/index_scale.py's seeded clustered catalogue (default 1,000,000 x 64), an ``ExactIndex`` over it
and an IVF (``--ivf``, default ``IVF1024,Flat``), then, interleaved round by round so that a busy core slows every row alike:

- one k=10 query with 0 / 10 / 100 / 500 exclusions, and one k=510 query without any (the plain search of
  ``k + 500`` candidates that 500 exclusions should cost about as much as); median ms over queries and rounds;
- a batch of 64 queries with 500 exclusions each, against the same batch with none and at k=510.

It checks every answer: the exact index against a numpy reference that scores all items in float64 (rounded to
float32, as the index's scores are), drops the excluded ids and keeps the top 10, ties by smaller id; the IVF
against its own search of ``k + E`` without exclusions, filtered the same way (and its recall@10 against
the reference). It counts the backend searches each call made (a deepening re-search would show as more than 1).

    python bench/exclusions.py --threads 1
    python bench/exclusions.py --n 100000 --rounds 2      # quick look
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import check_json_out, refuse_below, refuse_range, write_json_out  # noqa: E402
from index_scale import _normalise, clustered  # noqa: E402

from twotower.index import ExactIndex, FaissIndex  # noqa: E402
from twotower.utils.runtime import set_threads  # noqa: E402

EXCLUDES = (0, 10, 100, 500)


def reference_scores(x: np.ndarray, queries: np.ndarray, chunk: int = 1 << 17) -> np.ndarray:
    """``[Q, N]`` float64 dot products of every query with every item, rounded to float32."""
    out = np.empty((queries.shape[0], x.shape[0]), dtype=np.float32)
    q64 = queries.astype(np.float64)
    for s in range(0, x.shape[0], chunk):
        out[:, s : s + chunk] = (x[s : s + chunk].astype(np.float64) @ q64.T).T.astype(np.float32)
    return out


def reference_top(scores: np.ndarray, k: int, exclude: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Top ``k`` item ids (= rows) of one query's ``scores[N]`` without ``exclude``, ties by smaller id."""
    s = scores.copy()
    if exclude is not None and exclude.size:
        s[exclude] = -np.inf
    depth = min(len(s), k + 64)
    cut = np.partition(s, len(s) - depth)[len(s) - depth]  # the depth-th largest: every tie at the cut is kept
    cand = np.flatnonzero(s >= cut)
    order = np.lexsort((cand, -s[cand]))[:k]
    return cand[order], s[cand[order]]


class Counted:
    """Counts the backend searches an index makes (``_search_candidates``, or ``_search_deeper`` when a filtered
    search deepens) and the most candidates one fetched."""

    def __init__(self, index) -> None:  # noqa: ANN001
        self.index, self.calls, self.fetched, self._inside = index, 0, 0, False
        for method in ("_search_candidates", "_search_deeper"):
            setattr(index, method, self._counting(getattr(index, method)))

    def _counting(self, inner):  # noqa: ANN001, ANN202
        def counted(queries, fetch, *rest):  # noqa: ANN001, ANN202
            if self._inside:  # _search_deeper calling _search_candidates: one search
                return inner(queries, fetch, *rest)
            self.calls += 1
            self.fetched = max(self.fetched, int(fetch))
            self._inside = True
            try:
                return inner(queries, fetch, *rest)
            finally:
                self._inside = False

        return counted

    def reset(self) -> None:
        self.calls, self.fetched = 0, 0


def check_ivf(spec: str) -> None:
    """``--ivf`` refused in one line before the catalogue is made: a string FAISS cannot parse, or an index with no
    nprobe (HNSW32, Flat) was a traceback once the index had been built (minutes at 1M items)."""
    from twotower.errors import ConfigError
    from twotower.index.faiss_index import check_factory_parses

    try:
        check_factory_parses(spec)
    except ConfigError as e:
        raise SystemExit(f"error: --ivf: {e}") from None
    if "IVF" not in spec.upper():  # OPQ16,IVF256,PQ16 too
        raise SystemExit(f"error: --ivf: an IVF index_factory string such as IVF1024,Flat (the bench pins its "
                         f"nprobe), got {spec!r}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=1_000_000, help="catalogue size")
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--clusters", type=int, default=5000)
    p.add_argument("--noise", type=float, default=1.0)
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--queries", type=int, default=16, help="single queries timed per row and round")
    p.add_argument("--batch", type=int, default=64, help="queries in the batched rows")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    p.add_argument("--ivf", default="IVF1024,Flat", help="the IVF's FAISS index_factory string")
    p.add_argument("--nprobe", type=int, default=16)
    p.add_argument("--max-train", type=int, default=100_000, help="IVF training sample")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", type=Path, default=None, help="write the rows as JSON here")
    args = p.parse_args(argv)
    # zeros were tracebacks, --k 0 and --nprobe 0 after the catalogue was built (~12 s)
    refuse_below(args, ("n", "k", "batch", "nprobe", "threads", "rounds", "clusters", "queries"))
    refuse_range(args, "noise", 0)  # NaN: a catalogue of NaN vectors
    if args.n < args.k + max(EXCLUDES):  # every row's reference is a full list of k left after 500 excluded ids
        raise SystemExit(f"error: --n: must be at least --k + {max(EXCLUDES)} ({args.k + max(EXCLUDES):,}), the "
                         f"excluded ids and a full list beside them, got {args.n:,}")
    check_ivf(args.ivf)
    set_threads(args.threads)
    check_json_out(args.json)
    k, top_e = args.k, max(EXCLUDES)

    rng = np.random.default_rng(args.seed)
    centers = _normalise(rng.standard_normal((args.clusters, args.dim), dtype=np.float32))
    t = time.perf_counter()
    x = clustered(args.n, centers, args.noise, rng)
    queries = clustered(args.queries + args.batch, centers, args.noise, rng)  # [Q, D]: singles, then the batch
    ids = np.arange(args.n, dtype=np.int64)
    ref = reference_scores(x, queries)  # [Q, N]
    # each query's exact top-500 (no exclusions): the excluded ids of every row, in a shuffled order
    tops = [reference_top(ref[q], top_e)[0] for q in range(len(queries))]
    excl = {e: [rng.permutation(top[:e]) for top in tops] for e in EXCLUDES}
    print(f"catalogue {args.n:,} x {args.dim}, {args.clusters} clusters, noise {args.noise}, seed {args.seed}: "
          f"made and scored in {time.perf_counter() - t:.1f} s", flush=True)

    t = time.perf_counter()
    exact = ExactIndex.over(x, ids)
    ivf = FaissIndex(args.ivf, nprobe=args.nprobe, max_train=args.max_train, seed=args.seed)
    ivf.build(x, ids)
    print(f"{args.ivf} (nprobe {args.nprobe}) built in {time.perf_counter() - t:.1f} s", flush=True)
    indexes = {"exact": Counted(exact), f"{args.ivf} nprobe={args.nprobe}": Counted(ivf)}

    singles = np.arange(args.queries)
    batch = np.arange(args.queries, args.queries + args.batch)
    # rows: (label, query rows, exclusion count, k)
    rows = [(f"1 query, {e} excluded", "single", e, k) for e in EXCLUDES]
    rows.append((f"1 query, none excluded, k={k + top_e}", "single", 0, k + top_e))
    rows += [(f"{args.batch} queries, {e} excluded each", "batch", e, k) for e in (0, top_e)]
    rows.append((f"{args.batch} queries, none excluded, k={k + top_e}", "batch", 0, k + top_e))

    def call(counted: Counted, which: str, e: int, kk: int, q: int | None):  # noqa: ANN202
        if which == "single":
            return counted.index.search(queries[q : q + 1], kk, exclude=[excl[e][q]] if e else None)
        return counted.index.search(queries[batch], kk, exclude=[excl[e][b] for b in batch] if e else None)

    # correctness and search counts, once per row and index (also warms every path up)
    problems: list[str] = []
    searches: dict[tuple[str, str], tuple[int, int]] = {}
    recall: dict[tuple[str, str], list[float]] = {}
    for name, counted in indexes.items():
        for label, which, e, kk in rows:
            calls, fetched = [], 0
            for q in (singles if which == "single" else [None]):
                counted.reset()
                res = call(counted, which, e, kk, q)
                calls.append(counted.calls)
                fetched = max(fetched, counted.fetched)
                if kk != k:
                    continue
                for r, qq in enumerate(singles[q : q + 1] if which == "single" else batch):
                    want_ids, want_s = reference_top(ref[qq], k, excl[e][qq] if e else None)
                    got_ids, got_s = res.ids[r], res.scores[r]
                    if counted.index is exact:
                        if not (np.array_equal(got_ids, want_ids) and np.array_equal(got_s, want_s)):
                            problems.append(f"{name}, {label}, query {qq}: {got_ids.tolist()} != {want_ids.tolist()}")
                        continue
                    # the IVF: its own search of k + e without exclusions (deepened until it holds them), filtered
                    own = ivf.search(queries[qq : qq + 1], k + e)
                    keep = ~np.isin(own.ids[0], excl[e][qq]) & (own.ids[0] >= 0)
                    if not np.array_equal(got_ids, own.ids[0][keep][:k]):
                        problems.append(f"{name}, {label}, query {qq}: {got_ids.tolist()} != filtered "
                                        f"{own.ids[0][keep][:k].tolist()}")
                    recall.setdefault((name, label), []).append(np.isin(got_ids, want_ids).mean())
            searches[name, label] = (max(calls), fetched)

    times: dict[tuple[str, str], list[float]] = {(name, label): [] for name in indexes for label, *_ in rows}
    for _ in range(args.rounds):
        for name, counted in indexes.items():
            for label, which, e, kk in rows:
                for q in (singles if which == "single" else [None]):
                    t = time.perf_counter()
                    call(counted, which, e, kk, q)
                    times[name, label].append(time.perf_counter() - t)

    print(f"\nmedian ms per call, {args.rounds} interleaved rounds ({args.queries} single queries per row and round), "
          f"{args.threads} thread(s); x: against the same index's row with none excluded (k={k})")
    print("| index | call | backend searches | fetch | median ms | x none excluded |")
    print("|---|---|---:|---:|---:|---:|")
    out = []
    for name in indexes:
        for label, which, e, kk in rows:
            ms = 1000 * statistics.median(times[name, label])
            base_label = rows[0][0] if which == "single" else rows[len(EXCLUDES) + 1][0]
            base = 1000 * statistics.median(times[name, base_label])
            calls, fetched = searches[name, label]
            print(f"| {name} | {label} | {calls} | {fetched} | {ms:.2f} | {ms / base:.2f}x |")
            out.append({"index": name, "call": label, "excluded": e, "k": kk, "searches": calls, "fetch": fetched,
                        "median_ms": ms, "ratio": ms / base})
    for (name, label), r in recall.items():
        print(f"{name}, {label}: recall@{k} against the numpy reference {np.mean(r):.4f}")
    checked = sum(1 for *_, kk in rows if kk == k)
    if problems:
        print(f"\n{len(problems)} answers differ from their reference:")
        for line in problems[:20]:
            print("  " + line)
    else:
        print(f"\nevery answer matches its reference ({checked} rows per index: exact against numpy, "
              "IVF against its own unexcluded search filtered)")
    if args.json:
        write_json_out(args.json, json.dumps({"args": vars(args), "rows": out, "problems": problems},
                                             indent=2, default=str))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
