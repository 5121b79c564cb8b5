"""High-level Python API: train a run folder from a config, in one call."""
from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
from pathlib import Path
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from twotower.config import RunConfig, config_to_dict
from twotower.errors import ConfigError, OutOfMemory, memory_detail, out_of_memory
from twotower.heartbeat import rank_heartbeats
from twotower.data.splits import warn_split_mismatch
from twotower.pipeline.artifacts import (
    MANIFEST_FILES,
    RUN_MARKERS,
    RUN_OUTPUT_FILES,
    TrainedRun,
    _read_json_dict,
    derived_folders,
    input_digests,
    rebuild_command,
    run_part_file,
    save_run_data,
    verify_data_copies,
    write_manifest,
)
from twotower.pipeline.empty_history import empty_history_skip_reason, first_items, fit_empty_history
from twotower.pipeline.experiment import check_model_fits_data, make_trainer
from twotower.pipeline.item_item import fit_item_item, save_fits
from twotower.pipeline.prepare import Prepared, prepare
from twotower.pipeline.resume import check_frame_tables, resume_frames_run
from twotower.pipeline.resume_results import HeldResults, hold_old_results, weights_digest
from twotower.pipeline.resume_snapshot import SealedRun, hold_sealed_run, put_back_leftover
from twotower.pipeline.saved_config import saved_config_dict
from twotower.pipeline.sources import load_sources, no_item_texts, setting_said
from twotower.models.size import training_oom_message
from twotower.pipeline.staging import (check_new_run_dir, check_room_to_stage, discard_if_empty, needs_staging,
                                       staged_target, staging_path, swap_in, sweep_stale_staging)
from twotower.distributed import other_ranks_quiet
from twotower.training import distributed as tdist
from twotower.training.hooks import draw_curves
from twotower.training.trainer import TrainResult, init_distributed
from twotower.utils.arguments import check_flag
from twotower.utils.atomic import check_output_dir  # the check `twotower train` makes of --out
from twotower.utils.csv_text import csv_sha256
from twotower.utils.dtypes import float32_default
from twotower.utils.folder_lock import exclusive_writer
from twotower.utils.runtime import (freed_memory_retained, preserved_rng, run_threads, scoped_threads, seed_everything,
                                     trains_alone)
from twotower.utils.whole_numbers import cell_text
from twotower.utils.wording import plural

__all__ = ["train_run", "prepare_data", "item_text_embeddings", "encode_item_texts"]

log = logging.getLogger(__name__)

#: how a run folder's writer lock names the holder's command and the way out (train_run and `twotower train`)
RUN_WRITER = ("twotower train", "wait for it to finish, or train into another --out")


def check_run_config(config: Any, where: str) -> None:
    """ConfigError naming ``where`` when ``config`` is not a :class:`RunConfig`.

    A TOML path, a settings dict or None failed later with "AttributeError: 'str' object has no attribute 'data'"
    ('model' from prepare_data): the way to a RunConfig is load_config, which reads each of them."""
    if isinstance(config, RunConfig):
        return
    if isinstance(config, (str, os.PathLike)):
        hint = f"read the file first: cfg = tt.load_config({str(config)!r})"
    elif isinstance(config, Mapping):
        hint = "make one from the settings: cfg = tt.load_config(base=settings)"
    else:
        hint = "make one with tt.load_config() (the defaults), tt.load_config(PATH) or tt.load_config(overrides=[...])"
    raise ConfigError(f"{where}: config must be a RunConfig, got a {type(config).__name__}; {hint}")


def prepare_data(config: RunConfig, frames: Mapping[str, pd.DataFrame] | None = None) -> Prepared:
    """The run's data, read and checked; ``frames`` gives inputs as DataFrames (see ``load_sources``)."""
    check_run_config(config, "prepare_data")
    prep = prepare(load_sources(config.data, seed=config.train.seed, frames=frames,
                                embeds_titles=_text_setting(config),
                                log_every_s=config.train.log_every_s if config.train.progress else None))
    if prep.test is not None and len(prep.test) == 0:
        # likewise: the closing evaluation scored 0 users and wrote a table (and metrics.json) of NaN
        log.warning("test: none of its %s is usable (each names a user or item outside the run's vocabularies), so "
                    "there is no test evaluation; `twotower evaluate --run OUT --test FILE` scores a held-out file "
                    "later", _rows_in(prep, "test"))
        prep.test = None
    if prep.valid is not None and len(prep.valid) == 0:
        # every row named a user or item unseen in training (counted above): validating on nothing gave NaN, no
        # epoch was ever the best, and the run ended in "model.safetensors missing" after training
        log.warning("validation: none of its %s is usable (each names a user or item outside the run's vocabularies); "
                    "early stopping falls back to the training loss", _rows_in(prep, "valid"))
        prep.valid = None
        return prep
    if prep.valid is None:  # said here, not only by the CLI: train_run(frames={"train": df}) stopped on the loss silently
        log.warning("no validation data (--valid FILE, data.valid or frames={'valid': df}): early stopping falls back "
                    "to the training loss")
    _warn_if_valid_within_train(config, prep, frames)
    return prep


def _text_setting(config: RunConfig) -> str | None:
    """The setting by which the item tower embeds item texts (the one the user set, named in messages), or None."""
    item = config.model.item
    return "model.item.dual_head" if item.dual_head else "model.item.text_embeddings" if item.text_embeddings else None


def _rows_in(prep: Prepared, split: str) -> str:
    """"1 row", "12 rows" (the split's rows as read), or "rows" where the count is not known."""
    n = prep.report.get(f"{split}_encoding", {}).get("rows_in")
    return plural(n, "row") if isinstance(n, int) else "rows"


