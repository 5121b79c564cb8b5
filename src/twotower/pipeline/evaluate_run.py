"""Evaluate a saved run against baselines on its own split, from the files in the run folder."""
from __future__ import annotations

import functools
import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from twotower.config import EvalConfig
from twotower.data.interactions import encode_interactions, to_csr
from twotower.data.readers import read_interactions
from twotower.errors import ConfigError, DataError
from twotower.utils.arguments import check_flag
from twotower.evaluation.full_lists import counting_at, past_catalogue, past_rankable, rankable_items
from twotower.evaluation.protocol import PER_USER_METRICS, EvalProtocol, evaluate_segments, parse_metric
from twotower.pipeline.artifacts import TrainedRun, check_loaded_run, run_part_file
from twotower.pipeline.run_inputs import read_run_interactions
from twotower.pipeline.tuned_baselines import TUNED_FILE, cached_tuning, is_kept, tuning_key
from twotower.utils.wording import plural

__all__ = ["RunMatrices", "run_matrices", "evaluate_run", "RunScorer", "SEGMENTS", "NoHeldOutSplit"]

#: ``evaluate_run(segments=...)`` / ``evaluate --segments``: each splits the held-out pairs in two, by whether the
#: item (``cold-items``) or the user (``new-users``) has any row in the run's training data (``data/train.csv``)
SEGMENTS = {"cold-items": ("cold items", "warm items"), "new-users": ("new users", "known users")}

log = logging.getLogger(__name__)


class NoHeldOutSplit(ConfigError):
    """The run has no copy of the split ``evaluate_run`` is asked to score (it was trained without it). Said in
    Python's words (``test_file=``, ``split=``); ``split`` and ``run_dir`` let `twotower evaluate` say it in its
    flags' without reading the message back."""

    def __init__(self, split: str, run_dir: Path, *, other: bool) -> None:
        if split == "test":
            hint = "give a held-out file as test_file=PATH" + (", or score split='valid'" if other else "")
        else:
            hint = ("it was trained without validation data (data.valid, or frames={'valid': df}, gives it some)"
                    + ("; score split='test'" if other else ""))
        super().__init__(f"split={split!r}: run {run_dir} has no {split} split ({run_dir / 'data' / f'{split}.csv'}); "
                         f"{hint}")
        self.split, self.run_dir = split, run_dir

    def command_line(self) -> ConfigError:
        """The same refusal in `twotower evaluate`'s words: the flags that give the run the split."""
        hint = ("give the held-out file to `twotower evaluate --test FILE`, or `--test FILE` to `twotower train`"
                if self.split == "test" else "give `--valid FILE` to `twotower train`")
        path = self.run_dir / "data" / f"{self.split}.csv"
        return ConfigError(f"run {self.run_dir} has no {self.split} split ({path}): {hint}")


class RunMatrices:
    def __init__(self, train: sp.csr_matrix, valid: sp.csr_matrix | None, test: sp.csr_matrix | None, report: dict[str, Any]):
        self.train, self.valid, self.test, self.report = train, valid, test, report


def run_matrices(run: TrainedRun) -> RunMatrices:
    mats: dict[str, sp.csr_matrix | None] = {}
    report: dict[str, Any] = {}
    for name in ("train", "valid", "test"):
        path = run_part_file(run.dir, name)
        if path is None:
            mats[name] = None
            continue
        train_cfg = run.config.train  # the run's own progress settings: a 16M-row data/train.csv read in silence
        df = read_interactions(path, log_every_s=train_cfg.log_every_s if train_cfg.progress else None)
        _as_given(run, name, df)
        enc, r = encode_interactions(df, run.user_vocab, run.item_vocab, name=name, quiet=True)  # told at training
        report[name] = _file_report(df, r)
        mats[name] = to_csr(enc)
    if mats["train"] is None:
        raise FileNotFoundError(f"{run.dir / 'data' / 'train.csv'} missing")
    return RunMatrices(mats["train"], mats["valid"], mats["test"], report)  # type: ignore[arg-type]


#: what the reader of a file counted that its copy in the run folder no longer holds (the copy is its rows kept)
_GIVEN_FILE_COUNTS = ("rows_read", "duplicates_dropped", "conflicting_duplicates_dropped")


def _as_given(run: TrainedRun, name: str, df: pd.DataFrame) -> None:
    """Put on ``df`` (the run's copy ``data/<name>.csv``) the counts training's reader made of the file the user gave
    (run.json's ``report.read``): the copy holds the rows kept, so a test file of 8 rows, 1 an exact repeat, was
    said to have ``held_out_rows`` 7 and no duplicates, where ``--test`` of the same file says 8 and 1. A split
    part (``data.path``) has no file of its own, and a copy that is not those rows keeps its own counts."""
    report = run.info.get("report") if isinstance(run.info, dict) else None
    read = report.get("read", {}).get(name) if isinstance(report, dict) else None
    # the copy's lines, not the rows read back from it: two clicks apart by a fraction of a second, both kept, are
    # written with one floored time and read back as a repeat
    if not isinstance(read, dict) or read.get("rows") != _rows_read(df):
        return
    df.attrs["report"] = {**df.attrs.get("report", {}), **{k: read[k] for k in _GIVEN_FILE_COUNTS if k in read}}


