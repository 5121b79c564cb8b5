"""Turn a DataConfig into train/valid/test frames and optional feature tables."""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from twotower.config import DATA_FILE_SETTINGS, DataConfig, TrainConfig, located, setting_origins
from twotower.data.features import FeatureSpec, read_feature_table
from twotower.data.readers import ColumnMap, EmptyInteractions, read_interactions
from twotower.data.splits import global_time_split, leave_last_n_out, random_split, temporal_split
from twotower.data.timeunits import ROW_ORDER, align_date_units, report_unit, unit_words
from twotower.errors import ConfigError, DataError
from twotower.explain.names import title_column

__all__ = ["Sources", "load_sources", "setting_said"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Sources:
    """Everything a run reads, as canonical frames."""

    train: pd.DataFrame
    valid: pd.DataFrame | None
    test: pd.DataFrame | None
    items: pd.DataFrame | None = None
    users: pd.DataFrame | None = None
    item_spec: FeatureSpec | None = None
    user_spec: FeatureSpec | None = None
    title_col: str | None = None
    report: dict[str, Any] = field(default_factory=dict)


def _split(df: pd.DataFrame, cfg: DataConfig, seed: int):
    if cfg.split == "temporal":
        split = temporal_split(df, cfg.ratios)
    elif cfg.split == "leave_last":
        split = leave_last_n_out(df, cfg.leave_n)
    elif cfg.split == "time":
        if cfg.valid_start is None or cfg.test_start is None:
            raise ConfigError("data.split='time' needs data.valid_start and data.test_start")
        split = global_time_split(df, cfg.valid_start, cfg.test_start, names=("data.valid_start", "data.test_start"),
                                  time_unit=cfg.time_unit)
    else:
        split = random_split(df, cfg.ratios, seed)
    # every method's report names the unit the timestamps were taken in (README: "named in the split report"),
    # not only the time cut's: millisecond data split by user is where one checks it was not read as seconds
    split.report.setdefault("time_unit", report_unit(df, cfg.time_unit))
    return split


def _held_out(part: pd.DataFrame) -> pd.DataFrame | None:
    """An empty valid or test part (cut-offs beyond the data, a zero ratio) is no part, as if no file were given.

    Kept as a frame, it was written to the run folder as a header-only CSV, and reading that back to score
    the run failed after training ("no data rows"); the split has already said which part is empty.
    """
    return part if len(part) else None


def column_map(cfg: DataConfig) -> ColumnMap:
    """Which input columns hold the user, item, timestamp and rating (the ``data.*_col`` settings)."""
    return ColumnMap(user=cfg.user_col, item=cfg.item_col, timestamp=cfg.timestamp_col, rating=cfg.rating_col)


def load_sources(cfg: DataConfig, *, seed: int = TrainConfig.seed, frames: Mapping[str, pd.DataFrame] | None = None,
                 embeds_titles: bool | str = False, log_every_s: float | None = None) -> Sources:
    """Read and split according to ``cfg``.

    Precedence: explicit ``train`` (+ ``valid``/``test``) files, then a single
    ``path`` split by ``cfg.split``, then the named ``dataset``. ``frames`` gives
    any of those inputs (``path``, ``train``, ``valid``, ``test``, ``items``,
    ``users``) as DataFrames instead of files: each is read as its file would be
    (the same columns, checks and errors) and takes the place of that setting. ``embeds_titles``: the item
    tower reads ``title_col`` through the text encoder: the setting that asks for it (``"model.item.dual_head"``),
    which its messages name, or True (``model.item.text_embeddings``).
    """
    if frames is not None and not isinstance(frames, Mapping):
        # frames=df read as "if frames:" failed with pandas' "truth value of a DataFrame is ambiguous"
        raise ConfigError(f"frames must map input names to DataFrames, e.g. frames={{'path': df}} or "
                          f"frames={{'train': train_df, 'valid': valid_df}}; got {type(frames).__name__}")
    if frames:
        cfg = _with_frames(cfg, frames)
    with _located(cfg):
        _check_feature_tables(cfg)
    text_setting = (embeds_titles if isinstance(embeds_titles, str) else
                    "model.item.text_embeddings" if embeds_titles else None)
    if text_setting is not None:
        _check_item_texts_given(cfg, text_setting)
    with _located(cfg):
        _check_feature_columns(cfg)
    _check_split_inputs(cfg)  # names each input with where it was given
    _check_split_settings(cfg)
    _warn_unused_sources(cfg)
    columns = column_map(cfg)
    items = users = None
    item_spec = user_spec = None
    title_col = cfg.title_col
    item_columns: list[str] | None = None  # an item file's columns as it names them (its key is renamed below)
    report: dict[str, Any] = {}

    def read(name: str) -> pd.DataFrame:
        return read_interactions(_source(name), columns, name=str(name), format=cfg.format, encoding=cfg.encoding,
                                 time_unit=cfg.time_unit, log_every_s=log_every_s)

    def read_held_out(name: str) -> pd.DataFrame | None:
        if getattr(cfg, name) is None:
            return None
        try:
            return read(getattr(cfg, name))
        except EmptyInteractions as e:
            raise DataError(f"{e.message}: {_empty_part_hint(cfg, name)}", file=e.file) from None

    if cfg.train is not None:
        train = read(cfg.train)
        valid, test = read_held_out("valid"), read_held_out("test")
        train, valid, test = align_date_units([train, valid, test])  # one time scale across the three files
        _check_one_time_unit(cfg, {"train": train, "valid": valid, "test": test})
        report["split"] = "given as files"
        reads = {"train": train, "valid": valid, "test": test}
    elif cfg.path is not None or cfg.dataset is not None:
        if cfg.path is not None:
            df = read(cfg.path)
        else:
            from twotower.data.movielens import (
                MOVIELENS_ITEM_FEATURES,
                MOVIELENS_USER_FEATURES,
                fetch_movielens_100k,
                load_movielens_100k,
            )

            ml = load_movielens_100k(fetch_movielens_100k())
            df = ml.interactions
            items, users = ml.items, ml.users
            item_spec, user_spec = MOVIELENS_ITEM_FEATURES, MOVIELENS_USER_FEATURES
            title_col = title_col or "title"
        reads = {"path" if cfg.path is not None else "dataset": df}
        split = _split(df, cfg, seed)
        train, valid, test = split.train, _held_out(split.valid), _held_out(split.test)
        report["split"] = split.report
    else:
        raise ConfigError("no data: give data.train (and data.valid), data.path, or data.dataset='movielens-100k'")
    if cfg.items is not None:
        item_key = cfg.item_key or cfg.item_col
        item_spec = FeatureSpec(
            key=item_key,
            categorical=cfg.item_categorical,
            numeric=cfg.item_numeric,
            multi=cfg.item_multi,
            separator=cfg.multi_separator,
            text=cfg.item_text,
        )
        items = read_feature_table(_source(cfg.items), item_spec, name=str(cfg.items), key_role="item key",
                                   encoding=cfg.encoding)
        item_columns = [str(c) for c in items.columns]
        items = _key_as(items, item_spec, "item_id", str(cfg.items), "data.item_key" if cfg.item_key else "data.item_col")
        item_spec = _rekey(item_spec)
    if cfg.users is not None:
        user_key = cfg.user_key or cfg.user_col
        user_spec = FeatureSpec(
            key=user_key, categorical=cfg.user_categorical, numeric=cfg.user_numeric, multi=cfg.user_multi,
            separator=cfg.multi_separator,
        )
        users = read_feature_table(_source(cfg.users), user_spec, name=str(cfg.users), key_role="user key",
                                   encoding=cfg.encoding)
        users = _key_as(users, user_spec, "user_id", str(cfg.users), "data.user_key" if cfg.user_key else "data.user_col")
        user_spec = _rekey(user_spec, "user_id")
    _warn_unread_table(cfg.items, items, item_spec, "item", with_text=True,
                       embedded=title_column(cfg.title_col, items.columns) if text_setting and items is not None
                       else None, text_setting=text_setting)
    _warn_unread_table(cfg.users, users, user_spec, "user", with_text=False)
    if cfg.title_col is not None:  # checked like every other column, not ignored when misnamed
        if items is None:
            raise ConfigError(f"data.title_col={cfg.title_col!r} needs an item table: pass --items FILE (data.items)")
        if cfg.title_col not in items.columns:
            from twotower.data.readers import missing_column_error

            # the file's own names: the table's key column was listed as 'item_id' (renamed for training), a
            # column the user's file does not have
            present = item_columns if item_columns is not None else [str(c) for c in items.columns]
            # the dataset's own item table has no file of the user's: it said "file None"
            where = str(cfg.items) if cfg.items is not None else f"the {cfg.dataset} item table"
            error = missing_column_error(cfg.title_col, present, file=where, role="title")
            if cfg.title_col.lower() == "none":  # "none" stays a string for a column name; null means no column
                error = DataError(f"{error.message} data.title_col=null means no title column (\"none\" names a "
                                  "column called none)", file=where, column=cfg.title_col)
            raise error
    _check_not_train_again(cfg)
    # what reading each input dropped (exact and conflicting duplicate rows): the README says they are counted,
    # but only a log line at INFO said how many, which a Python caller with default logging never sees
    report["read"] = {name: _read_counts(df) for name, df in reads.items() if df is not None and "report" in df.attrs}
    for name, part in (("train", train), ("valid", valid), ("test", test)):
        if part is not None:
            report[f"{name}_rows"] = int(len(part))
    return Sources(train, valid, test, items, users, item_spec, user_spec, title_col, report)


def _check_one_time_unit(cfg: DataConfig, parts: dict[str, pd.DataFrame | None]) -> None:
    """Refuse train/valid/test files whose timestamps are in different units, each told from its own numbers.

    A train file in epoch seconds beside a valid file in epoch milliseconds was read without a word: every valid
    row then sorts decades after every training row (or before, the other way round), so the time order the
    histories and the split checks read is the files' order, not the events'. A declared ``data.time_unit``
    is the unit of every file, as it is for ``--history-from``.
    """
    if cfg.time_unit != "auto":
        return
    units = {name: report_unit(df) for name, df in parts.items() if df is not None}
    timed = {name: unit for name, unit in units.items() if unit != ROW_ORDER}
    if len(set(timed.values())) > 1:
        # a file of dates is named so: its unit is the one its dates were stored in, not told from numbers
        named = ", ".join(f"data.{name} {getattr(cfg, name)}: {unit_words(parts[name], unit)}"
                          for name, unit in timed.items())
        raise DataError(f"the files' timestamps are in different units ({named}, told from their size), so their "
                        "rows cannot be placed in one time order; convert them to one unit")


def _read_counts(df: pd.DataFrame) -> dict[str, Any]:
    """The counts of ``read_interactions``' report (its ``df.attrs["report"]``), JSON-safe for run.json."""
    keys = ("rows_read", "rows", "duplicates_dropped", "conflicting_duplicates_dropped")
    return {k: int(df.attrs["report"][k]) for k in keys if k in df.attrs["report"]}


class _Frame(str):
    """A DataFrame standing where a file name goes: the readers take the frame, messages name it."""

    frame: pd.DataFrame

    def __new__(cls, name: str, frame: pd.DataFrame) -> "_Frame":
        self = super().__new__(cls, f"<DataFrame {name}>")
        self.frame = frame
        return self

    def __deepcopy__(self, memo: dict) -> "_Frame":  # dataclasses.asdict deep-copies a config: share the frame
        return self


def _with_frames(cfg: DataConfig, frames: Mapping[str, pd.DataFrame]) -> DataConfig:
    unknown = sorted(set(frames) - set(DATA_FILE_SETTINGS))
    if unknown:
        raise ConfigError(f"frames: unknown input(s) {', '.join(map(repr, unknown))}; give any of "
                          f"{', '.join(DATA_FILE_SETTINGS)}")
    for name, df in frames.items():
        if not isinstance(df, pd.DataFrame):
            raise ConfigError(f"frames[{name!r}]: expected a pandas DataFrame, got {type(df).__name__}")
    return dataclasses.replace(cfg, **{name: _Frame(name, df) for name, df in frames.items()})


def _warn_unread_table(source: Any, table: pd.DataFrame | None, spec: FeatureSpec | None, who: str, *,
                       with_text: bool, embedded: str | None = None, text_setting: str | None = None) -> None:
    """A feature table given with no feature column named: the tower reads none of its columns, say so.

    `--items items.csv` alone (no data.item_multi=... ) trained an item tower without the genres, with no word.
    ``embedded``: the title column the text encoder reads (it said "none" of the columns was read), at
    ``text_setting``'s asking.
    """
    if table is None or spec is None or spec.categorical or spec.numeric or spec.multi or spec.text:
        return
    keys = f"data.{who}_categorical / data.{who}_numeric / data.{who}_multi" + (" / data.item_text" if with_text else "")
    others = [str(c) for c in table.columns if c != f"{who}_id"]
    uses = "titles, metadata and catalogue only" if who == "item" else "nothing"
    reads = "none" if embedded is None else f"only the text of {embedded!r} ({text_setting})"
    log.warning("data.%ss: no feature column is named (%s), so the %s tower reads %s of %s's columns (%s); "
                "the table is %sused for %s", who, keys, who, reads,
                source if isinstance(source, (str, os.PathLike)) else "the table",
                ", ".join(others[:8]) + (", ..." if len(others) > 8 else "") or "none",
                "" if embedded is None else "otherwise ", uses)


def _source(value: str) -> str | pd.DataFrame:
    """What a reader is given for a file setting: the file name, or the frame that stands in for it."""
    return value.frame if isinstance(value, _Frame) else value


#: Settings naming columns of the item / user feature table (data.items / data.users).
ITEM_FEATURE_SETTINGS = ("item_categorical", "item_numeric", "item_multi", "item_text")
USER_FEATURE_SETTINGS = ("user_categorical", "user_numeric", "user_multi")


def _check_feature_tables(cfg: DataConfig) -> None:
    """Feature columns without the table they are read from: an error, not a run trained on no features.

    Refused like ``data.title_col`` without an item table. The named dataset brings its own tables and
    feature columns, so there the settings are only ignored, and a warning says so.
    """
    builtin = cfg.train is None and cfg.path is None and cfg.dataset is not None
    if builtin:  # `--dataset movielens-100k data.user_col=customer` read the dataset's own columns without a word
        defaults = DataConfig()
        columns = [f"data.{n}={getattr(cfg, n)}" for n in ("user_col", "item_col", "timestamp_col", "rating_col",
                                                             "time_unit", "format") if getattr(cfg, n) != getattr(defaults, n)]
        if columns:
            log.warning("%s ignored: the %s dataset is read with its own columns; these settings read a file of "
                        "yours (--data FILE or --train FILE)", ", ".join(columns), cfg.dataset)
    for kind, table, flag, names in (("item", cfg.items, "--items", ITEM_FEATURE_SETTINGS),
                                     ("user", cfg.users, "--users", USER_FEATURE_SETTINGS)):
        given = [f"data.{n}={','.join(getattr(cfg, n))}" for n in names if getattr(cfg, n)]
        key = getattr(cfg, f"{kind}_key")
        given += [f"data.{kind}_key={key}"] if key is not None else []
        if table is not None or not given:
            continue
        if builtin:
            log.warning("%s ignored: without %s FILE (data.%ss) the %s dataset's own %s table and feature columns "
                        "are used", ", ".join(given), flag, kind, cfg.dataset, kind)
            continue
        raise ConfigError(f"{', '.join(given)} name columns of the {kind} feature table, but none is given: pass "
                          f"{flag} FILE (data.{kind}s), or drop these settings to train without {kind} features")


def _check_item_texts_given(cfg: DataConfig, setting: str) -> None:
    """ConfigError naming ``setting`` (model.item.text_embeddings / dual_head) when no item table gives the texts
    it embeds, before the interactions are read: it came after them, and named model.item.text_embeddings to a
    user who had set only model.item.dual_head. The named dataset brings its own item table."""
    if cfg.items is not None or (cfg.train is None and cfg.path is None and cfg.dataset is not None):
        return
    raise no_item_texts(setting)


def no_item_texts(setting: str) -> ConfigError:
    """The refusal of ``setting`` (model.item.text_embeddings / dual_head) without an item table."""
    return ConfigError(f"{setting}=true needs item texts: pass --items FILE (data.items) with a title or text column "
                       f"(data.title_col / data.item_text), or set {setting}=false")


def _check_feature_columns(cfg: DataConfig) -> None:
    """A column named by two feature settings of one table, or also the table's key: an error naming the settings.

    FeatureSpec refuses the same, but in its own terms ("FeatureSpec.multi: ... listed under categorical"), which
    name no setting a user wrote; this check runs first and speaks in data.* names.
    """
    for kind, names in (("item", ITEM_FEATURE_SETTINGS), ("user", USER_FEATURE_SETTINGS)):
        key = getattr(cfg, f"{kind}_key") or getattr(cfg, f"{kind}_col")
        key_setting = f"data.{kind}_key" if getattr(cfg, f"{kind}_key") else f"data.{kind}_col"
        seen: dict[str, str] = {}
        for name in names:
            for column in getattr(cfg, name):
                if column == key:
                    raise ConfigError(f"data.{name}: {column!r} is the {kind} table's key ({key_setting}), not a feature")
                if column in seen:
                    raise ConfigError(f"data.{name}: column {column!r} is already listed in {seen[column]}; a column "
                                      "is one kind of feature")
                seen[column] = f"data.{name}"


def _check_split_inputs(cfg: DataConfig) -> None:
    """Refuse a validation or test input that would not be read.

    Only a given training input (``data.train``) takes them; ``data.path`` and ``data.dataset`` are cut into
    train / valid / test by ``data.split``, so a ``--valid`` beside ``--data`` trained and selected on other rows
    than the user gave, without a word. Checked when reading, not in DataConfig, so a run saved with such a
    config still loads.
    """
    if cfg.train is not None or (cfg.path is None and cfg.dataset is None):
        return
    source = setting_said(cfg, "path") if cfg.path is not None else f"data.dataset={cfg.dataset}"
    for name in ("valid", "test"):
        value = getattr(cfg, name)
        if value is not None:
            given = setting_said(cfg, name)
            raise ConfigError(f"{given} is read only beside data.train (--train): with {source} "
                              f"the {name} split is cut from it by data.split={cfg.split!r}, so this input would be "
                              f"ignored; give the training data as data.train with it, or leave data.{name} out")


#: the data.split settings each method reads (as `data split` checks its flags)
_SPLIT_SETTINGS = {"ratios": ("temporal", "random"), "leave_n": ("leave_last",), "valid_start": ("time",),
                   "test_start": ("time",)}


def _check_split_settings(cfg: DataConfig) -> None:
    """Refuse a data.split setting the chosen method does not read, set away from its default.

    `train --data FILE data.valid_start=2024-05-01 data.test_start=2024-06-01` (data.split left at temporal) cut
    each user's newest rows as usual without a word, and the run was taken for a time split; `data split` refuses
    the same as flags. Only where the split is made (data.path, data.dataset); checked when reading, so a run saved
    with such a config still loads.
    """
    check_split_settings_given(cfg, ())


def check_split_settings_given(cfg: DataConfig, typed: Collection[str], *, no_data_yet: bool = False) -> None:
    """:func:`_check_split_settings`, and a setting the command line typed (``typed``: names such as ``leave_n``)
    even at its default: `train --data FILE data.leave_n=1` split temporally without a word, `=2` was refused.
    ``no_data_yet`` (`train --print-config` without data): the settings are checked as the split of the data
    to come would read them, so that the check a config is printed for does not pass one the run refuses."""
    if cfg.train is not None or (cfg.path is None and cfg.dataset is None and not no_data_yet):
        return
    with _located(cfg):
        if cfg.split == "time" and (cfg.valid_start is None or cfg.test_start is None):
            raise ConfigError("data.split='time' needs data.valid_start and data.test_start")
        defaults = DataConfig()
        for name, methods in _SPLIT_SETTINGS.items():
            if cfg.split not in methods and (getattr(cfg, name) != getattr(defaults, name) or name in typed):
                raise ConfigError(f"data.{name} is read by data.split={' and '.join(methods)}, not by "
                                  f"data.split={cfg.split}{' (the default)' if cfg.split == defaults.split else ''}, "
                                  f"which would ignore it: set data.split={' or '.join(methods)} for it, or leave "
                                  f"data.{name} out")


@contextlib.contextmanager
def _located(cfg: DataConfig) -> Iterator[None]:
    """A refusal of two or more data settings raised inside names the config file that gave them, as a bad value of
    one does (``config file c.toml: data.split='time' needs ...``): it named none, so a user of several files, or
    of a file and overrides, looked for the setting on the command line."""
    try:
        yield
    except ConfigError as e:
        said = located(str(e), setting_origins(cfg))
        if said == str(e):
            raise
        raise ConfigError(said) from e


def _warn_unused_sources(cfg: DataConfig) -> None:
    """Say which training input is read when several are set: data.train, else data.path, else data.dataset.

    `twotower train --train a.csv --data b.csv` trained on a.csv alone and never mentioned b.csv. Warned, not
    refused: a config file naming data.dataset (examples/movielens.toml) with --train on the command line is a
    fair way to reuse its model settings on other data.
    """
    given = [setting_said(cfg, name) for name in ("train", "path", "dataset") if getattr(cfg, name) is not None]
    if len(given) > 1:
        log.warning("%s is the training input; %s %s not read (one input is used: data.train, else data.path, "
                    "else data.dataset)", given[0], " and ".join(given[1:]), "is" if len(given) == 2 else "are")


def setting_said(cfg: DataConfig, name: str) -> str:
    """A data input named in a message with its value and where it was given, as :func:`load_config` and the
    command noted it (``data.train (a.csv, --train)``, ``data.path (b.csv, config file c.toml)``, ``data.path (b.csv,
    override)``; the value alone where that is not known): it named the flag that sets it, which the user of a config
    file or an override never typed. A DataFrame is named as it was given (``frames['train']``)."""
    value = getattr(cfg, name)
    if isinstance(value, _Frame):
        return f"frames[{name!r}]"
    origin = setting_origins(cfg).get(f"data.{name}")
    return f"data.{name} ({value}, {origin})" if origin else f"data.{name} ({value})"


def _check_not_train_again(cfg: DataConfig) -> None:
    """Refuse the training file given again as the validation file.

    Validation excludes each user's training items, so every validation item would be excluded: the metric
    stays 0 and early stopping silently keeps epoch 1's model. There is no use for that, so it is an error;
    a different file whose rows all appear in train only gets a warning (:func:`~twotower.pipeline.run.prepare_data`).
    """
    if cfg.train is None or isinstance(cfg.train, _Frame):
        return
    if cfg.valid is not None and not isinstance(cfg.valid, _Frame) and _same_file(cfg.train, cfg.valid):
        raise ConfigError(f"{_as_given(cfg, 'valid')} is the training file {_as_given(cfg, 'train')} again: validation excludes "
                          "each user's training items, so it would find nothing (valid metrics 0, early stopping "
                          "stuck at epoch 1); pass a held-out validation file, or leave "
                          f"{_flag_or_setting(cfg, 'valid')} out to stop on the training loss")
    if cfg.test is not None and not isinstance(cfg.test, _Frame) and _same_file(cfg.train, cfg.test):
        # the test split excludes train+valid items: a copy of train scores 0 and reads as a broken model
        raise ConfigError(f"{_as_given(cfg, 'test')} is the training file {_as_given(cfg, 'train')} again: testing excludes each "
                          "user's training items, so every test metric would be 0; pass a held-out test file")


def _empty_part_hint(cfg: DataConfig, name: str) -> str:
    """What to do with a header-only valid or test file, as `data split` writes one for a part it leaves empty
    (equal --valid-start and --test-start ask for no valid part): the refusal said only that the table was empty."""
    flag = _flag_or_setting(cfg, name)
    if name == "valid":
        return f"a split with no valid part writes one; leave {flag} out to train without validation (stopping on the training loss)"
    return (f"a split with no test part writes one; leave {flag} out to train without a test split (score a held-out "
            "file later with `twotower evaluate --run RUN --test FILE`)")


def _flag_or_setting(cfg: DataConfig, name: str) -> str:
    """``--valid`` where the command's flag gave the split file, else ``data.valid`` (a config file's user, or
    Python's, never typed the flag)."""
    origin = setting_origins(cfg).get(f"data.{name}")
    return f"--{name}" if origin is not None and origin.startswith("--") else f"data.{name}"


def _as_given(cfg: DataConfig, name: str) -> str:
    """A split file named as the user gave it: ``--valid v.csv`` for the flag, else :func:`setting_said`'s
    ``data.valid (v.csv, config file c.toml)``."""
    flag = _flag_or_setting(cfg, name)
    return f"{flag} {getattr(cfg, name)}" if flag.startswith("--") else setting_said(cfg, name)


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # not both readable files (e.g. a URL-like path): compare as written
        return os.path.normpath(a) == os.path.normpath(b)


def _key_as(table: pd.DataFrame, spec: FeatureSpec, name: str, file: str, setting: str) -> pd.DataFrame:
    """The feature ``table`` with its key column (``spec.key``) renamed ``name`` (``item_id`` / ``user_id``), the
    name training reads it by. A column of the table already called ``name`` (an external id beside
    ``data.item_key=sku``) was kept beside the renamed key, and the two columns of one name failed in a pandas
    traceback: it is left out with a warning, or refused where a feature setting lists it."""
    if spec.key == name or name not in table.columns:
        return table.rename(columns={spec.key: name})
    listed = [g for g in ("categorical", "numeric", "multi", "text") if name in getattr(spec, g)]
    if listed:
        raise ConfigError(f"{file}: the column {name!r} is listed as a {listed[0]} feature, but the run names the "
                          f"table's key column ({setting}={spec.key!r}) {name!r}; rename that column in the file "
                          "(and in the feature setting)")
    log.warning("%s: the column %r is left out: the run names the table's key column (%s=%r) %r; rename the column "
                "in the file to keep it", file, name, setting, spec.key, name)
    return table.drop(columns=[name]).rename(columns={spec.key: name})


def _rekey(spec: FeatureSpec, key: str = "item_id") -> FeatureSpec:
    return FeatureSpec(
        key=key, categorical=spec.categorical, numeric=spec.numeric, multi=spec.multi, separator=spec.separator, text=spec.text
    )