def _warn_if_valid_within_train(config: RunConfig, prep: Prepared,
                                frames: Mapping[str, pd.DataFrame] | None = None) -> None:
    """Say so when validation interactions are also training ones: validation excludes each user's training items,
    so those can never be hit. All of them: nothing is left to find, the metric stays 0 and early stopping keeps
    epoch 1. Some of them (a validation file from another split of the data): the metric counts them as misses,
    and early stopping and the item-item weight are chosen on it -- said with the counts, as `twotower evaluate`
    says it of a test file."""
    valid, train = prep.matrix("valid"), prep.matrix("train")
    if valid is None or train is None or valid.nnz == 0:
        return
    seen = int(valid.astype(bool).multiply(train.astype(bool)).nnz)
    if seen == 0:
        return
    data = config.data

    def given(name: str, what: str) -> str | None:
        # a DataFrame input is named as it was passed: from Python the warning read "the training split of None"
        if frames and name in frames:
            return f"frames[{name!r}]"
        value = getattr(data, name)
        # named as a file, not as a flag: a resume reads the run's own copies, and "--valid RUN/data/valid.csv"
        # named flags its command never had
        return f"the {what} file {value}" if value else None

    held_out = given("valid", "validation") or "the validation split"
    whole = "frames['path']" if frames and "path" in frames else data.path or data.dataset
    source = given("train", "training") or f"the training split of {whole}"
    if seen < valid.nnz:
        log.warning("%s of %s valid pairs in %s %s in %s, whose items validation excludes from ranking, so %s never "
                    "hit: valid %s counts %s as misses, and early stopping and the item-item weight are chosen on it "
                    "(is the validation file held out from this training file?)", f"{seen:,}", f"{valid.nnz:,}",
                    held_out, "is" if seen == 1 else "are", source, "it is" if seen == 1 else "they are",
                    config.eval.select_metric, "it" if seen == 1 else "them")
        return
    log.warning("every validation interaction in %s is also in %s: validation excludes each user's training "
                "items, so nothing is left to find, valid %s stays 0 and early stopping keeps epoch 1; give a "
                "held-out validation file", held_out, source, config.eval.select_metric)


def warn_unread_settings(config: RunConfig) -> None:
    """Settings that this run reads nothing of, said at training: feature columns listed for a tower with
    ``use_features = false`` (read and fitted, then never used: a later `--user-features` was told the run was
    "trained without user feature columns"), item-item settings beside ``model.item_item.enabled = false``, and
    ``model.share_item_embeddings = true`` where no tie can be made."""
    data = config.data
    for side, tower in (("user", config.model.user), ("item", config.model.item)):
        listed = [f"data.{side}_{kind}" for kind in ("categorical", "numeric", "multi") if getattr(data, f"{side}_{kind}")]
        if listed and not tower.use_features:
            log.warning("%s %s no effect: the %s tower reads no features with model.%s.use_features=false; set it to "
                        "true to read them, or drop %s", " and ".join(listed), "has" if len(listed) == 1 else "have",
                        side, side, "them" if len(listed) > 1 else "it")
    model = config.model
    if model.share_item_embeddings and model.user.history in ("transformer", "gru"):
        # the tie needs the item tower's ID table at the history's width: the user tower then learned its own table
        # without a word, though examples/sasrec.toml asks for the tie in writing
        why = ("model.item.use_id=false leaves the item tower no ID table" if not model.item.use_id else
               f"model.item.id_dim {model.item.id_dim} is not model.user.history_dim {model.user.history_dim}"
               if model.item.id_dim != model.user.history_dim else None)
        if why is not None:
            log.warning("model.share_item_embeddings=true ties nothing: %s, so the user tower learns its own item "
                        "table; give them one width to tie them, or set model.share_item_embeddings=false", why)
    term = config.model.item_item
    if not term.enabled:  # `model.item_item.enabled=false model.item_item.lambdas=[5]`: set, and read by nothing
        from dataclasses import fields

        from twotower.config import ItemItemConfig

        unread = [f"model.item_item.{f.name}" for f in fields(term)
                  if f.name != "enabled" and getattr(term, f.name) != getattr(ItemItemConfig(), f.name)]
        if unread:
            log.warning("%s %s no effect: model.item_item.enabled=false fits no item-item term; set it to true, or "
                        "drop %s", ", ".join(unread), "has" if len(unread) == 1 else "have",
                        "them" if len(unread) > 1 else "it")


def item_text_embeddings(config: RunConfig, prep: Prepared, cache_dir: Path | None = None) -> np.ndarray | None:
    """Frozen text embeddings of each item's text columns (title by default), cached on disk."""
    got = encode_item_texts(config, prep, cache_dir)
    return None if got is None else got[0]


def item_texts(meta: Any, cols: list[str]) -> list[str]:
    """Each item row's text for the encoder: its ``cols`` cells as text (:func:`cell_text`: a number as its digits,
    as a CSV table gives it), the missing ones left out, joined by spaces ("" for none)."""
    columns = [[cell_text(v) for v in meta[c].tolist()] for c in cols]
    return [" ".join(t for t in row if t is not None) for row in zip(*columns)] if columns else [""] * len(meta)


def item_has_text(run: Any) -> np.ndarray | None:
    """``[I]`` bool of a loaded run whose item tower reads text: the items whose text columns (data.item_text, else
    the title column) hold any text. An item without any was embedded as the empty string, a vector every such
    item shares, so its semantic head says nothing of it. None when the tower reads no text or the run has no
    item table."""
    tower = run.model.item_tower
    if getattr(tower, "text", None) is None or run.item_meta is None:
        return None
    from twotower.explain.names import title_column

    cols = list(run.config.data.item_text) or [c for c in [title_column(run.title_col, run.item_meta.columns)] if c]
    cols = [c for c in cols if c in run.item_meta.columns]
    has = np.array([bool(t.strip()) for t in item_texts(run.item_meta, cols)], dtype=bool)
    return has if len(has) == run.n_items else None