def _test_file_name(test_file: str | Path | pd.DataFrame) -> str:
    """How messages name ``test_file``: a frame read as a file (as ``history_from`` reads one) was named by its
    whole printout, where the file's name goes."""
    return "<DataFrame test_file>" if isinstance(test_file, pd.DataFrame) else str(test_file)


def _rows_read(df: pd.DataFrame) -> int:
    """The rows of the file ``df`` was read from, its repeats (which ``read_interactions`` drops) included."""
    return int(df.attrs.get("report", {}).get("rows_read", len(df)))  # a frame it did not give: its own rows


def _file_report(df: pd.DataFrame, encoded: dict[str, Any]) -> dict[str, Any]:
    """``encoded`` (:func:`encode_interactions`' report on ``df``) with what the reader of ``df``'s file counted:
    ``rows_read`` (the file's rows) and the repeated rows it dropped before ``df`` (``duplicates_dropped``,
    ``conflicting_duplicates_dropped``): ``held_out_rows`` counted the rows left after them, as if the file had no
    repeats (140 rows, 40 of them duplicates, read as 100)."""
    read = df.attrs.get("report", {})
    return {**encoded, "users_in": int(df["user_id"].nunique()), "rows_read": _rows_read(df),
            "duplicates_dropped": int(read.get("duplicates_dropped", 0)),
            "conflicting_duplicates_dropped": int(read.get("conflicting_duplicates_dropped", 0))}


class RunScorer:
    """Scorer protocol over a saved run; ``rank`` takes the exact index path of `recommend` and the service.

    ``histories`` (:func:`~twotower.pipeline.histories.read_input_histories`) replace the training history as
    the users' input, as ``recommend --history-from`` reads them: ``evaluate --history-from`` scored them by a
    plain matrix product instead, whose last float bits differ from the index's, so a near-tie at the cut could
    swap and the figures disagreed with the lists `recommend --history-from` prints (ML-100K: HitRate@20 0.5567
    against 0.5578 for the same histories read as the stored ones).
    """

    def __init__(self, run: TrainedRun, histories: Any = None) -> None:
        from twotower.pipeline.histories import HistoryScorer

        self.run = run
        self.histories = histories
        # built once (it checks the histories belong to this run), not per scored chunk
        self._from_histories = HistoryScorer(run, histories) if histories is not None else None
        self._index = None

    def score(self, users: np.ndarray) -> np.ndarray:
        if self._from_histories is not None:
            return self._from_histories.score(users)
        return self.run.scores_for_users(users)

    def rank(self, users: np.ndarray, k: int, exclude: sp.csr_matrix | None) -> np.ndarray:
        """Top-``k`` item rows ``[B, k]`` (-1 padded) by exact search, the lists `twotower recommend` prints."""
        from twotower.pipeline.recommend import open_run_index, recommend_users

        if self._index is None:
            self._index, _ = open_run_index(self.run, exact=True)
        users = np.asarray(users, np.int64)
        if exclude is not None:
            # ``exclude`` is aligned with ``users`` (row j belongs to users[j]); recommend_users reads
            # exclusions by user row, so place row j at row users[j] of a [U, I] matrix
            n_rows = int(users.max()) + 1 if users.size else 0
            place = sp.csr_matrix((np.ones(users.size, np.float32), (users, np.arange(users.size))), shape=(n_rows, users.size))
            exclude = (place @ sp.csr_matrix(exclude)).tocsr()
        return recommend_users(self.run, users, k, exclude, index=self._index, histories=self.histories).ids


def _warn_ks_past_rankable(ks: Sequence[int], relevant: sp.csr_matrix, exclude: sp.csr_matrix) -> None:
    """Warn of a k below the catalogue that still reaches every item some evaluated users can be shown (the
    catalogue less their excluded history): `--ks 1600` on ML-100K's 1,615 items gave Recall@1600 1.0000 for
    every model, popularity included, without the warning a k of 1,615 gets."""
    if not ks:
        return
    rankable = rankable_items(relevant, exclude)
    for k in ks:
        full = int((rankable <= k).sum())
        if full:
            log.warning("%s, so their %s say nothing about the ranking", past_rankable(k, full, len(rankable)),
                        counting_at(k))


