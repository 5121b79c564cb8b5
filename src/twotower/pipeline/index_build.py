"""A run's vector index, autotuned and saved into the run: ``tt.build_index`` and `twotower index build` alike.

The index goes to ``RUN/index`` (or ``out``), replaced as a whole under the run's writer lock, with the model's
fingerprint and the tuning record (``tune.json``, checksummed with the index: serving trusts its measured
recall). `twotower index build` calls :func:`build_index` with its flags, so the two cannot drift.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from twotower.errors import ConfigError
from twotower.index import ExactIndex, IndexPolicy, TuneReport, VectorIndex, autotune, plot_recall_qps
from twotower.index.autotune import check_pin_early, queries_note, setting_text
from twotower.index.faiss_index import check_factory_parses, needs_training, refuse_idmap
from twotower.index.storage import PLOT, index_folder_files, is_damaged_index_dir, is_index_dir
from twotower.utils.extras import plotting_missing
from twotower.utils.output_folders import check_artefact_dir, run_writer
from twotower.utils.run_folder import check_run_folder, other_runs_index
from twotower.utils.runtime import scoped_threads
from twotower.utils.wording import plural

if TYPE_CHECKING:  # torch: imported once the run folder is known to be one
    from twotower.pipeline.artifacts import TrainedRun

__all__ = ["BuiltIndex", "TUNE_JSON", "TUNE_PNG", "build_index", "sample_query_rows", "missed_target_advice",
           "save_tuned"]

log = logging.getLogger(__name__)

TUNE_JSON = "tune.json"
TUNE_PNG = PLOT
#: What a build missing its recall target suggests: exact search is always the answer on a catalogue small enough
#: to be built in one process, a refine stage re-scores candidates exactly (ML-100K: ivfpq alone recalls 0.856 at
#: best, 'ivfpq,RFlat' 0.95 at nprobe 6); {index} and {target_recall} are the caller's names for them
_MISSED_TARGET_ADVICE = "build exact search ({exact}) or add a refine stage ({refine}), or lower {target_recall}"


def missed_target_advice(index: Callable[[str], str], target_recall: str) -> str:
    """The advice of a missed recall target, naming the index as ``index(value)`` and the target as given."""
    return _MISSED_TARGET_ADVICE.format(exact=index("exact"), refine=index("ivfpq,RFlat"), target_recall=target_recall)


#: build_index's own names: a Python caller passes index=... and an IndexPolicy
_PY_ADVICE = missed_target_advice(lambda v: f"index={v!r}", "IndexPolicy(target_recall=...)")
#: the writer lock's record of a build from Python (artifacts.DERIVED_WRITERS: loads beside it are not warned)
PY_WRITER = "tt.build_index"


@dataclass(frozen=True)
class BuiltIndex:
    """What :func:`build_index` saved: the folder, the index, the model it fits and its tuning record."""

    out: Path
    index: VectorIndex
    model_fingerprint: str
    tuning: dict[str, Any]  # tune.json as saved
    report: TuneReport | None = None  # the measured sweep; None for index="exact" (nothing to tune)

    @property
    def reason(self) -> str:
        """Why this index was chosen (``tune.json``'s reason: what the tuning measured, or that the index was
        named; empty for an index saved before reasons were recorded)."""
        return str(self.tuning.get("reason") or "")


def build_index(
    run: TrainedRun | str | os.PathLike[str],
    index: str = "auto",
    *,
    out: str | os.PathLike[str] | None = None,
    policy: IndexPolicy | None = None,
    threads: int | None = None,
    max_train: int | None = None,
    params: dict[str, int] | None = None,
    force: bool = False,
    echo: Callable[[str], None] | None = None,
    echo_progress: Callable[[str], None] | None = None,
    flag: str = "out",
    what: str = PY_WRITER,
    advice: str = _PY_ADVICE,
) -> BuiltIndex | None:
    """Autotune an index over ``run``'s item embeddings and save it, as `twotower index build` does.

    ``run``: a loaded run or its folder. ``index``: ``"auto"`` (exact search when its single-query p99 fits
    ``policy.exact_p99_ms``, else the fastest of flat, ivf, hnsw, ivfpq meeting the recall target), ``"exact"``,
    a shortcut or a FAISS factory string. Saved into ``out`` (default ``RUN/index``, which ``tt.recommend`` and
    `twotower serve` pick up), replaced as a whole: an earlier index there holding other files is refused unless
    ``force`` (they would be removed with it). ``params`` pins a setting (``{"nprobe": 8}``) instead of
    sweeping it; ``threads`` sets torch's, FAISS's and the BLAS pools' thread counts for the call (the caller's are put back
    when it returns; None: left as they are). Under torchrun
    (an IVF index built across ranks) ranks other than 0 get None. Example::

        built = tt.build_index(run, "auto")
        print(built.reason, built.tuning["chosen"])

    What differs between `twotower index build` and a Python call: ``echo`` takes each report line (None:
    logged at INFO), ``echo_progress`` the line said as the measuring starts (what it measures; None: as
    ``echo``: `twotower -q index build` leaves it out), ``flag`` names ``out`` in errors, ``what`` names the writer in the run's lock, ``advice`` is
    what the warning of a missed recall target suggests (:func:`missed_target_advice` in the caller's names).
    """
    say = echo or log.info
    progress = echo_progress or say
    if policy is not None and not isinstance(policy, IndexPolicy):  # a traceback from dataclasses.replace, later
        raise ConfigError(f"policy: an IndexPolicy (e.g. IndexPolicy(target_recall=0.95)), got {policy!r:.60}")
    policy = policy or IndexPolicy()
    if isinstance(run, (str, os.PathLike)):
        run_dir: Path = Path(run)
    else:
        from twotower.pipeline.artifacts import check_loaded_run

        check_loaded_run(run, "build_index")
        run_dir = run.dir
    if not isinstance(index, str) or not index.strip():
        raise ConfigError(f"index must be auto, exact, flat, ivf, hnsw, ivfpq or a FAISS factory string, got {index!r}")
    if max_train is not None and (isinstance(max_train, bool) or not isinstance(max_train, int) or max_train < 1):
        raise ConfigError(f"max_train: must be a positive integer, got {max_train!r}")
    refuse_idmap(index, "index")  # FAISS parses `IDMap,Flat`: the build ended in its C++ error, a traceback
    check_factory_parses(index)  # `HNSWxx` was refused only after the run loaded
    if params is not None and index.strip().lower() == "exact":
        raise ConfigError("params pins a setting of an approximate index; exact search has none")
    if params is not None:  # `IVF8,Flat` with {"nprobe": 20} was refused only after the run loaded
        check_pin_early(index, params)
    if max_train is not None and index.strip().lower() == "exact":  # it was dropped without a word
        raise ConfigError(f"max_train {max_train}: exact search trains nothing, so there is no training sample to "
                          "cap; drop it (it applies to IVF and PQ indexes)")
    # the index folder is swapped in whole, removing what was there: never the run, a file or someone's folder
    out_dir = check_artefact_dir(out if out is not None else run_dir / "index", kind="vector index",
                                 is_same_kind=lambda p: is_index_dir(p) or is_damaged_index_dir(p), flag=flag,
                                 own_files=index_folder_files, force=force)
    if isinstance(run, (str, os.PathLike)):  # a wrong folder is one line at once, not after torch is imported
        check_run_folder(run_dir)
    refuse_other_runs_index(run_dir, out_dir, flag)
    from twotower.pipeline.artifacts import TrainedRun

    # the index, tune.json and recall_qps.png of one build, from a run no `train` is rewriting meanwhile; on
    # ``threads`` threads, the caller's counts put back after it
    with scoped_threads(threads), run_writer(run_dir, out_dir, what):
        if not isinstance(run, TrainedRun):
            run = TrainedRun.load(run_dir)
        return _build(run, index, out_dir, policy, max_train, params, say, advice, progress)


def refuse_other_runs_index(run_dir: Path, out_dir: Path, flag: str = "out") -> None:
    """Refuse to build ``run_dir``'s index into another run's own index folder (``OTHER/index``, the one `recommend`
    and `serve` read for that run): it was replaced without a word, and that run then refused to serve ("built
    for model ..."); an index of another model's vectors is never that run's to read."""
    other = other_runs_index(run_dir, out_dir)
    if other is None:
        return
    raise ConfigError(f"{flag} {out_dir}: is the index folder of the run {other} (what `recommend` and `serve` read "
                      f"for it); building the run {run_dir}'s index there would replace it with another model's "
                      f"vectors. Leave {flag} out to build {run_dir / 'index'}, or name a folder of its own")


def sample_query_rows(run: TrainedRun, n: int, seed: int) -> np.ndarray:
    """Up to ``n`` user rows with a training history (seeded), sorted."""
    rows = np.flatnonzero(run.history.lengths() > 0)
    if rows.size == 0:
        rows = np.arange(len(run.user_vocab))
    if rows.size > n:
        rows = np.sort(np.random.default_rng(seed).choice(rows, n, replace=False))
    return rows.astype(np.int64)


def _check_max_train(spec: str, max_train: int | None, n: int, dim: int) -> None:
    """Refuse a ``max_train`` that the named index would ignore: an index FAISS does not train (flat, HNSW) draws
    no training sample, and `index build --index hnsw --max-train 100` built and saved it without a word."""
    if max_train is None or spec.strip().lower() == "auto":  # auto's IVF candidates use it
        return
    factory, trains = needs_training(spec, n, dim)
    if not trains:
        raise ConfigError(f"max_train {max_train}: {factory} is not trained (only IVF lists and PQ / SQ codebooks "
                          "are), so there is no training sample to cap; drop it or name an IVF or PQ index")


def requested_entry(spec: str, policy: IndexPolicy) -> dict[str, Any]:
    """What tune.json records of the request, beside the ``spec`` chosen: the index asked for (``auto``, ``ivf``, a
    factory string; stored ``spec`` was the chosen kind alone, so an autotuned IVF read as a named one) and, under
    ``auto``, the exact-search budget that decided between exact and an approximation (``--exact-budget-ms``,
    until now only inside the ``reason`` text; None for a named index, which ignores it)."""
    auto = spec.strip().lower() == "auto"
    # --queries as asked (n_queries is what the run's users allowed), for the rebuild command a refusal prints
    return {"requested": spec.strip(), "exact_budget_ms": float(policy.exact_p99_ms) if auto else None,
            "tune_queries": int(policy.tune_queries)}


def _build(run: TrainedRun, spec: str, out: Path, policy: IndexPolicy, max_train: int | None,
           params: dict[str, int] | None, say: Callable[[str], None], advice: str,
           progress: Callable[[str], None]) -> BuiltIndex | None:
    train_cfg = run.config.train  # the run's own progress settings: an HNSW graph over 1M items takes minutes
    policy = dataclasses.replace(policy, log_every_s=train_cfg.log_every_s if train_cfg.progress else None)
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        from twotower.pipeline.index_build_distributed import build_distributed

        return build_distributed(run, spec, out, policy, max_train, params, say, advice)
    vectors = run.item_embeddings()  # [I, D]
    _check_max_train(spec, max_train, *vectors.shape)
    ids = np.arange(run.n_items, dtype=np.int64)
    fp = run.fingerprint()
    query_rows = sample_query_rows(run, policy.tune_queries, policy.seed)
    queries = run.user_vectors(query_rows).astype(np.float32)  # [Q, D]
    progress(f"index build: {len(ids):,} items of dim {vectors.shape[1]}, {plural(len(query_rows), 'user query', 'user queries')}, "
        f"k={policy.k}, target recall {policy.target_recall:g}")
    no_plot = None if spec.strip().lower() == "exact" else plotting_missing()
    if no_plot:  # the tuning is minutes at 1M items: the build goes on, without its plot, rather than fail at its end
        log.warning("%s: this build writes no %s", no_plot, TUNE_PNG)
    if spec.strip().lower() == "exact":
        t0 = time.perf_counter()
        exact = ExactIndex().build(vectors, ids)
        summary = {"index": "exact", "spec": "exact", "params": {}, "k": policy.k, "n": len(ids),
                   # as a named flat index's tune.json says why (BuiltIndex.reason was '' here alone)
                   "reason": "exact search, as asked (index='exact'): recall 1 by construction, nothing to tune",
                   "dim": int(vectors.shape[1]), "build_s": round(time.perf_counter() - t0, 3), "rows": [],
                   "seed": policy.seed,  # as every tune.json records it (exact search draws nothing with it)
                   **requested_entry(spec, policy)}
        exact.save(out, model_fingerprint=fp, tuning=summary)  # tune.json checksummed with the index
        say(f"saved exact index to {out} (model {fp})")
        return BuiltIndex(out, exact, fp, summary)
    report = autotune(vectors, ids, queries, index=spec, max_train=max_train, policy=policy, params=params,
                      advice=advice)
    return save_tuned(run, spec, out, report, vectors, queries, policy, say, no_plot)


def save_tuned(run: TrainedRun, spec: str, out: Path, report: TuneReport, vectors: np.ndarray, queries: np.ndarray,
               policy: IndexPolicy, say: Callable[[str], None], no_plot: str | None) -> BuiltIndex:
    """Save ``report``'s index into ``out`` with its tuning record and plot, and say what was chosen and why.

    Shared by the one-process build and rank 0 of the build across ranks, so that both measure the item-query
    recall (`similar`), warn below the target and write the same files and lines: the torchrun build once did
    none of it. ``vectors`` ([I, D]) is the catalogue the index holds, ``queries`` ([Q, D]) the user vectors it was
    tuned on; ``no_plot``: why no plot can be drawn (None: it is).
    """
    fp = run.fingerprint()
    tuning = {**report.to_dict(), **requested_entry(spec, policy)}
    c = report.chosen
    chose_exact = report.index.is_exact and c.factory == "exact"
    similar_note = None
    if not chose_exact:  # what `similar` / /similar-items get from it: tuned on user queries, asked with items
        from twotower.pipeline.similar_recall import SIMILAR_RECALL, measure_similar_recall, similar_recall_shortfall

        tuning[SIMILAR_RECALL] = measure_similar_recall(run, report.index, vectors, k=policy.k,
                                                        target=policy.target_recall, queries=policy.tune_queries,
                                                        seed=policy.seed, user_queries=queries)
        similar_note = similar_recall_shortfall(out, tuning, run.dir)
    # the plot goes into the new folder before it is swapped in: drawn after, a build killed (or failing) in between
    # left the new index without a plot, the old one's gone with the old folder
    extra = {} if chose_exact or no_plot else {TUNE_PNG: lambda path: plot_recall_qps(report, path, source=f"run {run.dir}")}
    # the measured recall is what serve trusts, so tune.json is written and checksummed with the index
    report.index.save(out, model_fingerprint=fp, tuning=tuning, extra=extra)
    say(report.table())
    say(f"why: {report.reason}")
    if chose_exact:
        say(f"chosen: exact search, {c.qps_batch:,.0f} QPS batched, p99 {c.p99_ms:.3f} ms single")
        say(f"saved to {out} (model {fp}); choice and measurements in {out / TUNE_JSON}")
        return BuiltIndex(out, report.index, fp, tuning, report)
    verdict = "meets" if report.met_target else "does NOT meet"
    say(f"chosen: {setting_text(c.factory, c.params)} recall@{policy.k} {c.recall:.4f} ({verdict} {policy.target_recall:g}; "
        f"{queries_note(report.n_queries, report.n_distinct_queries)}){_similar_text(tuning)}, {c.qps_batch:,.0f} QPS batched, "
        f"p99 {c.p99_ms:.3f} ms single; exact {report.exact_qps_batch:,.0f} QPS")
    if similar_note:
        log.warning("%s", similar_note)
    say(f"saved to {out} (model {fp}); table {out / TUNE_JSON}" + ("" if no_plot else f", plot {out / TUNE_PNG}"))
    return BuiltIndex(out, report.index, fp, tuning, report)


def _similar_text(tuning: dict[str, Any]) -> str:
    """``; item queries (similar) recall@10 0.2100 on 500 items``: the chosen line's item-query recall, if measured."""
    rec = tuning.get("similar_recall") or {}
    if rec.get("recall") is None:
        return ""
    return f"; item queries (similar) recall@{rec['k']} {rec['recall']:.4f} on {plural(rec['queries'], 'item')}"