def encode_item_texts(config: RunConfig, prep: Prepared, cache_dir: Path | None = None) -> tuple[np.ndarray, str] | None:
    """``(embeddings [I, D], encoder model_id)`` of each item's text columns, or None when the model uses none.

    The encoder is the packaged MiniLM on the backend ``train.encoder_backend`` names, else
    ``TWOTOWER_ENCODER_BACKEND``, else torch; its ``model_id`` (weights, and the backend unless plain torch) is what
    ``run.json`` records as ``item_text_encoder``.
    """
    item = config.model.item
    if not (item.text_embeddings or item.dual_head):
        if config.data.item_text:  # the only reader of these columns is the text encoder: say it is off
            log.warning("data.item_text=%s has no effect: the item tower reads text only with "
                        "model.item.text_embeddings=true (or model.item.dual_head=true); set one to embed these "
                        "columns, or drop data.item_text", ",".join(config.data.item_text))
        return None
    if prep.item_meta is None:  # a Prepared made without prepare_data, which refuses this before reading the data
        raise no_item_texts(_text_setting(config))
    cols = list(prep.sources.item_spec.text) if prep.sources.item_spec is not None and prep.sources.item_spec.text else []
    if not cols:
        from twotower.explain.names import title_column

        # the column the catalogue names items by (data.title_col, else a "title" column): with data.title_col
        # unset the lists showed the "title" column while the text encoder refused to find one
        title = title_column(prep.sources.title_col, prep.item_meta.columns)
        cols = [title] if title else []
    if not cols:
        raise ConfigError("no text column for item text embeddings: set data.item_text or data.title_col")
    texts = item_texts(prep.item_meta, cols)
    empty = [r for r, t in enumerate(texts) if not t.strip()]
    if empty:  # each is encoded as the empty string: one vector for all of them, which tells them apart by nothing
        ids = getattr(getattr(prep, "item_vocab", None), "id_at", None)
        first = ids(empty[0]) if ids is not None else f"row {empty[0]}"
        log.warning("%d of %d items have no text in %s (the first: item %s): the text encoder embeds each as the empty "
                    "string, one vector they all share; the model tells them apart by their ID and features only, "
                    "and `similar` queries such an item by its served vector", len(empty), len(texts),
                    ", ".join(cols), first)
    from twotower.text import EncoderSettings, cached_encode, load_text_encoder
    from twotower.text.encoder import log_truncation

    # the config's backend before the variable's: a run's config.json names the one its texts were encoded with
    backend = config.train.encoder_backend or EncoderSettings.env_backend()
    enc = load_text_encoder(None, settings=EncoderSettings(backend=backend, threads=EncoderSettings.env_threads()))
    # the one user cache, shared with `twotower search`, and the packaged encoder's length, as search reads it
    from twotower.config import SearchConfig

    from twotower.utils.cache_home import expand_cache_path

    cache = cache_dir or expand_cache_path(SearchConfig.cache_dir)
    log_truncation(enc, texts, SearchConfig.max_length, cache_dir=cache, what="item texts",
                   seen_by="the item tower's text embeddings read")
    return cached_encode(enc, texts, cache, max_length=SearchConfig.max_length), enc.model_id


@float32_default()
def train_run(config: RunConfig, out: str | Path, *, resume: bool = False,
              frames: Mapping[str, pd.DataFrame] | None = None) -> tuple[TrainedRun, TrainResult, Prepared]:
    """Read data, train, save the run folder; returns the loaded run, the training result and the data.

    ``frames`` gives any of the data inputs as DataFrames instead of files (``{"train": df, "valid": df2,
    "items": items}``; keys as the ``data.*`` file settings); the run folder keeps the interactions as CSV like
    files (``data/*.csv``), which ``resume=True`` reads where neither ``config`` nor ``frames`` name training data.
    An ``items`` or ``users`` frame is not kept as such: give it again to resume.

    The call trains on ``train.threads`` threads (else ``TWOTOWER_THREADS``, else half the idle cores; the count
    used is what the run's config.json records) and seeds
    Python's, NumPy's and torch's global generators with ``train.seed``; both are put back as they were when it
    returns, so the caller's thread counts and random streams are its own again. Being process state, one training
    runs at a time: a call while another thread's training runs is refused (ConfigError).

    Under ``torchrun`` every rank calls this: the process group is joined
    first and only rank 0 writes and loads the run folder (so ``out`` need not
    be on a filesystem other nodes see); ranks > 0 get ``None`` for the run (``if run is not None:``), and log only
    errors during the call, as the commands' ranks > 0 do (:func:`~twotower.distributed.other_ranks_quiet`).

    The towers are built, trained and saved in float32 whatever torch's default float type, put back as it was.
    """
    # before the data is read and the model built: an ``out`` naming a file failed with a bare FileExistsError
    # only once both were done (the CLI checked its --out, Python callers got no check)
    check_run_config(config, "train_run")
    resume = check_flag(resume, "resume")  # resume="no" resumed
    out = check_output_dir(out, "out")
    _check_inputs_outside_run_files(out, config)
    check_new_run_dir(out, run_inputs(config), resume=resume)
    init_distributed(config.train)
    _warn_valid_is_test(config)  # once, on rank 0
    # one training at a time in this process (it sets process-wide state), one writer at a time of the folder: two
    # trainings into one folder interleaved their files under one manifest; under torchrun rank 0 logs for all, as
    # the commands do (the others repeated its warnings, untagged)
    with (trains_alone("tt.train_run"), other_ranks_quiet(),
          exclusive_writer(out, *RUN_WRITER) if tdist.is_main() else contextlib.nullcontext()):
        # the thread counts and the seeded generators are the run's: the caller's process gets its own back
        # (`twotower train` sets the counts for its whole process itself, for its closing evaluation)
        # under torchrun: rank 0 names a rank frozen for train.heartbeat_warn_s (SIGSTOP, a stuck node), which the
        # others would wait for in silence until train.dist_timeout_s
        threads = run_threads(config.train.threads)
        if config.train.threads is None:
            # the count used goes into the run's config.json: the thread count changes the floats (another
            # summation split), and a run read back with `--config RUN/config.json` on another machine or load
            # trained on whatever count that machine picked, where `twotower demo` records its own
            config = dataclasses.replace(config, train=dataclasses.replace(config.train, threads=threads))
        # freed per-step tensors stay in the heap for the steps (not page-faulted in again every step), glibc's
        # thresholds put back after
        with scoped_threads(threads), preserved_rng(), freed_memory_retained(), rank_heartbeats(config.train):
            return _train_run(config, out, resume=resume, frames=frames)