def evaluate_run(
    run: TrainedRun,
    *,
    split: str = "test",
    baselines: tuple[str, ...] | None = None,
    ks: tuple[int, ...] | None = None,
    select_metric: str | None = None,
    history_from: Sequence[str | Path | pd.DataFrame] | str | Path | pd.DataFrame | None = None,
    test_file: str | Path | pd.DataFrame | None = None,
    ease_max_items: int | None = None,
    ease_low_rank_max_items: int | None = None,
    exclude_seen: bool = True,
    segments: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """One row per model: every metric plus fit seconds (baselines tuned on valid).

    ``history_from`` (interaction files, e.g. the run's ``train.csv`` and
    ``valid.csv``, or DataFrames with those files' columns) replaces the training history as every model's input: the
    two-tower user vectors and the baselines' user rows are read from those
    files (see :mod:`twotower.pipeline.histories`), without refitting, and their
    items are excluded from ranking too. ``test_file``: score this interactions
    file as the test split (ids outside the run's vocabularies are dropped and
    counted) instead of the run's own ``data/test.csv`` (a DataFrame with the file's columns may stand for it, named
    ``<DataFrame test_file>`` in messages); a run trained without the split asked for (no test or
    validation data) is refused with :class:`NoHeldOutSplit`, a ConfigError. Above ``ease_max_items`` items (None: the run's
    ``eval.ease_max_items``), or where its dense solve would not fit in the available memory, EASE is solved on
    its Gram matrix's ``eval.ease_eigenpairs`` leading eigenpairs (its row says ``low-rank``), as the run's
    ``eval.ease_solver`` allows; above ``ease_low_rank_max_items`` (None: ``eval.ease_low_rank_max_items``) or
    past the memory it is skipped, with a warning that says why.
    ``baselines``, ``ks`` and ``select_metric`` left at None are the run's own
    ``eval.*`` settings, so the table agrees with the ``metrics.json`` training wrote.
    ``exclude_seen=False`` (`evaluate --no-exclude-seen`, as `recommend --no-exclude-seen`) ranks the full catalogue
    for every model without masking the users' train (+ valid, + input history) items, so a held-out repeat (a
    re-purchase) can be hit; the standard protocol (True) masks them and such a pair is never hit. Every row says
    which in its ``exclude_seen`` field, and the split its figures are on (``"test"`` or ``"valid"``) in ``split``
    (with ``test_file``, the file too, in ``test_file``), and the counts its warnings give: ``held_out_rows`` (the
    file's rows), ``held_out_rows_dropped`` (naming a user or item outside the vocabularies),
    ``held_out_unknown_users`` / ``held_out_unknown_items``, ``held_out_duplicates_dropped`` /
    ``held_out_conflicting_duplicates_dropped`` (repeating an earlier row's user, item and timestamp: read once),
    ``held_out_pairs``, ``held_out_pairs_excluded_as_seen`` (never hit), with ``history_from``
    ``held_out_pairs_in_input_history``, and ``users_empty_input_history`` (evaluated users whose input history, the
    ``history_from`` files or else the training data, holds no item the user tower reads, none or only items without
    training interactions: EASE and ItemKNN give them the catalogue in
    item-id order).
    ``segments`` (names of :data:`SEGMENTS`) adds, after each model's row, a row per part of the held-out pairs:
    ``"cold-items"`` those whose item has no row in the run's training data (``data/train.csv``: no ID-table model
    learnt it; only an item tower reading features or text can place it) and the others, ``"new-users"`` likewise by
    user. Each such row has ``segment`` (``"cold items"``, ``"warm items"``, ``"new users"``, ``"known users"``),
    ``held_out_pairs`` and ``users_held_out`` (its distinct pairs and users; its pairs' and users' other counts are its
    own too, its file's rows and ids the whole file's), and the figures :func:`evaluate` gives
    with those pairs alone held out (same ranked lists, same exclusions); the model's own row then has
    ``segment: "all"`` and ``held_out_pairs``. A segment whose pairs all fall on one side adds no rows, with a
    warning.
    """
    from twotower.evaluation.baselines import (
        EASE,
        EASE_LAMBDAS,
        ItemKNN,
        Popularity,
        ease_baseline_solver,
        tune_ease,
        tune_itemknn,
    )
    from twotower.evaluation.low_rank_ease import LowRankEASE, tune_low_rank_ease
    from twotower.pipeline.histories import (
        HistoryBaselineScorer,
        exclude_histories,
        read_input_histories,
        sequences_as_read,
    )

    # checked before any work, as the CLI checks its flags: any split but "test" used to score valid, and a
    # misspelt baseline failed only after the two-tower row (and the baselines before it) were computed
    check_loaded_run(run, "evaluate_run")
    exclude_seen = check_flag(exclude_seen, "exclude_seen")
    if split not in ("test", "valid"):
        raise ConfigError(f"split: must be 'test' or 'valid', got {split!r}")
    ev = run.config.eval  # what training evaluated with: the defaults of this table
    baselines = ev.baselines if baselines is None else baselines
    ks = ev.ks if ks is None else ks
    select_metric = ev.select_metric if select_metric is None else select_metric
    if isinstance(segments, str):
        raise ConfigError(f"segments: must be a sequence of names, e.g. ({segments!r},), not the string {segments!r}")
    segments = tuple(segments or ())
    for name in segments:
        if name not in SEGMENTS:
            raise ConfigError(f"segments: unknown {name!r}; choose from {', '.join(SEGMENTS)}")
    if len(set(segments)) < len(segments):
        raise ConfigError(f"segments: {segments!r} names a segment twice")
    if isinstance(baselines, str):
        raise ConfigError(f"baselines: must be a sequence of names, e.g. ({baselines!r},), not the string {baselines!r}")
    EvalConfig(baselines=tuple(baselines))  # an unknown or repeated name: ConfigError naming it
    max_items = ev.ease_max_items if ease_max_items is None else ease_max_items
    low_rank_max_items = ev.ease_low_rank_max_items if ease_low_rank_max_items is None else ease_low_rank_max_items
    for arg, limit in (("ease_max_items", max_items), ("ease_low_rank_max_items", low_rank_max_items)):
        if isinstance(limit, bool) or not isinstance(limit, (int, np.integer)) or limit < 1:
            # as eval.ease_max_items is checked: -1 skipped EASE with "3,416 items > eval.ease_max_items=-1"
            raise ConfigError(f"{arg}: must be an integer >= 1 (or None: the run's "
                              f"eval.{arg}), got {limit!r}")
    train_cfg = run.config.train  # the run's own progress settings, as its training used them
    # ks=10 or ks=(0,), and a select_metric such as "ndcg@10", were refused only after the run's split files were
    # read (the metric after the two-tower row was computed, when the first baseline was tuned)
    protocol = EvalProtocol(ks=ks, log_every_s=train_cfg.log_every_s if train_cfg.progress else None)
    parse_metric(select_metric, PER_USER_METRICS)  # the tunings' measure: Coverage and MeanPop cannot tune
    m = run_matrices(run)
    if test_file is not None:
        if split != "test":
            raise ConfigError("a test file replaces the test split: use it with split='test' (--split test)")
        df = read_run_interactions(run, test_file, name=_test_file_name(test_file), use="held-out relevant pairs")
        enc, r = encode_interactions(df, run.user_vocab, run.item_vocab, name=_test_file_name(test_file),
                                     rows_read=_rows_read(df))
        m.test = to_csr(enc)
        m.report["test"] = _file_report(df, r)
    relevant = m.test if split == "test" else m.valid
    if relevant is None:
        raise NoHeldOutSplit(split, run.dir, other=(m.valid if split == "test" else m.test) is not None)
    if relevant.nnz == 0:  # every model then scored 0 users: a table and metrics.json of NaN
        source = _test_file_name(test_file) if test_file is not None else run.dir / "data" / f"{split}.csv"
        raise DataError(f"none of its {plural(m.report[split]['rows_read'], 'row')} "
                        f"({plural(m.report[split]['users_in'], 'user')}) names a "
                        f"user and an item the run was trained on, so there is nothing to score; the run's ids are in "
                        f"{run.dir / 'vocab'}", file=str(source))
    rep = m.report[split]
    if rep["rows_dropped"] and test_file is None:  # read quietly above (a --test file's drops are warned about as read)
        # told when the run was trained, but not by this table: its figures leave those held-out pairs out
        log.warning("%d of %d %s rows %s a user or item unknown to the run (%s, %s outside its vocabularies): "
                    "those pairs are left out of every figure, not counted as misses", rep["rows_dropped"],
                    rep["rows_read"], split, "names" if rep["rows_dropped"] == 1 else "name",
                    plural(rep["unknown_users"], "user"), plural(rep["unknown_items"], "item"))
    exclude = m.train
    if split == "test" and m.valid is not None:
        exclude = (m.train + m.valid).tocsr()
        exclude.data[:] = 1.0
    # "is not None": a DataFrame has no truth value (read_input_histories says what to pass instead)
    histories = read_input_histories(run, history_from) if history_from is not None else None
    never_hit = functools.partial(_never_hit, seen=exclude, histories=histories, exclude_seen=exclude_seen)
    counts = never_hit(relevant)
    seen = counts["held_out_pairs_excluded_as_seen"]  # unmasked (exclude_seen false), a repeat can be hit: 0
    if seen:  # e.g. --test valid.csv: pairs already in the excluded train (+ valid) history can never be ranked
        what = "train + valid" if split == "test" and m.valid is not None else "train"
        log.warning("%s of %s %s in the %s history, which is excluded from ranking, so %s never hit%s",
                    f"{seen:,}", plural(int(relevant.nnz), f"{split} pair"), "is" if seen == 1 else "are", what,
                    "it is" if seen == 1 else "they are", " (is the test file really held out?)" if seen == relevant.nnz else "")
    if histories is not None and exclude_seen:
        leaked = counts["held_out_pairs_in_input_history"]
        exclude = exclude_histories(exclude, histories)  # the input history is never recommended
        if leaked:  # e.g. --split valid with valid.csv among the inputs: those targets can never be hit
            log.warning("%s of %s %s in the input history (%s), so %s excluded and never hit",
                        f"{leaked:,}", plural(int(relevant.nnz), f"{split} pair"), "is" if leaked == 1 else "are",
                        ", ".join(histories.files), "it is" if leaked == 1 else "they are")
    if not exclude_seen:  # every model ranks the whole catalogue, seen items included (recommend's rule)
        exclude = sp.csr_matrix(relevant.shape, dtype=np.float32)
    pop = np.asarray(m.train.sum(axis=0)).ravel()
    too_long = [k for k in protocol.ks if k >= run.n_items]
    if too_long:  # every list then holds every rankable item: recall 1, precision set by the catalogue size
        log.warning("%s, so their metrics say nothing about the ranking, NDCG and MRR aside (they weigh where the "
                    "hits fall in it)", past_catalogue(too_long, run.n_items))
    _warn_ks_past_rankable([k for k in protocol.ks if k < run.n_items], relevant, exclude)
    rows: list[dict[str, Any]] = []
    log_rows = run.dir / "log.jsonl"
    fit_s = None
    if log_rows.exists():
        import json

        fit_s = sum(json.loads(line).get("seconds", 0.0) for line in log_rows.read_text().splitlines() if line.strip())
        # and the item-item term fitted after training (an EASE tuned on valid, as the EASE row's fit_s counts it)
        term = run.info.get("item_item")
        fit_s += float(term.get("seconds", 0.0)) if isinstance(term, dict) else 0.0
    # the held-out file's users: those whose every row names an id outside the vocabularies (an item that never
    # occurs in train) are skipped by every model, and the table must say how many (sparse data: many)
    # and which split each row's figures are on: `--json` rows and a `--csv -` (which gets no record) did not say, so
    # a saved valid table read like a test one
    held_out = {"users_held_out": m.report[split]["users_in"], "exclude_seen": exclude_seen, "split": split}
    # what the warnings above say of the held-out file, in every row: `--json` and `--csv` gave figures over fewer
    # pairs than the file held without saying how many were left out, or why (the rows of unknown ids, the pairs
    # that are never hit); the pair counts are each row's own (a segment's of its pairs)
    held_out.update(held_out_rows=rep["rows_read"], held_out_rows_dropped=int(rep["rows_dropped"]),
                    held_out_unknown_users=int(rep["unknown_users"]),
                    held_out_unknown_items=int(rep["unknown_items"]),
                    held_out_duplicates_dropped=rep["duplicates_dropped"],
                    held_out_conflicting_duplicates_dropped=rep["conflicting_duplicates_dropped"])
    if isinstance(test_file, (str, os.PathLike)):  # rows said `split: test` without which file was scored
        held_out["test_file"] = os.path.abspath(test_file)
    # each user's input history: the rows of known items in the history_from files, else the training rows
    # as the user tower reads them: a history of only items without training interactions is an empty one
    lengths = np.diff(m.train.indptr) if histories is None else sequences_as_read(run, histories.sequences).lengths()
    held_out["users_empty_input_history"] = _empty_input_histories(run, relevant, lengths, histories,
                                                                   baselines, segments)
    parts = _segment_parts(relevant, m.train, segments, split,
                           unknown={"cold-items": int(rep["unknown_items"]), "new-users": int(rep["unknown_users"])},
                           tables={"cold-items": run.config.data.items, "new-users": run.config.data.users})

    def evaluate(scorer: Any, relevant: sp.csr_matrix, exclude: sp.csr_matrix, protocol: EvalProtocol,
                 pop: np.ndarray, *, what: str) -> dict[str, Any]:
        """The model's figures; its segment rows are kept in ``by_segment`` for the row that follows."""
        res, by_part = evaluate_segments(scorer, relevant, exclude, protocol, pop, parts, what=what)
        # the segment's own users and pairs replace the whole file's counts of them that ``held_out`` holds
        by_segment[:] = [{"segment": name, **part_res, "held_out_pairs": int(parts[name].nnz), **held_out,
                          "users_held_out": int((np.diff(parts[name].indptr) > 0).sum()),
                          **_empty_history_count(parts[name], lengths), **never_hit(parts[name])}
                         for name, part_res in by_part.items()]
        segment = {"segment": "all"} if parts or segments else {}
        return {**res, **segment, "held_out_pairs": int(relevant.nnz), **counts}

    def append(row: dict[str, Any]) -> None:
        rows.append(row)
        rows.extend({"model": row["model"], **r} for r in by_segment)

    by_segment: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    tower = RunScorer(run, histories)  # ranks as `recommend` does, with --history-from or without
    res = evaluate(tower, relevant, exclude, protocol, pop, what=f"evaluating two-tower on {split}")
    append({"model": "two-tower", "fit_s": fit_s, "eval_s": time.perf_counter() - t0, **res, **held_out})
    chosen: list[str] = []
    reused: list[bool] = []
    tune_s: dict[str, float] = {}
    unsaved: list[str] = []  # tuned now, but another writer held the run (or it is read-only): not in the file

    def tuned(name: str, tune: Any, grid_arg: str, keep: dict[str, Any], entry: str | None = None,
              **extra: Any) -> float:
        """The baseline's tuned setting, from <run>/tuned_baselines.json (its ``entry``, default ``name``) when
        the run's data, the grid and ``extra`` (passed to ``tune`` too) still match.

        When it is tuned now, ``keep`` receives the tuning's shared work (EASE's Gram matrix, ItemKNN's similarity
        pass, the low-rank EASE's chosen model), so the chosen setting is fitted without doing that work twice.
        """
        key = {**tuning_key(tune, grid_arg, metric=select_metric, train=m.train, valid=m.valid), **extra}
        value, was_cached, seconds = cached_tuning(run.dir, entry or name, key, lambda: tune(
            m.train, m.valid, metric=select_metric, log_every_s=protocol.log_every_s, keep=keep, **extra))
        reused.append(was_cached)
        if was_cached:
            tune_s[name] = seconds
        elif not is_kept(run.dir, entry or name, key):  # warned about already; the summary must not say "saved"
            unsaved.append(name)
        return value

    eigenpairs = ev.ease_eigenpairs

    def tune_low_rank(train: Any, valid: Any, lambdas: Sequence[float] = EASE_LAMBDAS, *, metric: str,
                      log_every_s: float | None, keep: dict[str, Any], eigenpairs: int,
                      max_users: int | None, seed: int) -> tuple[float, list[dict]]:
        """:func:`tune_low_rank_ease` as the tuning cache calls a tuner: ``(λ, table)``, the model in ``keep``."""
        model, table = tune_low_rank_ease(train, valid, lambdas, metric, k=eigenpairs, log_every_s=log_every_s,
                                          max_users=max_users, seed=seed)
        keep["model"] = model
        return model.l2, table

    for name in baselines:
        t0 = time.perf_counter()
        info = ""
        how = None
        if name == "ease":
            how = ease_baseline_solver(m.train.shape[1], solver=ev.ease_solver, max_items=max_items,
                                       eigenpairs=eigenpairs, low_rank_max_items=low_rank_max_items)
            if how is None:
                continue
        if name != "popularity":  # EASE's solve and ItemKNN's similarity pass take seconds to minutes, said first
            log.info("fitting the %s baseline on the run's training interactions ...", name)
        if name == "popularity":
            scorer = Popularity().fit(m.train)
        elif name == "ease" and how == "low_rank":
            # tuned on the dense EASE's λ grid from one eigensolve, kept in its own entry of the tuning cache; the
            # label says low-rank, so the row is not read as the exact EASE
            # the run's seed draws the eigensolver's start and the sample of validation users, as it draws
            # EASE's and ItemKNN's samples below (it was always 0, whatever train.seed)
            keep: dict[str, Any] = {}
            seed = run.config.train.seed
            lam = (tuned(name, tune_low_rank, "lambdas", keep, entry="ease_low_rank", eigenpairs=eigenpairs,
                         max_users=ev.ease_tune_max_users, seed=seed)
                   if m.valid is not None else LowRankEASE(k=eigenpairs).l2)
            scorer = keep.pop("model", None) or LowRankEASE(lam, k=eigenpairs, seed=seed).fit(m.train)
            info = f"low-rank, {scorer.eigenpairs} eigenpairs, λ={scorer.l2:g}"  # kept: at most min(users, items)
        elif name == "ease":
            # no valid split: EASE's own default λ (tuning needs held-out data)
            keep = {}
            # the item-item term's tuning rows: tune_ease takes those of the λ in its grid where they were computed
            # on the same train, valid and metric (3 of the 7 solves by default), and ignores them otherwise
            term = run.info.get("item_item")
            known = term.get("lambda_table") if isinstance(term, dict) else None
            # on the sample of validation users the item-item term drew (the same setting and seed): its rows'
            # key then matches, and each λ scores at most eval.ease_tune_max_users users, as ItemKNN's k does
            lam = (tuned(name, functools.partial(tune_ease, known=known), "lambdas", keep,
                         max_users=ev.ease_tune_max_users, seed=run.config.train.seed)
                   if m.valid is not None else EASE().l2)
            scorer = EASE.from_tuning(keep, lam) if keep else EASE(l2=lam).fit(m.train)
            keep.clear()  # the Gram matrix ([I, I] float64) is not held through the evaluation
            info = f"λ={scorer.l2:g}"
        elif name == "itemknn":
            keep = {}
            # each k scores the validation users over the catalogue (63-167 s a k at 30,000 users x 40,000
            # items): a sample of them drawn with the run's seed, both in the cache key (another sample's k is
            # tuned again, not reused)
            knn_k = (int(tuned(name, tune_itemknn, "ks", keep, max_users=ev.ease_tune_max_users,
                               seed=run.config.train.seed)) if m.valid is not None else ItemKNN().k)
            scorer = (ItemKNN.from_tuning(keep, knn_k, log_every_s=protocol.log_every_s) if keep
                      else ItemKNN(k=knn_k, log_every_s=protocol.log_every_s).fit(m.train))
            keep.clear()  # the similarity pass (1.4 GB at 299K items) is not held through the evaluation
            info = f"k={scorer.k}"
        else:
            raise ValueError(f"unknown baseline {name!r}")
        if info:
            chosen.append(f"{'EASE' if name == 'ease' else scorer.name} {info}")
        # fit_s counts tuning as part of fitting, with its stored cost when the setting was reused,
        # so the column does not change between the first and later evaluations
        fit = time.perf_counter() - t0 + tune_s.get(name, 0.0)
        t1 = time.perf_counter()
        scored = scorer if histories is None else HistoryBaselineScorer(scorer, histories)
        res = evaluate(scored, relevant, exclude, protocol, pop,
                       what=f"evaluating {name}" + (f" ({info})" if info else "") + f" on {split}")
        append({"model": f"{name}" + (f" ({info})" if info else ""), "fit_s": fit, "eval_s": time.perf_counter() - t1,
                **res, **held_out})
    if chosen:  # one line instead of one per tried setting
        if not reused:
            how = "defaults (no valid split to tune on)"
        elif all(reused):
            how = f"tuned earlier on valid {select_metric}, read from {run.dir / TUNED_FILE}"
        elif unsaved:
            how = f"tuned on valid {select_metric}; not saved to {run.dir / TUNED_FILE}: {', '.join(unsaved)} tuned again next time"
        else:
            how = f"tuned on valid {select_metric}, saved to {run.dir / TUNED_FILE}"
        log.info("baselines: %s (%s)", ", ".join(chosen), how)
    return rows


def _never_hit(pairs: sp.csr_matrix, *, seen: sp.csr_matrix, histories: Any, exclude_seen: bool) -> dict[str, int]:
    """How many of the held-out ``pairs`` can never be hit: those in the ``seen`` history that is excluded from ranking
    (``held_out_pairs_excluded_as_seen``; none when ``exclude_seen`` is false: unmasked, a repeat can be hit) and,
    with input ``histories``, those in them but not in ``seen`` (``held_out_pairs_in_input_history``), counted apart:
    with --history-from train.csv valid.csv the same repeats were reported twice, in two wordings."""
    if not exclude_seen:
        return {"held_out_pairs_excluded_as_seen": 0, **({} if histories is None else {
            "held_out_pairs_in_input_history": 0})}
    counts = {"held_out_pairs_excluded_as_seen": int(pairs.multiply(seen).nnz)}
    if histories is not None:
        in_history = pairs.multiply(histories.matrix()).astype(bool)
        counts["held_out_pairs_in_input_history"] = (int(in_history.nnz)
                                                     - int(in_history.multiply(seen).astype(bool).nnz))
    return counts


def _empty_input_users(relevant: sp.csr_matrix, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rows of the evaluated users (a held-out pair each) and of those among them whose input history holds
    no item (``lengths[U]``: each user's input history length)."""
    users = np.flatnonzero(np.diff(relevant.indptr) > 0)
    return users, users[lengths[users] == 0]


def _empty_history_count(pairs: sp.csr_matrix, lengths: np.ndarray) -> dict[str, int]:
    """``users_empty_input_history`` of the users of ``pairs``: a segment row gave the whole file's count, more users
    than the row had."""
    return {"users_empty_input_history": int(len(_empty_input_users(pairs, lengths)[1]))}


#: the baselines that score from the user's history alone: an empty one scores every item 0
_HISTORY_BASELINES = ("ease", "itemknn")


def _empty_input_histories(run: TrainedRun, relevant: sp.csr_matrix, lengths: np.ndarray, histories: Any,
                           baselines: Sequence[str], segments: Sequence[str]) -> int:
    """How many evaluated users (a held-out pair each) have an empty input history, warned about: with
    ``history_from``, those with no row of a known item in the files, as `recommend --history-from` tells of them
    (the table's protocol line says each user's history came from the files: a file of other users, or one whose
    ids lost their leading zeros, gave a full table from empty histories without a word); without it, those with no
    training rows (a time split's new users: 69% of ML-100K's test users from 1998-03-10), whom EASE and ItemKNN
    gave the catalogue in item-id order, an uninformative list averaged into their figures in silence."""
    users, empty = _empty_input_users(relevant, lengths)
    if not len(empty):
        return 0
    n, of, example = f"{len(empty):,}", f"{len(users):,}", run.user_vocab.id_at(int(empty[0]))
    if histories is not None:
        from twotower.pipeline.histories import empty_as_read

        untrained = empty_as_read(run, histories, empty)[1]
        log.warning("%s of %s evaluated users have no rows of known items in the history files %s (e.g. user %r%s): "
                    "each is ranked from an empty input history by every model", n, of,
                    ", ".join(map(str, histories.files)), example, untrained)
        return int(len(empty))
    blind = [name for name in baselines if name in _HISTORY_BASELINES]
    # every item ties at 0, and ties go to the smaller item row: the run's item ids in sorted order
    said = ([f"{' and '.join(blind)} score every item 0 for each of them, so their lists are the catalogue in "
             "item-id order less their excluded items (ties go to the smaller item row), not a ranking"] if blind else [])
    said += ["popularity ranks them as it ranks everyone"] if "popularity" in baselines else []
    said += ["the two-tower model from an empty history and what else its user tower reads (a user table's features)"]
    apart = "" if "new-users" in segments else " (`--segments new-users` scores them apart)"
    log.warning("%s of %s evaluated users have no rows in the run's training data, the history the models read (e.g. "
                "user %r): %s%s", n, of, example, "; ".join(said), apart)
    return int(len(empty))


def _segment_parts(relevant: sp.csr_matrix, train: sp.csr_matrix, segments: Sequence[str],
                   split: str, unknown: dict[str, int] | None = None,
                   tables: dict[str, Any] | None = None) -> dict[str, sp.csr_matrix]:
    """The held-out pairs of each segment (:data:`SEGMENTS`), by the items' (columns') or users' (rows') count of
    training rows; one whose pairs all fall on one side is left out, with a warning saying so. ``unknown``: per
    segment, how many items (users) of the held-out file are outside the run's vocabulary, their rows dropped: a
    run trained without --items has no row for an item without training rows, so its cold pairs were dropped and
    "none of the pairs has an item with no row" read as if the split held no cold items. ``tables``: per segment,
    the item (user) table the run was trained with (None: none), which the warning's advice names."""
    parts: dict[str, sp.csr_matrix] = {}
    for name in segments:
        if name == "cold-items":
            new = np.asarray((train != 0).sum(axis=0)).ravel() == 0  # [I] items without a training row
            first = (relevant @ sp.diags(new.astype(np.float32))).tocsr()
        else:
            new = np.diff(train.indptr) == 0  # [U] users without a training row
            first = (sp.diags(new.astype(np.float32)) @ relevant).tocsr()
        first.eliminate_zeros()
        second = (relevant - first).tocsr()
        second.eliminate_zeros()
        cold, warm = SEGMENTS[name]
        if not first.nnz or not second.nnz:  # the other part is then every pair: the rows "all" already has
            what = "user" if name == "new-users" else "item"
            dropped = (unknown or {}).get(name, 0) if not first.nnz else 0
            why = "" if not dropped else (
                f"; the {plural(dropped, what)} of the {split} file outside the run's vocabulary, whose pairs were "
                f"left out (said above), are the ones without training rows: "
                f"{_table_advice(what, (tables or {}).get(name))}")
            log.warning("segments %s: %s of the %s %s pairs has %s with no row in the run's training data, so no "
                        "%r or %r rows are added (one would be empty, the other the same as 'all')%s", name,
                        "none" if not first.nnz else "every one", f"{int(relevant.nnz):,}", split,
                        "a user" if what == "user" else "an item", cold, warm, why)
            continue
        parts[cold], parts[warm] = first, second
    return parts


def _table_advice(what: str, table: Any) -> str:
    """How to give a held-out file's users (items) outside the run's vocabulary a row the tower can place: a run
    trained with a user table was told to "train with --users FILE", the table it had, which lacked them."""
    if table is None:
        return (f"train with --{what}s FILE ({'an item' if what == 'item' else 'a user'} table) to give them rows the "
                f"{what} tower can place from their features")
    return (f"they are not in the run's {what} table ({table}) either: add them to it and train again to give them "
            f"rows the {what} tower can place from their features")