def _train_run(config: RunConfig, out: Path, *, resume: bool,
               frames: Mapping[str, pd.DataFrame] | None) -> tuple[TrainedRun, TrainResult, Prepared]:
    if tdist.is_main():
        _warn_far_off_temperature(config)
    seed_everything(config.train.seed)
    if resume:
        _check_resumable(out)
        if tdist.is_main():  # a resume killed outright left the run's files set aside: the run comes back first
            put_back_leftover(out)
            _say_stopped_new_runs(out)
        verify_data_copies(out)  # a resume may read them as its data (--train RUN/data/train.csv)
        given = frames if isinstance(frames, Mapping) else {}  # not a mapping: load_sources says what to pass
        config = resume_frames_run(out, config, given)
        check_frame_tables(out, config.data, given)
    inputs = input_digests(config) if tdist.is_main() else None  # before reading: the bytes the run is trained on
    if inputs:  # files of a `data split` folder that are not the ones it wrote (a split killed between renames)
        warn_split_mismatch({str(getattr(config.data, name)): digest for name, digest in inputs.items()})
    prep = prepare_data(config, frames)
    warn_unread_settings(config)
    check_model_fits_data(config, prep)  # before the item texts are encoded (minutes): a model that cannot fit
    # a new run into a folder holding an earlier one trains beside it, and replaces it only once finished
    stage = staging_path(out) if tdist.is_main() and needs_staging(out, resume=resume) else None
    if stage is not None:  # the disk's room for both, before the item texts are encoded (minutes), on a low estimate
        _check_staging_room(out, stage, config, _estimated_weight_bytes(config, prep))
    got = encode_item_texts(config, prep)
    text = None if got is None else got[0]
    if got is not None:  # the backend used (auto resolved) goes into config.json, for a replay to encode alike
        from twotower.text.encoder import backend_of

        config = dataclasses.replace(config, train=dataclasses.replace(config.train, encoder_backend=backend_of(got[1])))
    dest = stage or out
    # built before the folder is touched: settings the model or trainer refuse leave an earlier run intact
    try:
        _, trainer = make_trainer(config, prep, out_dir=dest, item_text=text)
    except (MemoryError, RuntimeError) as e:  # the model's tables allocated here: the training line, not the generic one
        if out_of_memory(e):
            raise _training_oom(e, config, prep, text) from e
        raise
    done = 0
    derived: list[Path] = []
    weights_before = None
    sealed: SealedRun | None = None
    if resume:  # before anything is rewritten: a continuation the checkpoint cannot take leaves the run intact
        check_resume_matches(out, config, prep, trainer.model, item_text_encoder=None if got is None else got[1])
        if inputs is not None and not _reads_own_copies(out, config):
            warn_changed_inputs(out, config, inputs)
        # matched against the weights as saved: restoring may rewrite model.safetensors with the checkpoint's,
        # which lack the item-item term fitted after training (the run's fingerprint includes it)
        derived = derived_folders(out)
        # a finished run's files, put back if this resume stops before it seals the run again (pipeline/
        # resume_snapshot.py): before the checkpoint is restored, which may rewrite model.safetensors
        sealed = hold_sealed_run(out) if tdist.is_main() else None
        weights_before = weights_digest(out)  # what the run's metrics.json scored, kept if the resume changes nothing
        # the checkpoint itself too (checksums, optimizer states, weight average): a load that fails in fit()
        # would come after the manifest, metrics.json and config.json below were removed or rewritten
        try:
            done = trainer.restore()
        except BaseException:
            if sealed is not None:
                sealed.put_back()
            raise
    if stage is not None:
        _start_staging(out, stage, config, trainer.model)
    try:
        run, result = _fit_and_seal(config, out, dest, trainer, prep, got, inputs, resume=resume, done=done,
                                    derived=derived, weights_before=weights_before)
    except BaseException as e:
        if sealed is not None:
            sealed.put_back()
        if stage is not None and discard_if_empty(stage):
            log.info("%s still holds the earlier run; the new run saved nothing, so %s was removed", out, stage)
        if out_of_memory(e):  # a traceback ending in MemoryError, or torch's "can't allocate memory", said nothing
            # of the estimate that let the run start or of what to lower
            raise _training_oom(e, config, prep, text) from e
        raise
    if sealed is not None:
        sealed.release()
    return run, result, prep


def _training_oom(e: BaseException, config: RunConfig, prep: Prepared, text: np.ndarray | None) -> OutOfMemory:
    """The one-line error for a training run out of memory: the estimate it passed and what to lower (the sizes
    are arithmetic: nothing is allocated)."""
    terms = check_model_fits_data(config, prep, 0 if text is None else int(text.shape[1]))
    return OutOfMemory(training_oom_message(memory_detail(e), terms))


def _fit_and_seal(config: RunConfig, out: Path, dest: Path, trainer: Any, prep: Prepared, got: Any,
                  inputs: dict[str, str] | None, *, resume: bool, done: int,
                  derived: list[Path], weights_before: str | None = None) -> tuple[TrainedRun, TrainResult]:
    """Write the run into ``dest`` (``out``, or the staging folder beside it), train, fit, seal, swap it in."""
    text = None if got is None else got[0]
    stale: list[Path] = []
    held = None
    if tdist.is_main():
        if resume:
            held, stale = hold_old_results(out, derived, weights_before)  # put back if the weights come out the same
        # a resume that trains nothing (train.epochs <= the checkpoint's epoch) keeps the run's config.json: it
        # recorded `--epochs 2` and the new settings for a run of 4 epochs trained with the old ones
        save_run_data(dest, config, prep, None if text is None else tuple(text.shape),
                      item_text_encoder=None if got is None else got[1],
                      write_config=not (resume and done >= config.train.epochs),
                      keep_data=resume and _reads_own_copies(out, config), input_sha256=inputs)
    tdist.barrier()
    try:
        return _fit_seal(config, out, dest, trainer, prep, text, resume=resume, held=held, stale=stale)
    except BaseException:
        if held is not None:
            held.discard()
        raise


def _fit_seal(config: RunConfig, out: Path, dest: Path, trainer: Any, prep: Prepared, text: np.ndarray | None, *,
              resume: bool, held: HeldResults | None, stale: list[Path]) -> tuple[TrainedRun, TrainResult]:
    """:func:`_fit_and_seal` once the run's files are written: train, fit the empty history and the item-item term,
    settle a resume's old evaluation (``held``), seal and swap in."""
    result = trainer.fit(resume=resume, curves=False)  # drawn below, with the item-item term the run saves
    if not tdist.is_main():
        # the fits below are rank 0's alone (validation, no collective): the other ranks are done, and do not wait
        # for them at a barrier, which a long item-item solve could outlast (gloo gives up after
        # train.dist_timeout_s and torchrun then stops rank 0 too); so the term is fitted under torchrun as in one
        # process
        return None, result  # type: ignore[return-value]
    # after the best weights are back: a sequence tower's state for an empty history, which sequence examples
    # never train (pipeline/empty_history.py), before the item-item term joins the item vectors
    fits: dict[str, dict[str, Any]] = {}
    item_item = None
    try:
        if empty_history_skip_reason(trainer.model, config) is None:
            fits["empty_history"] = fit_empty_history(trainer.model, first_items(trainer.seqs, prep.n_items),
                                                      config.loss.temperature, seed=config.train.seed)
        # the item-item term and its weight, chosen on validation
        item_item = fit_item_item(trainer, prep, config.model.item_item, metric=config.eval.select_metric,
                                  seed=config.train.seed, max_users=config.eval.ease_tune_max_users)
    finally:
        # curves.png once the term is fitted: drawn at the end of the fit, its title's "best valid NDCG@10 0.1300
        # (saved)" was the towers' alone, when the model saved (with the term) validated at 0.1360
        draw_curves(trainer, result.best_epoch or None, item_item=item_item)
    if item_item is not None:
        fits["item_item"] = item_item
        result.item_item = item_item
    if fits:  # the weights once for both fits (hundreds of MB for a large catalogue), when either changed them
        save_fits(dest, trainer.model, fits, weights="empty_history" in fits or bool(item_item and item_item["weight"] > 0))
    if held is not None:
        result.kept_results = held.settle(config)  # the old evaluation back where the saved weights are those it scored
    write_manifest(dest)  # sealed: TrainedRun.load now verifies every file's checksum
    if dest != out:
        _finish_staging(dest, out, config)
    elif resume and (target := staged_target(out)) is not None and not target.is_symlink():
        # a resumed staging folder: the interrupted new run, finished now, goes where it was meant to
        with exclusive_writer(target, *RUN_WRITER):
            _finish_staging(out, target, config)
        out = target
    run = TrainedRun.load(out)
    _say_stale(out, stale, run.fingerprint())
    return run, result


def _warn_far_off_temperature(config: RunConfig) -> None:
    """Warn, before the data is read, of a ``loss.temperature`` that trains a useless model (a warning, not a
    refusal: the useful range, losses.base.USEFUL_TEMPERATURES, was measured on MovieLens-100K), of a ``train.lr``
    outside training.schedule.USEFUL_LRS (measured the same way), of a
    ``loss.sampled_negatives`` set beside a loss kind that does not read it, and of a tower size the model does not
    read (a sequence encoder's beside a pooled history, ``id_dim`` beside ``use_id=false``: models/unread.py)."""
    from twotower.config import LossConfig, TrainConfig
    from twotower.losses.base import temperature_warning
    from twotower.training.schedule import lr_warning

    model = config.model
    far = temperature_warning(config.loss.temperature, cosine=model.user.normalize and model.item.normalize,
                              default=LossConfig.temperature)
    if far is not None:
        log.warning("%s", far)
    if (rate := lr_warning(config.train.lr, default=TrainConfig.lr)) is not None:
        log.warning("%s", rate)
    from twotower.losses.factory import unread_sampled_negatives

    if (unread := unread_sampled_negatives(config.loss)) is not None:  # not refused: a size, off while unread
        log.warning("%s", unread)
    from twotower.models.unread import unread_tower_sizes

    for said in unread_tower_sizes(model):  # the item tower's history sizes only where a file or override set them
        log.warning("%s", said)


def _say_stale(out: Path, folders: list[Path], fingerprint: str) -> None:
    """Name the index and export folders a resume left behind that no longer fit the run's weights.

    A resume that finds no better epoch keeps the best weights as they were: their index still fits (serve and
    recommend take it), and a warning that they refuse it sent the user to rebuild for nothing.
    """
    for folder in folders:
        export = (folder / "export.json").is_file()
        record = _read_json_dict(folder / ("export.json" if export else "meta.json")) or {}
        what = "an ONNX export" if export else "an index"
        if record.get("model_fingerprint") == fingerprint:
            log.info("%s holds %s of the same weights (this resume found no better epoch), so it still fits the "
                     "run", folder, what)
            continue
        fix = rebuild_command(out, folder, export=export)
        # serve and recommend check an index's fingerprint; an export is read by the deployer's own code, which
        # nothing here checks (the warning said serve and recommend refuse it: they never read it)
        effect = ("its towers score with those weights wherever it is deployed (no command reads an export to "
                  "refuse it)" if export else "serve and recommend refuse it")
        log.warning("%s holds %s of the weights before this resume; %s until it is rebuilt: %s",
                    folder, what, effect, fix)


def _reads_own_copies(out: Path, config: RunConfig) -> bool:
    """Whether the interactions read are the run's own copies of its split (``out/data/*.csv``)."""
    own = (out / "data").resolve()
    given = [p for p in (config.data.train, config.data.valid, config.data.test) if p is not None]
    return bool(given) and all(not hasattr(p, "frame") and Path(p).resolve().parent == own for p in given)


def warn_changed_inputs(out: Path, config: RunConfig, inputs: Mapping[str, str]) -> None:
    """On resume, a warning for each data file whose sha256 differs from the one in the run's ``run.json``.

    The train and valid interactions as read are refused when they differ (:func:`check_resume_matches`), but
    an edited test file or feature table (a title) was read as it is now without a word, and ``run.json``'s
    ``input_sha256`` silently rewritten: the resumed run no longer said what it had first been given.
    """
    from twotower.utils.atomic import read_json

    try:
        info = read_json(out / "run.json")
    except (OSError, ValueError):
        return
    then = info.get("input_sha256") if isinstance(info, dict) else None
    if not isinstance(then, dict):
        return  # a run saved before the digests were recorded
    for name, now in inputs.items():
        was = then.get(name)
        if isinstance(was, str) and was != now:
            flag = "--data" if name == "path" else f"--{name}"
            log.warning("resume: %s %s is not the file the run was trained with (sha256 %s... then, %s... now); "
                        "the run goes on with it as it is now", flag, getattr(config.data, name), was[:12], now[:12])


def _check_resumable(out: Path) -> None:
    """Refuse ``resume`` without a checkpoint before the data is read and the folder rewritten."""
    if not (out / "checkpoint" / "state.json").is_file():
        saved = _read_json_dict(out / "config.json") or {}
        if (saved.get("train") or {}).get("checkpoint") is False:
            # "train without --resume first" did not help: such a run never keeps one
            raise ConfigError(f"cannot resume: no checkpoint in {out / 'checkpoint'} (the run was trained with "
                              "train.checkpoint=false, which keeps none); train it again with train.checkpoint=true "
                              "(the default) to have one for the next --resume")
        raise ConfigError(f"cannot resume: no checkpoint in {out / 'checkpoint'}; train without --resume first")


def _differing_leaves(old: Any, new: Any, prefix: str) -> list[tuple[str, Any, Any]]:
    """``(dotted key, run's value, value now)`` of every leaf where two config dicts differ."""
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[tuple[str, Any, Any]] = []
        for key in sorted(set(old) | set(new)):
            out += _differing_leaves(old.get(key), new.get(key), f"{prefix}.{key}")
        return out
    return [] if old == new else [(prefix, old, new)]


def _described(leaf: tuple[str, Any, Any]) -> str:
    key, was, now = leaf
    return f"{key}: {was!r} in the run, {now!r} now"


def _config_differences(old: Any, new: Any, prefix: str) -> list[str]:
    """Dotted keys whose values differ between two config dicts, ``key: run's -> now``."""
    return [_described(leaf) for leaf in _differing_leaves(old, new, prefix)]


def _restoring_override(key: str, value: Any) -> str:
    """The ``key=value`` override that sets ``key`` back to ``value``, as typed on the command line (a string
    bare, anything else as JSON; quoted when it holds a space)."""
    text = value if isinstance(value, str) else json.dumps(value)
    return f"{key}={text}" if " " not in text else f"'{key}={text}'"


def _as_read_now(saved: Any) -> Any:
    """A run's saved config with the settings it lacks (added since it was saved) at the values it loads with.

    Compared as saved, each one read "None in the run, 'pcg64' now" (model.user.dropout_rng, added since), and
    a run of an earlier version was refused as trained with other model settings though none had been set.
    """
    from twotower.config import config_from_dict, config_to_dict

    try:
        return config_to_dict(config_from_dict(RunConfig, saved))
    except (ConfigError, TypeError, ValueError, AttributeError):  # unreadable: compared as saved, and named
        return saved


def _builds_no_weight(key: str) -> bool:
    """Whether the model setting ``key`` may change on resume, as a training setting may: the item-item term is
    fitted after training from the weights trained, and the dropout masks' source draws random numbers only (a run
    saved before model.*.dropout_rng drew PyTorch's masks, and resumed with today's default it was refused)."""
    return key.startswith("model.item_item.") or key.endswith(".dropout_rng")


def check_resume_matches(out: Path, config: RunConfig, prep: Prepared, model: Any, *,
                         item_text_encoder: str | None = None) -> None:
    """ConfigError unless the run in ``out`` can be continued with ``config`` and this data.

    The model settings must be the run's, the users and items (vocabularies) the same, and the checkpoint's
    tensors must have this model's names and shapes; the error names what differs. Training settings
    (epochs, learning rate, ...) may change: that is what resuming with new flags is for. ``item_text_encoder``:
    the ``model_id`` of the encoder that embedded the item texts now, checked against the run's.
    """
    import torch
    from safetensors import safe_open

    from twotower.config import config_to_dict
    from twotower.data.vocab import Vocabulary
    from twotower.text.encoder import backend_of, same_encoder_id
    from twotower.utils.atomic import read_json, sha256_file

    fix = "resume with the run's settings and data, or train into another folder without --resume"
    saved = out / "config.json"
    old: Any = None
    if saved.is_file():
        old = _as_read_now(saved_config_dict(read_json(saved)))
        now = config_to_dict(config)
        model_leaves = _differing_leaves(old.get("model") if isinstance(old, dict) else None, now["model"], "model")
        leaves = [leaf for leaf in model_leaves if not _builds_no_weight(leaf[0])]
        if leaves:
            diffs = [_described(leaf) for leaf in leaves]
            # the overrides that give the run's values back: an older run's one history pool needed
            # model.user.extra_pools=[] typed by hand, and the error named the difference but not the setting
            back = [_restoring_override(key, was) for key, was, _ in leaves]
            raise ConfigError(f"cannot resume {out}: the model settings differ from the run's "
                              f"({'; '.join(diffs[:4])}{'; ...' if len(diffs) > 4 else ''}); add "
                              f"{' '.join(back)} to resume with the run's settings, or train into another folder "
                              "without --resume")
        # training settings may change (that is what resuming with new flags is for), but silently they read as
        # the run's own: the resumed epochs then train with settings nobody sees (a walkthrough finding); so do the
        # evaluation's (eval.select_metric chooses the epochs from here on, eval.ks the closing table)
        old_train = old.get("train") if isinstance(old, dict) else None
        if isinstance(old_train, dict) and old_train.get("encoder_backend") is None:
            # a run saved before train.encoder_backend: its backend is run.json's item_text_encoder, checked below
            old = {**old, "train": {**old_train, "encoder_backend": now["train"]["encoder_backend"]}}
        changed = [d for part in ("train", "loss", "eval")
                   for d in _config_differences(old.get(part) if isinstance(old, dict) else None, now[part], part)]
        changed += [_described(leaf) for leaf in model_leaves if _builds_no_weight(leaf[0])]
        if changed:
            log.info("resume: these settings differ from the run's and apply from here on: %s", "; ".join(changed))
    info = read_json(out / "run.json") if (out / "run.json").is_file() else {}
    then = info.get("item_text_encoder") if isinstance(info, dict) else None
    if item_text_encoder is not None and then is not None and not same_encoder_id(then, item_text_encoder):
        # another backend's vectors differ past the text-buffer check below, which blamed an edited item table
        raise ConfigError(
            f"cannot resume {out}: its item text embeddings were encoded by {then}, this command's encoder is "
            f"{item_text_encoder}; resume with --encoder-backend {backend_of(then)} (or "
            f"TWOTOWER_ENCODER_BACKEND={backend_of(then)}), the backend the run was trained with")
    for kind, vocab in (("items", prep.item_vocab), ("users", prep.user_vocab)):
        path = out / "vocab" / f"{kind}.json"
        if path.is_file():
            before = Vocabulary.load(path)
            if before != vocab:
                raise ConfigError(
                    f"cannot resume {out}: the data has {len(vocab):,} {kind}, the run was trained on "
                    f"{len(before):,} ({'the same number, other ids' if len(vocab) == len(before) else 'other ids'}; "
                    f"e.g. a missing --items/--users file or another train file); {fix}")
    for name in ("train", "valid"):  # what the checkpoint was trained and selected on (data/*.csv keeps it)
        path, df = out / "data" / f"{name}.csv", getattr(prep.sources, name)
        if df is None and run_part_file(out, name) is None:
            continue  # no such part, then or now (runs saved before kept an empty split part as a header-only file)
        if path.is_file() and (df is None or csv_sha256(df) != sha256_file(path)):
            now = "no such split" if df is None else plural(len(df), "row")
            raise ConfigError(
                f"cannot resume {out}: the {name} interactions differ from the run's {path} ({now} now; "
                f"{_why_part_differs(config, old, name)}), so the weights would continue on other data and its "
                f"held-out rows could be ones they were trained on; {fix}")
    weights = out / "checkpoint" / "model.safetensors"
    try:
        with safe_open(str(weights), framework="pt") as f:
            shapes = {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
            # the feature and text buffers are the item/user tables' values: restoring the checkpoint put the old
            # ones back, so an edited table (a title, a year) trained on as before while the run showed the new
            data = {k: (f.get_tensor(k), v) for k, v in model.named_buffers()
                    if k in shapes and shapes[k] == tuple(v.shape)}
    except Exception:  # unreadable: load_checkpoint names the damage with its checksum check
        return
    own = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    bad = sorted(k for k in set(own) | set(shapes) if own.get(k) != shapes.get(k))
    if bad:
        k = bad[0]
        raise ConfigError(f"cannot resume {out}: the checkpoint does not fit this model ({len(bad)} tensors differ, "
                          f"e.g. {k!r}: {shapes.get(k)} in the checkpoint, {own.get(k)} now); {fix}")
    for k, (then, now) in sorted(data.items()):
        # text embeddings encoded again may differ in the last bits (batching); an edited text moves them far
        if not torch.allclose(then.to(now.dtype), now.cpu(), rtol=0, atol=1e-4):
            kind = "item" if k.startswith("item_tower.") else "user"
            what = "text embeddings" if k.endswith(".text") else "features"
            raise ConfigError(f"cannot resume {out}: the {kind} {what} differ from the run's ({k!r}; the {kind} "
                              f"table --{kind}s or its data.{kind}_* settings changed), so the weights would "
                              f"continue on the table's old values while the run shows the new ones; {fix}")


def _why_part_differs(config: RunConfig, old: Any, name: str) -> str:
    """The likely cause of a resume's other train/valid part, from how the data is given now and was then.

    It said "e.g. another train.seed with data.split=temporal" whatever the data: for --train/--valid files a
    seed plays no part (nor does it in a temporal split); the file given differs, or was edited.
    """
    data = config.data
    before = old.get("data") if isinstance(old, dict) and isinstance(old.get("data"), dict) else {}
    split = _split_settings_changed(config, old, before)
    if split:
        return split
    source = data.path or data.dataset  # what data.split cuts, now
    if source is None and before.get("path") is None and before.get("dataset") is None:  # parts given as files
        given, then = getattr(data, name), before.get(name)
        # config.json records absolute paths (runs saved before, the paths as given): compare the files named
        if then and (not given or os.path.abspath(given) != os.path.abspath(then)):
            return f"--{name} {given} now, {then} when the run was trained" if given else \
                f"the run was trained with --{name} {then}"
        return f"the file {given} was edited since" if given else "the run was trained with one"
    if data.split == "random":
        return f"e.g. another train.seed or data.ratios with data.split=random, or an edited {source or 'data file'}"
    return f"e.g. other data.split settings than the run's, or an edited {source or 'data file'}"


#: the data.* settings that decide how data.path or data.dataset is cut into train / valid / test
SPLIT_SETTINGS = ("dataset", "split", "ratios", "leave_n", "valid_start", "test_start")


def _split_settings_changed(config: RunConfig, old: Any, before: dict[str, Any]) -> str | None:
    """The split settings (and train.seed under data.split=random) that differ from the run's, as the resume's log
    names settings ("data.split: 'temporal' in the run, 'random' now"), or None. Without them a --dataset run
    resumed on another split was refused with "(80,000 rows now; the run was trained with one)"."""
    if config.data.path is None and config.data.dataset is None:
        return None  # parts given as files: no split setting plays a part
    now = config_to_dict(config)
    leaves = [(f"data.{k}", before[k], now["data"][k]) for k in SPLIT_SETTINGS if k in before and before[k] != now["data"][k]]
    train = old.get("train") if isinstance(old, dict) else None  # None: no config.json (or not an object)
    seed = train.get("seed") if isinstance(train, dict) else None
    if config.data.split == "random" and seed is not None and seed != config.train.seed:
        leaves.append(("train.seed", seed, config.train.seed))
    return "; ".join(_described(leaf) for leaf in leaves) or None


def run_inputs(config: RunConfig) -> tuple[str | None, ...]:
    """The data files a run reads (``data.path``, ``data.train``, ... ``data.users``; None where unset)."""
    return tuple(getattr(config.data, name) for name in ("path", "train", "valid", "test", "items", "users"))


def same_file(a: object, b: object) -> bool:
    """Whether two data settings name one existing file (``--valid test.csv --test ./test.csv``)."""
    if not (isinstance(a, (str, Path)) and isinstance(b, (str, Path))):
        return False
    try:
        return os.path.samefile(a, b)
    except OSError:  # missing: the reader names it
        return False


def _warn_valid_is_test(config: RunConfig) -> None:
    """``--valid`` and ``--test`` naming one file: early stopping (and every choice made on validation) then reads
    the test split, whose figures are no longer held out; said before training rather than left to be found."""
    if tdist.is_main() and same_file(config.data.valid, config.data.test):
        log.warning("data.valid and data.test are the same file (%s): early stopping and every choice made on "
                    "validation (the item-item weight, the baselines' tuning) read the test split, so its figures "
                    "are not held out. Give a validation file of its own (`twotower data split` makes one)",
                    config.data.valid)


def _check_inputs_outside_run_files(out: Path, config: RunConfig) -> None:
    """Refuse an input file that is one of the files the run writes (``--train data/train.csv --out .``).

    The run saved its own copy over it (canonical column names, duplicates and bad rows gone), so the same command
    then failed on the user's own column names, and the next run into the folder removed it as the old run's.
    In a folder holding an earlier run such a file is that run's own copy (``--train RUN/data/train.csv --out
    RUN`` retrains on its split, and :func:`clear_previous_run` keeps it): rewritten as it was, so allowed.
    """
    if any((out / rel).is_file() for rel in RUN_MARKERS):
        return
    written = {(out / rel).resolve(): out / rel for rel in (*MANIFEST_FILES, *RUN_OUTPUT_FILES)}
    for name in ("path", "train", "valid", "test", "items", "users"):
        value = getattr(config.data, name)
        if isinstance(value, str) and Path(value).resolve() in written:
            raise ConfigError(f"{setting_said(config.data, name)} is {written[Path(value).resolve()]}, a file the run "
                              f"writes: training into {out} would replace it with the run's own copy; keep the "
                              "input elsewhere or train into another --out")


def _say_stopped_new_runs(out: Path) -> None:
    """A `--resume` of ``out`` beside a new run into it that was stopped before it finished (its staging folder,
    whose writer is gone): the resume continued the earlier run without a word of the new one's epochs."""
    from twotower.pipeline.run_files import CHECKPOINT_DIR
    from twotower.pipeline.staging import stale_staging
    from twotower.utils.shell import shell_arg

    for stage in stale_staging(out):
        if (stage / CHECKPOINT_DIR / "state.json").is_file():
            log.warning("%s holds a new run into %s that was stopped before it finished (its epochs are in its "
                        "checkpoint); this --resume continues the run in %s. `twotower train --out %s --resume` "
                        "finishes the new one and puts it in place of this one", stage, out, out, shell_arg(stage))


def _check_staging_room(out: Path, stage: Path, config: RunConfig, weight_bytes: int) -> None:
    """ConfigError when the disk cannot hold the new run beside the earlier one in ``out`` (``weight_bytes``: the
    new model's), after removing the staging folders of earlier attempts that were killed or stopped and not
    resumed (the room they took is the new run's)."""
    for old in sweep_stale_staging(out):
        log.warning("removed %s, the staging folder of an earlier `twotower train --out %s` that did not finish "
                    "(a new run without --resume starts over)", old, out)
    try:
        recorded = json.loads((out / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        recorded = None
    now = config_to_dict(config)
    same = (isinstance(recorded, dict) and recorded.get("model") == now["model"]
            and (recorded.get("train") or {}).get("checkpoint") == config.train.checkpoint)
    check_room_to_stage(out, stage, same_settings=same, weight_bytes=weight_bytes, checkpoint=config.train.checkpoint)


def _estimated_weight_bytes(config: RunConfig, prep: Prepared) -> int:
    """The new model's float32 parameters, counted before it is built and its item texts encoded (models/size.py):
    low, as check_room_to_stage wants it (no text buffer, no feature buffers), so a run that may fit is not
    refused; the model built, the room is checked again on its own bytes."""
    from twotower.models.size import parameter_counts

    return 4 * sum(parameter_counts(config.model, prep.n_users, prep.n_items, user_features=prep.user_features,
                                    item_features=prep.item_features).values())


def _start_staging(out: Path, stage: Path, config: RunConfig, model: Any) -> None:
    """Make the staging folder of a new run into ``out`` (which holds an earlier run) once the disk can hold both
    runs (checked again on the model's own bytes: the first check, before the item texts were encoded, estimated
    them)."""
    weights = sum(t.numel() * t.element_size() for t in model.state_dict().values())
    _check_staging_room(out, stage, config, weights)
    stage.mkdir()
    log.warning("%s holds an earlier run: the new run trains in %s and replaces it only once finished (until "
                "then %s keeps the earlier run, whole); --resume continues a run instead", out, stage, out)


def _finish_staging(stage: Path, out: Path, config: RunConfig) -> None:
    """Swap the finished run in ``stage`` in place of the earlier one in ``out``, and say what it replaced."""
    data = config.data
    inputs = tuple(Path(p) for p in (data.train, data.valid, data.test, data.path, data.items, data.users)
                   if p and not hasattr(p, "frame"))
    replaced = swap_in(stage, out, keep=inputs)
    if replaced:
        shown = sorted({rel.split("/")[0] + ("/" if "/" in rel else "") for rel in replaced})  # folders once
        # the count is of files, the list of entries (a folder once): "16 files (11 entries)" read as a miscount
        log.warning("%s held an earlier run: the new run replaced its %s (%s, folders with their contents); "
                    "files the run did not write stay", out, plural(len(replaced), "file"), ", ".join(shown))
