"""Run configuration: frozen, keyword-only dataclasses, one section per concern.

A run is driven by a TOML or YAML file plus dotted command-line overrides
(``train.epochs=5``), both checked against the dataclass fields, so a typo is
an error naming the setting instead of a silently ignored key. The resolved
configuration is written next to the run's outputs.
"""
from __future__ import annotations

import copy
import dataclasses
import difflib
import functools
import json
import math
import numbers
import os
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, TypeVar

from twotower.errors import ConfigError
from twotower.utils.unique_keys import DuplicateKey, loads_unique

__all__ = [
    "DataConfig",
    "TowerConfig",
    "ModelConfig",
    "ItemItemConfig",
    "LossConfig",
    "TrainConfig",
    "EvalConfig",
    "RunConfig",
    "SearchConfig",
    "PrepareConfig",
    "FUSION_CHOICES",
    "FinetuneConfig",
    "RerankTrainConfig",
    "load_config",
    "apply_overrides",
    "config_from_dict",
    "config_to_dict",
    "refuse_repeated_overrides",
]

T = TypeVar("T")

#: How interaction files are read (data.format): see twotower.data.readers.read_interactions.
INTERACTION_FORMATS = ("auto", "table", "sasrec")
#: The unit of epoch timestamps (data.time_unit): auto tells it from their magnitude (twotower.data.timeunits).
TIME_UNITS = ("auto", "s", "ms", "us", "ns")
#: The data settings that name files; each may instead be given as a DataFrame (pipeline.sources.load_sources).
DATA_FILE_SETTINGS = ("path", "train", "valid", "test", "items", "users")


def _check(cond: bool, name: str, msg: str) -> None:
    if not cond:
        raise ConfigError(f"{name}: {msg}")


#: The largest seed: torch.manual_seed takes an unsigned 64-bit integer ("Overflow when unpacking long" above it).
MAX_SEED = 2**64 - 1


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    """The resolved annotations of a config class (``from __future__ import annotations`` keeps them as strings;
    resolving them costs more than the rest of a construction, so once per class)."""
    return typing.get_type_hints(cls)


def _check_sections(config: Any, prefix: str) -> None:
    """Each section of a config built by hand is its dataclass: ``RunConfig(train={"epochs": 3})`` kept the dict,
    and training failed later with an AttributeError far from the cause."""
    hints = _hints(type(config))
    for f in dataclasses.fields(config):
        want, value = hints[f.name], getattr(config, f.name)
        if isinstance(want, type) and dataclasses.is_dataclass(want) and not isinstance(value, want):
            base = "{...}"
            for part in reversed(f"{prefix}{f.name}".split(".")):
                base = f"{{{part!r}: {base}}}"
            raise ConfigError(f"{prefix}{f.name}: expected a {want.__name__}, got {type(value).__name__}; pass "
                              f"{want.__name__}(...), or a dict to load_config(base={base})")


def _leaf_value(value: Any, tp: Any) -> tuple[bool, Any]:
    """(does ``value`` have the annotated type ``tp``, the value as stored): ints where floats are annotated
    become floats, numpy numbers Python numbers and lists tuples, so config.json holds plain JSON."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        for a in args:
            ok, v = (value is None, None) if a is type(None) else _leaf_value(value, a)
            if ok:
                return True, v
        return False, value
    if origin is tuple:
        if not isinstance(value, (tuple, list)):
            return False, value
        elems = [args[0]] * len(value) if len(args) == 2 and args[1] is Ellipsis else list(args)
        if len(elems) != len(value):
            return False, value
        checked = [_leaf_value(v, t) for v, t in zip(value, elems)]
        return all(ok for ok, _ in checked), tuple(v for _, v in checked)
    if tp is bool:
        return isinstance(value, bool), value
    if tp is int:
        ok = isinstance(value, numbers.Integral) and not isinstance(value, bool)  # numpy integers are Integral
        return ok, int(value) if ok else value
    if tp is float:
        ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
        return ok, float(value) if ok else value
    if tp is str:
        return isinstance(value, str), value
    return True, value  # sections: checked by _check_sections


def _check_types(config: Any, section: str) -> None:
    """Each setting of a config built by hand has its annotated type: ``TrainConfig(epochs=2.5)`` or
    ``TrainConfig(epochs="3")`` was accepted and failed far from the cause (or trained with a float epoch count).
    Files and ``--set`` overrides are coerced before they get here (:func:`_coerce`)."""
    hints = _hints(type(config))
    for f in dataclasses.fields(config):
        want, value = hints[f.name], getattr(config, f.name)
        if isinstance(want, type) and dataclasses.is_dataclass(want):
            continue
        ok, stored = _leaf_value(value, want)
        if not ok:
            spelled = str(want).replace("<class '", "").replace("'>", "")
            raise ConfigError(f"{section}{f.name}: expected {spelled}, got {value!r} ({type(value).__name__})")
        # as a file's or an override's value is (_coerce): TrainConfig(lr=inf) trained to NaN weights, and an
        # infinite setting was saved as `Infinity` in config.json, which the run then could not be loaded from
        if isinstance(stored, float) and not math.isfinite(stored):
            raise ConfigError(f"{section}{f.name}: expected a finite number, got {value!r}")
        if stored is not value:
            object.__setattr__(config, f.name, stored)  # frozen: the normalised value, once, at construction


def _choice(value: str, name: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        close = difflib.get_close_matches(str(value), list(choices), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"{name}: {value!r} is not one of {', '.join(choices)}{hint}")


def _check_dates(config: Any, names: tuple[str, ...]) -> None:
    """Date settings that do not read as a date are named at construction, not when the data is split."""
    for name in names:
        value = getattr(config, name)
        if isinstance(value, str):
            from twotower.data.timeunits import date_in_unit  # pandas: only for a config that gives a date

            date_in_unit(value, "s", f"data.{name}")


def check_encoding(name: str) -> None:
    """An unknown codec (or one that does not decode bytes to text, like base64) is named at construction."""
    try:
        "a".encode(name)  # LookupError for an unknown name and for bytes-to-bytes codecs (an empty text is not tried)
    except UnicodeError:
        pass  # a text encoding without "a" is still one
    except LookupError:
        raise ConfigError(f"data.encoding: {name!r} is not a text encoding Python knows; give a codec name such as "
                          "utf-8 (the default), cp1252 or latin-1 (Windows / Excel exports), utf-16") from None


@dataclass(frozen=True, kw_only=True)
class DataConfig:
    """Where the interactions come from and how they are split."""

    dataset: str | None = None  #: a named dataset instead of files: "movielens-100k", or null
    path: str | None = None  #: one interactions file, split by data.split into train / valid / test
    train: str | None = None  #: the training interactions (pre-split; takes precedence over data.path)
    valid: str | None = None  #: the validation interactions: early stopping and every choice made on validation
    test: str | None = None  #: the test interactions (optional): the final table
    items: str | None = None  #: item feature table, one row per item (CSV/TSV/Parquet/JSONL)
    users: str | None = None  #: user feature table, one row per user
    #: the id column of data.items when named otherwise than data.item_col; null: data.item_col
    # the id column of the item / user table when it is named otherwise than the interactions' (None: item_col /
    # user_col), e.g. interactions with "product" and an item table keyed by "sku"
    item_key: str | None = None
    user_key: str | None = None  #: the id column of data.users when named otherwise than data.user_col; null: data.user_col
    user_col: str = "user_id"  #: the user id column of the interactions
    item_col: str = "item_id"  #: the item id column of the interactions
    #: time column (epoch numbers or dates); null: none, the file's row order is the time order
    timestamp_col: str | None = "timestamp"
    rating_col: str | None = "rating"  #: rating column, read and kept (every row trains as a positive); null: none
    #: auto: a .txt file whose first line is two integers is SASRec format ("user item" lines, file order =
    #: time order); table: a file with a header row; sasrec: force the SASRec reader
    format: str = "auto"
    #: text encoding of every CSV/TSV/TXT/JSON file read: a Python codec name (utf-8, cp1252, latin-1, utf-16)
    # the text encoding of every CSV/TSV/TXT/JSON file the data side reads (interactions, item and user tables, and
    # the files given to the trained run later, which reads it from config.json): any Python codec name, e.g.
    # cp1252 or latin-1 for Windows / Excel exports. A UTF-8 byte-order mark is skipped.
    encoding: str = "utf-8"
    #: the unit of epoch timestamps: auto tells it from their magnitude (unambiguous from March 1973 to 5138);
    #: s | ms | us | ns for data outside that (times before 1973, seconds counted from another origin)
    time_unit: str = "auto"
    #: how data.path is split: temporal (each user's oldest to train, newest to test, by data.ratios) | leave_last
    #: (each user's last data.leave_n to test, the data.leave_n before to valid) | time (one cut for everyone at
    #: data.valid_start / data.test_start) | random (interactions shuffled with train.seed, cut by data.ratios)
    split: str = "temporal"
    #: train / valid / test shares (split=temporal: per user; random: of all rows); sum to 1
    ratios: tuple[float, float, float] = (0.8, 0.1, 0.1)
    leave_n: int = 1  #: split=leave_last: interactions per user held out for test, and as many before them for valid
    #: split=time: interactions from this time on (before data.test_start) go to valid
    # split=time cut-offs: a date (naive: UTC), converted into the unit of the data's timestamps (seconds, ms,
    # us or ns, told from their magnitude), or a number in that unit
    valid_start: int | str | None = None
    test_start: int | str | None = None  #: split=time: interactions from this time on go to test
    item_categorical: tuple[str, ...] = ()  #: columns of data.items read as categories (an embedding each; a value only items without training interactions hold reads as unknown, as does one never seen)
    item_numeric: tuple[str, ...] = ()  #: columns of data.items read as numbers (standardised by the mean and std of every row of the table, items without training interactions included: metadata, not labels; missing -> 0 plus a missing flag)
    #: columns of data.items holding several values split by data.multi_separator (mean embedding)
    item_multi: tuple[str, ...] = ()
    item_text: tuple[str, ...] = ()  #: columns of data.items embedded by a frozen text encoder (model.item.text_embeddings)
    user_categorical: tuple[str, ...] = ()  #: columns of data.users read as categories
    user_numeric: tuple[str, ...] = ()  #: columns of data.users read as numbers
    user_multi: tuple[str, ...] = ()  #: columns of data.users holding several values split by data.multi_separator
    multi_separator: str = "|"  #: splits the values of the *_multi columns ("red|blue")
    title_col: str | None = None  #: item column shown to people (e.g. "title")
    #: what a user did with an item, in explanations: "Because you watched X" ("bought", "read", "listened to")
    history_verb: str = "watched"

    def __post_init__(self) -> None:
        for name in DATA_FILE_SETTINGS:
            value = getattr(self, name)
            if isinstance(value, os.PathLike):  # a pathlib.Path is a file name too; stored as the str it names
                object.__setattr__(self, name, os.fspath(value))
            elif value is not None and not isinstance(value, str):
                # a config is written next to the run as JSON, so it names files; frames go to train_run itself
                raise ConfigError(f"data.{name}: expected a file path, got {type(value).__name__}; pass a DataFrame as "
                                  f"train_run(cfg, out, frames={{{name!r}: df}}) (or prepare_data(cfg, frames=...))")
        if not isinstance(self.ratios, (tuple, list)) or len(self.ratios) != 3:
            raise ConfigError(f"data.ratios: needs three numbers (train, valid, test), got {self.ratios!r}")
        _check_types(self, "data.")
        # the value as typed, as TrainConfig's refusals say it (imported here: refusals imports this module)
        from twotower.pipeline.refusals import number_words as said

        _choice(self.split, "data.split", ("temporal", "leave_last", "time", "random"))
        _choice(self.format, "data.format", INTERACTION_FORMATS)
        _choice(self.time_unit, "data.time_unit", TIME_UNITS)
        check_encoding(self.encoding)
        # nan read as "must be non-negative", and a sum like 1.2000000000000002 showed float noise
        _check(all(math.isfinite(r) for r in self.ratios), "data.ratios",
               f"must be finite numbers, got {', '.join(f'{r:g}' for r in self.ratios)}")
        _check(all(r >= 0 for r in self.ratios), "data.ratios",
               f"must be non-negative, got {', '.join(f'{r:g}' for r in self.ratios)}")
        _check(abs(sum(self.ratios) - 1.0) < 1e-6, "data.ratios", f"must sum to 1, got {sum(self.ratios):.6g}")
        _check(self.ratios[0] > 0, "data.ratios", f"the train share must be > 0, got {self.ratios[0]:g}")
        _check(self.leave_n >= 1, "data.leave_n", f"must be >= 1, got {said(self.leave_n)}")
        _check_dates(self, ("valid_start", "test_start"))
        _check(self.multi_separator != "", "data.multi_separator", "must be a non-empty string")
        # an empty name passed --print-config and then failed the read as "ColumnMap.timestamp must be a non-empty
        # column name", a name the user never wrote (`data.timestamp_col=` for "no column" is the usual slip)
        for name in ("user_col", "item_col"):
            value = getattr(self, name)
            _check(value.strip() != "", f"data.{name}", f"must be a column name, got {value!r}")
        for name in ("timestamp_col", "rating_col", "item_key", "user_key", "title_col"):
            value = getattr(self, name)
            _check(value is None or value.strip() != "", f"data.{name}",
                   f"must be a column name, or null for none (data.{name}=null), got {value!r}")
        # one column in two roles: ColumnMap refused it when the file was read, naming neither setting
        # ("ColumnMap maps one column to two roles: ['user_id', 'item_id', 'rating', 'rating']")
        roles = ("user_col", "item_col", "timestamp_col", "rating_col")
        for i, name in enumerate(roles):
            for other in roles[i + 1:]:
                value = getattr(self, name)
                _check(value is None or value != getattr(self, other), f"data.{name} and data.{other}",
                       f"both name column {value!r}; each role needs its own column"
                       + (f" (data.{other}=null if the file has no {other[:-4]} column)"
                          if other in ("timestamp_col", "rating_col") else ""))
        _check(self.history_verb.strip() != "" and len(self.history_verb) <= 40, "data.history_verb",
               "must be a verb of 1-40 characters, e.g. \"bought\"")
        if self.dataset is not None:
            _choice(self.dataset, "data.dataset", ("movielens-100k",))


#: where dropout masks' random numbers may come from (TowerConfig.dropout_rng; models/dropout.py)
DROPOUT_RNGS = ("pcg64", "torch")


#: Upper bounds of a tower's sizes, far above any real use (widths of a few hundred to a few thousand, a handful
#: of layers, windows of up to a few thousand items): `model.item.hidden=[1e12]` ended in torch's out-of-memory
#: traceback (or a swapping machine) and `model.user.history_len=2**63` in an OverflowError once the data was
#: read; now either is one line naming the setting, before any work. Sizes under the bounds can still add up to
#: more than the machine holds: models/size.py estimates that once the vocabularies are known.
MAX_WIDTH = 65_536  # id_dim, feature_dim, history_dim, out_dim, and each of hidden's layers
MAX_LAYERS = 128  # len(hidden), seq_layers
MAX_HISTORY_LEN = 100_000  # every batch holds a [B, history_len] window (and a transformer one position each)


@dataclass(frozen=True, kw_only=True)
class TowerConfig:
    """One tower: optional ID embedding, feature encoders, MLP, L2-normalised output.

    Widths are at most MAX_WIDTH, layer counts at most MAX_LAYERS and history_len at most MAX_HISTORY_LEN.
    """

    use_id: bool = True  #: learn an ID embedding per user / item (false: features and history only)
    id_dim: int = 64  #: width of the ID embedding
    feature_dim: int = 16  #: embedding size of each categorical / multi-valued feature
    hidden: tuple[int, ...] = (256,)  #: widths of the MLP's hidden layers ([] = one linear map to out_dim)
    out_dim: int = 64  #: width of the output vector, equal in both towers
    dropout: float = 0.1  #: dropout rate after each hidden layer, in [0, 1)
    #: where dropout masks' random numbers come from: pcg64 (numpy's, cheaper) | torch
    # where dropout masks' random numbers come from: "pcg64" = numpy's PCG64 seeded from torch's generator (the
    # same function as nn.Dropout, its mask ~3x cheaper: 18% of a default step was torch's bernoulli_);
    # "torch" = PyTorch's own masks, bit for bit those of runs made before the change (models/dropout.py)
    dropout_rng: str = "pcg64"
    layernorm: bool = True  #: LayerNorm after each hidden layer's linear map
    use_features: bool = True  #: read the feature columns named in data.item_* / data.user_*
    #: user tower only: how it reads the user's history items: none | mean | recency (pooled) | transformer
    #: (SASRec-style causal self-attention) | gru (sequence encoders)
    history: str = "none"
    history_len: int = 50  #: newest history items read; sequence towers learn one position per column
    history_dim: int = 64  #: width of the history embeddings (and of the sequence encoder)
    recency_decay: float = 0.9  #: history=recency: weight of the j-th most recent item: decay**j, in (0, 1]
    #: pooled histories: more pools of the window, one per decay in (0, 1] (1.0 = the plain mean), side by side
    #: with the first; [] = the one pool
    # pooled histories (mean | recency): more pools of the same window, one per decay here (1.0 = the plain
    # mean), side by side with the first before the MLP, so the tower reads a long memory beside the recent
    # items; () = the one pool. The first pool's own decay is not pooled twice (history=mean already is the
    # 1.0 pool), and sequence towers read the window with their encoder and ignore the setting.
    extra_pools: tuple[float, ...] = ()
    seq_layers: int = 2  #: sequence encoder: transformer blocks or GRU layers
    seq_heads: int = 1  #: transformer attention heads (history_dim must divide by it)
    seq_dropout: float = 0.2  #: dropout inside the sequence encoder
    #: transformer positions: right (by recency, as SASRec) | left (by order in the window, as SASRec+)
    # transformer positions: "right" = by recency (the newest item is always the last position, as in
    # SASRec's left-padded windows); "left" = by order in the window (the oldest item read is position 0,
    # as in SASRec+'s right-padded windows), so a user's 10th item is told from their 150th
    seq_positions: str = "right"
    #: transformer block: pre_ln | sasrec (the block of SASRec's reference code)
    # transformer block: "pre_ln" (x + Attn(LN x), x + FFN(LN x)) or "sasrec" (the block of SASRec's
    # reference code: keys/values from the un-normalised stream, residuals from the normalised one,
    # item embeddings scaled by sqrt(history_dim)); see models/sequence.py
    seq_block: str = "pre_ln"
    normalize: bool = True  #: L2-normalise the output (cosine scores); false = raw inner products
    #: false: no MLP after the inputs, the output is the input (hidden = [], input width = out_dim)
    # False: no MLP or linear map after the inputs; the output IS the input (hidden must be empty and
    # the input width equal out_dim). With tied tables the item vector is then the very embedding the
    # sequence encoder reads, as in SASRec.
    head: bool = True
    #: item tower only: add frozen text embeddings of the data.item_text columns
    # item tower only: frozen text embeddings of these item columns (issue 4)
    text_embeddings: bool = False
    dual_head: bool = False  #: item tower only: text -> semantic head, the rest -> collaborative head, mixed by a learned gate

    def __post_init__(self) -> None:
        _check_types(self, "tower.")
        # the value as typed, as TrainConfig's refusals say it (imported here: refusals imports this module)
        from twotower.pipeline.refusals import number_words as said

        for name in ("id_dim", "feature_dim", "history_dim", "out_dim"):  # "tower dims: must be > 0" named no key
            _check(getattr(self, name) > 0, f"tower.{name}", f"must be > 0, got {getattr(self, name)}")
            _check(getattr(self, name) <= MAX_WIDTH, f"tower.{name}",
                   f"must be at most {MAX_WIDTH:,}, got {getattr(self, name):,}")
        _check(all(h > 0 for h in self.hidden), "tower.hidden",
               f"layer sizes must be > 0, got {said(min(self.hidden, default=0))}")
        _check(all(h <= MAX_WIDTH for h in self.hidden), "tower.hidden",
               f"layer sizes must be at most {MAX_WIDTH:,}, got {max(self.hidden, default=0):,}")
        _check(len(self.hidden) <= MAX_LAYERS, "tower.hidden", f"at most {MAX_LAYERS} layers, got {len(self.hidden)}")
        _check(0.0 <= self.dropout < 1.0, "tower.dropout", f"must be in [0, 1), got {said(self.dropout)}")
        _choice(self.dropout_rng, "tower.dropout_rng", DROPOUT_RNGS)
        _choice(self.history, "tower.history", ("none", "mean", "recency", "transformer", "gru"))
        _check(self.history_len >= 1, "tower.history_len", f"must be >= 1, got {said(self.history_len)}")
        _check(self.history_len <= MAX_HISTORY_LEN, "tower.history_len",
               f"must be at most {MAX_HISTORY_LEN:,}, got {self.history_len:,}")
        _check(self.seq_layers >= 1, "tower.seq_layers", f"must be >= 1, got {said(self.seq_layers)}")
        _check(self.seq_layers <= MAX_LAYERS, "tower.seq_layers", f"must be at most {MAX_LAYERS}, got {self.seq_layers:,}")
        _check(self.seq_heads >= 1, "tower.seq_heads", f"must be >= 1, got {said(self.seq_heads)}")
        # only the transformer splits history_dim into heads: `seq_heads=3` beside the default pooled history
        # (or a GRU) was refused over a setting that tower never reads
        _check(self.history != "transformer" or self.history_dim % self.seq_heads == 0, "tower.seq_heads",
               f"history_dim {self.history_dim} must be divisible by seq_heads {self.seq_heads}")
        _check(0.0 <= self.seq_dropout < 1.0, "tower.seq_dropout", f"must be in [0, 1), got {said(self.seq_dropout)}")
        _choice(self.seq_positions, "tower.seq_positions", ("right", "left"))
        _choice(self.seq_block, "tower.seq_block", ("pre_ln", "sasrec"))
        _check(self.head or not self.hidden, "tower.head", "head = false takes no hidden layers: set hidden = []")
        _check(0.0 < self.recency_decay <= 1.0, "tower.recency_decay",
               f"must be in (0, 1], got {said(self.recency_decay)}")
        _check(all(0.0 < d <= 1.0 for d in self.extra_pools), "tower.extra_pools",
               f"each decay must be in (0, 1] (1.0: the plain mean), got {list(self.extra_pools)}")


#: TowerConfig switches only one tower reads: the user tower's history (pooling or sequence encoder), the item
#: tower's text heads. Switched on for the other tower they were silently ignored, so ModelConfig refuses them.
#: The sizes that go with them (history_len, seq_layers, ...) stay free on both: they do nothing while the
#: switch is off, and one dict of sizes for both towers is a fair way to build a config in Python (set on the
#: item tower by a config file or an override, they are warned of at start-up: models/unread.py).
USER_TOWER_ONLY = ("history", "extra_pools")
ITEM_TOWER_ONLY = ("text_embeddings", "dual_head")
#: TowerConfig switches only the transformer history encoder reads (models/sequence.py): beside a pooled history
#: or a GRU, `model.user.seq_positions=left` / `seq_block=sasrec` built the same model without a word of it
TRANSFORMER_ONLY = ("seq_positions", "seq_block")
#: The TowerConfig sizes each sequence encoder reads (models/sequence.py); a pooled history reads none. Beside a
#: history that does not read them they are warned of at start-up (models/unread.py, with the other sizes a tower
#: does not read), not refused as the switches above are: sizes, as loss.sampled_negatives is beside a loss that
#: draws none
SEQUENCE_SIZES = {"transformer": ("seq_layers", "seq_heads", "seq_dropout"), "gru": ("seq_layers", "seq_dropout")}


def _check_transformer_only(tower: TowerConfig, name: str) -> None:
    """Refuse a transformer switch (TRANSFORMER_ONLY) set away from its default on a tower that reads none."""
    if tower.history == "transformer":
        return
    for key in TRANSFORMER_ONLY:
        value, default = getattr(tower, key), getattr(TowerConfig, key)
        if value != default:
            raise ConfigError(f"model.{name}.{key}={value!r}: only the transformer history encoder reads {key}; "
                              f"model.{name}.history={tower.history} would ignore it. Set model.{name}.history="
                              f"transformer, or model.{name}.{key}={default} (the default)")


def _check_tower_only(tower: TowerConfig, name: str, other: str, settings: tuple[str, ...]) -> None:
    """Refuse a setting ``tower`` does not read when it differs from TowerConfig's default (declared there once)."""
    default = TowerConfig()
    for key in settings:
        value = getattr(tower, key)
        if value != getattr(default, key):
            raise ConfigError(f"model.{name}.{key}={value!r}: only the {other} tower reads {key}; the {name} tower "
                              f"would ignore it. Set model.{other}.{key}, or leave model.{name}.{key} out")


ITEM_ITEM_SOLVERS = ("auto", "dense", "low_rank")

#: The largest item-item term weight (model.item_item.weights): the towers' cosine scores are at most 1, so at 1e6 the
#: term already orders the lists almost alone (normalised towers), and past ~1e9 float32 keeps nothing of them in the
#: sum. 1e39 was
#: accepted and failed after the whole training ("value cannot be converted to type float without overflow": the
#: weight is a float32 parameter)
MAX_ITEM_ITEM_WEIGHT = 1_000_000


@dataclass(frozen=True, kw_only=True)
class ItemItemConfig:
    """The closed-form item-item term added to the score after training (models/item_item.py).

    EASE's item-item weights are fitted on the training interactions (``lambdas``: its ridge, chosen on
    validation as the EASE baseline's is), factorised to ``rank`` and added to the towers' vectors; the term's
    weight is the entry of ``weights`` that validates best (``0``: the towers alone; ties to the smaller).
    Above ``max_items`` items EASE is solved on the Gram matrix's ``eigenpairs`` leading eigenpairs
    (evaluation/low_rank_ease.py) instead of densely. Skipped, with a log line, without validation data, for a
    user tower that reads no history, and for the dual-head item tower.
    """

    #: fit the item-item term after training and add it to the scores, weighted as validation chooses
    # MovieLens-100K, seeds 42 / 7 / 1: valid NDCG@10 +6.6%, test Recall@20 +4.5% over the towers alone (docs/benchmarks.md)
    enabled: bool = True
    #: the term's weights tried on validation, each in [0, 1,000,000] (0 = the towers alone)
    # 0.05: a sparse catalogue's low-rank term validated best at 0.1 and fell at 0.2 (docs/benchmarks.md)
    weights: tuple[float, ...] = (0.0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.6, 0.8, 1.0)
    rank: int = 64  #: dimensions the item-item weights are factorised to, 1..4096
    lambdas: tuple[float, ...] = (100.0, 500.0, 2000.0)  #: EASE ridge strengths tried on validation, each > 0
    #: above this many items solver=auto solves EASE low-rank instead of densely
    # the dense item-item solve takes ~I^3 flops per lambda and ~24 I^2 bytes (as eval.ease_max_items): above this
    # many items (or where that memory is not available) EASE is solved on the Gram matrix's leading eigenpairs
    max_items: int = 20_000
    #: the Gram matrix's leading eigenpairs the low-rank solve keeps, 1..8192
    # eigenpairs that low-rank solve keeps: 256 validate at NDCG@10 0.0506 on MovieLens-1M where the dense
    # solve gives 0.0518 (128: 0.0482; 512: 0.0507); O(I * eigenpairs) memory
    eigenpairs: int = 256
    #: auto: dense up to max_items, low-rank above; dense | low_rank force one (low_rank: up to low_rank_max_items)
    solver: str = "auto"
    #: above this many items the term is not fitted (a log line says so and what it would need)
    # as eval.ease_low_rank_max_items: the low-rank solve's tuning scores each validation user over the catalogue
    # per λ, and its eigensolve needs ~48 I (eigenpairs + 16) bytes: 750,000 items, 256 eigenpairs: ~9.1 GiB,
    # which a default `train` grew into after its epoch without a word of it
    low_rank_max_items: int = 50_000

    def __post_init__(self) -> None:
        _check_types(self, "model.item_item.")
        # the value as typed, as TrainConfig's refusals say it (imported here: refusals imports this module)
        from twotower.pipeline.refusals import number_words as said

        _check(len(self.weights) > 0 and all(w >= 0 and math.isfinite(w) for w in self.weights),
               "model.item_item.weights", f"must be one or more finite numbers >= 0, got {list(self.weights)}")
        _check(max(self.weights) <= MAX_ITEM_ITEM_WEIGHT, "model.item_item.weights",
               f"each must be at most {MAX_ITEM_ITEM_WEIGHT:,} (where the term already orders the lists almost alone: "
               f"the towers' cosine scores are at most 1), got {max(self.weights):g}")
        _check(1 <= self.rank <= 4096, "model.item_item.rank", f"must be in 1..4096, got {said(self.rank)}")
        _check(len(self.lambdas) > 0 and all(lam > 0 and math.isfinite(lam) for lam in self.lambdas),
               "model.item_item.lambdas", f"must be one or more finite numbers > 0, got {list(self.lambdas)}")
        _check(self.max_items >= 1, "model.item_item.max_items", f"must be >= 1, got {said(self.max_items)}")
        _check(1 <= self.eigenpairs <= 8192, "model.item_item.eigenpairs", f"must be in 1..8192, got {said(self.eigenpairs)}")
        _choice(self.solver, "model.item_item.solver", ITEM_ITEM_SOLVERS)
        _check(self.low_rank_max_items >= 1, "model.item_item.low_rank_max_items",
               f"must be >= 1, got {said(self.low_rank_max_items)}")


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    """The two towers (``user``, ``item``: a TowerConfig each) and what joins them: the item ID table a
    sequence user tower shares, and the closed-form item-item term added to both after training."""

    # the recent items (decay 0.9) and the whole window's mean, pooled side by side: valid NDCG@10 +3.6% over
    # the recency pool alone on MovieLens-100K, every one of three seeds ahead (docs/benchmarks.md)
    user: TowerConfig = field(default_factory=lambda: TowerConfig(use_id=False, history="recency", extra_pools=(1.0,)))
    item: TowerConfig = field(default_factory=TowerConfig)
    #: sequence user towers read history items through the item tower's ID table when model.item.id_dim equals
    #: model.user.history_dim
    # sequence user towers (transformer | gru) embed history items with the item tower's ID
    # table when its id_dim equals history_dim (tied input/output embeddings, as in SASRec)
    share_item_embeddings: bool = True
    item_item: ItemItemConfig = field(default_factory=ItemItemConfig)

    def __post_init__(self) -> None:
        _check_sections(self, "model.")
        _check_tower_only(self.item, "item", "user", USER_TOWER_ONLY)
        _check_tower_only(self.user, "user", "item", ITEM_TOWER_ONLY)
        _check_transformer_only(self.user, "user")
        _check_transformer_only(self.item, "item")
        # the dual head mixes two unit vectors and normalises the mixture whatever model.item.normalize says:
        # normalize=false beside it trained the same model, to the last digit, without a word
        _check(self.item.normalize or not self.item.dual_head, "model.item.normalize",
               "false: the dual-head item tower always outputs unit vectors (normalize(alpha * semantic + (1 - alpha) * "
               "collaborative)), so it would ignore it. Set model.item.normalize=true, or model.item.dual_head=false")
        _check(self.user.out_dim == self.item.out_dim, "model.user.out_dim",
               f"{self.user.out_dim} must equal model.item.out_dim {self.item.out_dim}")
        u = self.user
        has_input = u.use_id or u.history != "none" or u.use_features
        _check(has_input, "model.user", "the user tower needs an ID embedding, features or history")


#: The largest softmax temperature (loss.temperature, and FinetuneConfig's / RerankTrainConfig's): the scores divided
#: by more are flat to float32 precision and AdamW's steps vanish. On the synthetic 60-user test data, test NDCG@10 was
#: 0.90 at 1, 0.86 at 1e4 and 0.22 at 1e6 (untrained: 0.19, as 1e30, which was accepted and trained nothing)
MAX_TEMPERATURE = 10_000


#: The most extra negatives a batch may draw (loss.sampled_negatives, loss.uniform_negatives): 512 queries x 10M
#: candidates are 20 GB of float32 scores already. 10**12 was refused only after the data had loaded, by the memory
#: check (17.5 PiB); loss.kind=full scores the whole catalogue without drawing
MAX_NEGATIVES = 10_000_000


@dataclass(frozen=True, kw_only=True)
class LossConfig:
    """The training objective (``loss.*``): which loss, its temperature and corrections (logQ, accidental-hit
    masking, negatives); the math of each is in its module under ``twotower.losses``."""

    kind: str = "inbatch"  #: inbatch (softmax over the batch's items) | sampled | full (whole catalogue) | bpr (pairwise)
    #: softmax temperature: scores are divided by it (smaller = sharper), in (0, 10,000]
    temperature: float = 0.02  # best of 0.02 / 0.05 / 0.1 on MovieLens-100K valid+test, two seeds (bench/movielens100k.py)
    logq: bool = True  #: subtract each candidate's log sampling probability from its score (popularity bias correction)
    mask_hits: bool = True  #: mask candidates that are the query's own positive item in another column (accidental hits); inbatch with train.examples=sequence has none (each item one candidate)
    uniform_negatives: int = 0  #: inbatch: extra uniform negatives per batch (mixed negative sampling), at most 10,000,000
    sampled_negatives: int = 256  #: sampled: negatives per batch, shared by its queries, 1 to 10,000,000
    sampler: str = "uniform"  #: sampled: uniform | popularity (train-item frequencies)

    def __post_init__(self) -> None:
        _check_types(self, "loss.")
        # the value as typed, as TrainConfig's refusals say it (imported here: refusals imports this module)
        from twotower.pipeline.refusals import number_words as said

        _choice(self.kind, "loss.kind", ("inbatch", "sampled", "full", "bpr"))
        _check(self.temperature > 0, "loss.temperature", f"must be > 0, got {said(self.temperature)}")
        _check(self.temperature <= MAX_TEMPERATURE, "loss.temperature", f"must be at most {MAX_TEMPERATURE:,} (above it "
               f"every scaled score is ~0 and training learns nothing), got {self.temperature:g}")
        _check(self.uniform_negatives >= 0, "loss.uniform_negatives", f"must be >= 0, got {said(self.uniform_negatives)}")
        _check(self.sampled_negatives >= 1, "loss.sampled_negatives", f"must be >= 1, got {said(self.sampled_negatives)}")
        for name in ("uniform_negatives", "sampled_negatives"):
            _check(getattr(self, name) <= MAX_NEGATIVES, f"loss.{name}",
                   f"must be at most {MAX_NEGATIVES:,} (negatives drawn per batch; loss.kind=full scores every item "
                   f"without drawing), got {getattr(self, name):,}")
        _choice(self.sampler, "loss.sampler", ("uniform", "popularity"))
        # switches one loss kind reads: set beside another kind they trained without a word of it, e.g.
        # loss.kind=sampled loss.sampler=popularity loss.uniform_negatives=256 drew no uniform negative (no mixture).
        # The size loss.sampled_negatives stays free, as tower sizes do: it does nothing while the switch is off (a
        # value set beside another kind is warned of at start-up: losses.factory.unread_sampled_negatives).
        _check(self.uniform_negatives == 0 or self.kind == "inbatch", "loss.uniform_negatives",
               f"{self.uniform_negatives} adds uniform negatives to the in-batch softmax only; loss.kind={self.kind} "
               "would ignore it. Set loss.kind=inbatch, or loss.uniform_negatives=0")
        _check(self.sampler == "uniform" or self.kind == "sampled", "loss.sampler",
               f"{self.sampler} draws the negatives of the sampled softmax only; loss.kind={self.kind} would ignore "
               "it. Set loss.kind=sampled, or leave loss.sampler out")


#: What train.threads = None means (utils.runtime.auto_threads), as the --help of `train` and `demo` state it.
TRAIN_THREADS_DEFAULT = "TWOTOWER_THREADS, else half the idle cores, at least 1"

#: Threads of the `search` and `rerank` subcommands when neither --threads nor TWOTOWER_THREADS sets them (their
#: --help said "torch's" while they set this); the text encoder's own count is --encoder-threads.
SEARCH_THREADS_DEFAULT = 1

#: The most threads any setting may ask for (--threads, TWOTOWER_THREADS, train.threads, serve's): torch takes a
#: C int and raised a bare "Overflow when unpacking long" above 2**31 - 1; far above any machine's cores anyway.
MAX_THREADS = 1024

#: torch / FAISS threads a served request computes on (ServiceSettings.threads, `serve --threads`): 1 is the fastest
#: for single queries on shared cores. `index build` times its single-query latencies (the p50 / p99 that decide
#: `--index auto`'s exact search and that tune.json reports) on as many (IndexPolicy.latency_threads)
SERVE_THREADS = 1

#: The longest list a command line asks for (`recommend --k`, `search query --k`/`--rerank-top`, `index build --k`)
#: and the Python API returns (`tt.recommend(k=...)`): every result is padded to k, so 99999999999999999999 was a
#: numpy TypeError and 10**9 gigabytes of padding. The HTTP service caps k lower, at ServiceSettings.max_k
#: (`serve --max-k`), which may be raised up to this bound and no further.
MAX_K = 10_000
#: Item queries on which `index build` measures the chosen index's recall for `similar` / `/similar-items` (item
#: vectors as queries, each item left out of its own list) beside autotune's user-query recall: at most this many,
#: and no more than the build's tuning queries (a few hundred searches of an index already built)
SIMILAR_RECALL_QUERIES = 500
#: largest RRF constant: past it the fused scores 1 / (k + rank) differ below float64 resolution (ranks 1 and 3
#: against 2 and 2 tie from k~1e8) and the fused order is lost; at 1e6 RRF already orders like its k -> inf limit
MAX_RRF_K = 1_000_000
#: `recommend --users`' list length when --k is not given (a batch of lists for offline use, deeper than the
#: service's ServiceSettings.default_k that --user and --history take); its --help and the README state it
USERS_K = 100
#: The longest search query text, in characters: POST /search answers 422 past it, `search query TEXT` refuses it
MAX_QUERY_CHARS = 2000
#: how an item-to-item search queries an item without training interactions of a dual-head item tower:
#: "semantic" (its semantic head; pipeline/similar.py) or "item" (its served vector, as before); the first is
#: the default (ServiceSettings.cold_similar, `serve --cold-similar`)
COLD_SIMILAR = ("semantic", "item")


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """How the towers are fitted (``train.*``): epochs, batch, optimiser and schedule, examples, threads, seed,
    validation and early stopping, checkpoints, progress."""

    epochs: int = 30  #: most passes over the training examples (early stopping may end sooner)
    batch_size: int = 512  #: examples a step (the global batch under torchrun); its items are the in-batch negatives
    lr: float = 2e-3  #: learning rate (> 0)
    #: learning rate over the epochs: constant, or decayed from train.lr towards 0 at train.epochs
    #: (linear | cosine, set at the start of each epoch, so resume needs no scheduler state)
    lr_schedule: str = "constant"
    weight_decay: float = 1e-4  #: AdamW's decoupled weight decay, >= 0
    #: weight decay on every dense parameter (true), or on the matrices and embedding tables only, leaving
    #: biases and LayerNorm gains undecayed (false: the convention of BERT and GPT training recipes)
    decay_1d: bool = True
    optimizer: str = "adamw"  #: adamw | sparse_adam (sparse ID tables)
    #: what an example is: causal (predict each interaction from the history before it) | denoising (from the rest
    #: of the history) | both | sequence (a target at every position of a window; sequence towers)
    examples: str = "causal"
    random_windows: bool = False  #: sequence: users longer than history_len + 1 get a random window each epoch
    denoise_keep: float = 0.8  #: denoising: share of the other history kept as input
    #: causal examples: share of each input history's items dropped at random, in [0, 1)
    # causal examples: share of each input history's items dropped at random, in place (augmentation; the
    # MovieLens-100K default tower's valid NDCG@10 0.1951 -> 0.2016 with ema_decay, 7 seeds; docs/benchmarks.md)
    history_dropout: float = 0.2
    patience: int = 5  #: stop after this many validations without a better eval.select_metric
    #: minutes of training after which the running epoch is the last (the best is kept); null = no limit
    # stop after the epoch that passes this many minutes of training (the best epoch so far is kept);
    # None = no limit. For fits that must end by a deadline (bench/ml1m.py's 60-minute budget).
    time_budget_min: float | None = None
    #: with time_budget_min and a decaying lr_schedule: end the schedule where the budget is expected to stop the
    #: fit (false: at train.epochs)
    # with a time budget and a decaying schedule: aim the schedule at the epoch the budget is expected to end
    # the fit (from the mean epoch time so far), so it has annealed when it stops; false = at train.epochs
    budget_schedule: bool = True
    seed: int = 42  #: seed of initialisation, example order, dropout, sampling, split=random; an integer >= 0
    threads: int | None = None  #: CPU threads (torch, BLAS, FAISS); null: TWOTOWER_THREADS, else half the idle cores
    #: matrix products while training: fp32 | bf16 | auto (bf16 where the CPU multiplies it natively)
    # matrix products while training: fp32, or bf16 (the towers under CPU autocast, the sequence encoder's attention
    # products in bfloat16 too, LayerNorm and the loss kept in float32; the full-softmax kernel's GEMMs in
    # bfloat16) -- 1.3-3x faster products where the CPU multiplies bfloat16 natively, emulated and slow
    # elsewhere; auto = bf16 on such a CPU, else fp32.
    # Validation, evaluation and serving always run in fp32.
    precision: str = "fp32"
    #: the item text encoder's forward pass (model.item.text_embeddings / dual_head): torch | torch-bf16 | onnx |
    #: onnx-int8 | auto; null: TWOTOWER_ENCODER_BACKEND, else torch; a run records the backend it encoded with
    # what `train --encoder-backend` sets. The run's config.json holds the backend the texts were encoded with (auto
    # resolved), as it holds the thread count: another backend gives other vectors, so `--config RUN/config.json`
    # trained another model, without a word (run.json alone named the backend)
    encoder_backend: str | None = None
    eval_every: int = 1  #: validate every N-th epoch (and the last); train.patience counts validations
    #: validation users scored each epoch, drawn once with train.seed; null = all of them
    # validate each epoch on this many validation users, drawn once (seeded by train.seed); None = every one.
    # Full-catalogue validation costs users x items scores: 176k users over 1M items took ~35 min an epoch
    valid_max_users: int | None = None
    max_examples_per_epoch: int | None = None  #: train each epoch on at most this many examples (a fresh draw); null = all
    grad_clip: float | None = 5.0  #: largest gradient norm; 0 or null = no clipping
    #: validate and save a moving average of the weights with this decay per step, in [0, 1); 0 or null = the live
    #: weights
    # validate and save an exponential moving average of the weights (decay per step; training itself steps the
    # live weights; sparse ID tables stay live); 0 or None = the live weights (training/averaging.py)
    ema_decay: float | None = 0.99
    #: run the item tower's backward pass (and the in-batch loss's candidate gradient and half of its rows) on a
    #: second thread beside the user tower's where a core is spare (CPU; the same numbers either way)
    # ML-1M default recommender, 1 thread, idle 2-core machine: see docs/benchmarks.md (training/tower_overlap.py,
    # losses/side_gradient.py)
    overlap_towers: bool = True
    checkpoint: bool = True  #: save a checkpoint after each epoch (RUN/checkpoint) for --resume
    progress: bool = True  #: a bar on a terminal; elsewhere a log line every log_every_s seconds
    log_every_s: float = 30.0  #: seconds between progress log lines when not on a terminal
    diagnostics: bool = True  #: per-epoch embedding spread / alignment / uniformity
    #: cpu, cuda or cuda:N; under torchrun "cuda" means cuda:LOCAL_RANK with NCCL (another cuda:N is refused)
    device: str = "cpu"
    #: GradCache: run the towers this many examples at a time (the loss still sees the whole batch); null = off
    # GradCache (Gao et al. 2021): run the towers this many examples at a time while the
    # in-batch loss still sees the whole batch; None = plain full-batch forward
    gradcache_chunk: int | None = None
    #: torch.distributed backend under torchrun: gloo | nccl; null = gloo
    # torch.distributed backend under torchrun (WORLD_SIZE > 1): gloo | nccl; None = gloo,
    # since the trainer computes on CPU. batch_size is the GLOBAL batch, split over the ranks.
    distributed_backend: str | None = None
    #: seconds a rank waits in a collective for the other ranks under torchrun before it stops with an error
    #: naming those that did not answer (torch's default for gloo: 1800); keep it above the longest work one rank
    #: does alone while the others wait: reading the data, rank 0's validation and saving after each epoch
    dist_timeout_s: float = 1800.0
    #: under torchrun, rank 0 warns once when another rank has sent no heartbeat for this many seconds (a frozen
    #: process: SIGSTOP, a stuck node), and rank 1 and each other node's first rank when rank 0 has, long before
    #: train.dist_timeout_s stops the run; 0 = off
    # each rank beats into the launcher's store every heartbeat_warn_s / 6 seconds (at most 10) from a thread of
    # its own (twotower/heartbeat.py); a rank busy in Python code still beats, and is named at the timeout only
    heartbeat_warn_s: float = 60.0

    def __post_init__(self) -> None:
        _check_types(self, "train.")
        # a refusal's echo of the value as typed (train.lr=-1: -1, not -1.0; a seed of 20 digits counted), as the
        # flags' refusals echo theirs; imported here, as refusals imports this module
        from twotower.pipeline.refusals import number_words as said

        _check(self.epochs >= 1, "train.epochs", f"must be >= 1, got {said(self.epochs)}")
        _check(self.batch_size >= 2, "train.batch_size",
               f"must be >= 2 (in-batch negatives need company), got {said(self.batch_size)}")
        _check(self.lr > 0, "train.lr", f"must be > 0, got {said(self.lr)}")
        _choice(self.optimizer, "train.optimizer", ("adamw", "sparse_adam"))
        _choice(self.lr_schedule, "train.lr_schedule", ("constant", "linear", "cosine"))
        _choice(self.precision, "train.precision", ("fp32", "bf16", "auto"))
        _choice(self.examples, "train.examples", ("causal", "denoising", "both", "sequence"))
        _check(self.log_every_s > 0, "train.log_every_s", f"must be > 0, got {said(self.log_every_s)}")
        _check(0 < self.denoise_keep <= 1, "train.denoise_keep", f"must be in (0, 1], got {said(self.denoise_keep)}")
        # a size of the denoising examples alone (its default is free): beside causal examples 0.3 trained unthinned
        _check(self.denoise_keep == TrainConfig.denoise_keep or self.examples in ("denoising", "both"),
               "train.denoise_keep", f"{self.denoise_keep:g} thins the inputs of train.examples=denoising (or both) "
               f"only; train.examples={self.examples} would ignore it. Set train.examples=denoising or both, or leave "
               "train.denoise_keep out")
        # a switch of the window examples alone: beside causal examples it was accepted and did nothing
        _check(not self.random_windows or self.examples == "sequence", "train.random_windows",
               f"true draws the windows of train.examples=sequence only; train.examples={self.examples} would "
               "ignore it. Set train.examples=sequence, or leave train.random_windows out")
        _check(0 <= self.history_dropout < 1, "train.history_dropout", f"must be in [0, 1), got {said(self.history_dropout)}")
        _check(self.patience >= 1, "train.patience", f"must be >= 1, got {said(self.patience)}")
        # 0 was a ZeroDivisionError at the end of the first epoch (epoch % eval_every)
        _check(self.eval_every >= 1, "train.eval_every",
               f"must be >= 1 (validate every N-th epoch and the last), got {said(self.eval_every)}")
        _check(self.valid_max_users is None or self.valid_max_users >= 1, "train.valid_max_users",
               f"must be >= 1 (validation users scored each epoch) or null for every one, got {said(self.valid_max_users)}")
        # numpy's generators take no negative seed: -1 was a traceback ("expected non-negative integer")
        _check(self.seed >= 0, "train.seed", f"must be an integer >= 0, got {said(self.seed)}")
        _check(self.seed <= MAX_SEED, "train.seed",
               f"must be at most 2**64 - 1 (the largest torch takes), got {said(self.seed)}")
        _check(self.time_budget_min is None or self.time_budget_min > 0, "train.time_budget_min",
               f"must be > 0 (minutes) or null, got {said(self.time_budget_min)}")
        _check(self.threads is None or self.threads >= 1, "train.threads", f"must be >= 1, got {said(self.threads)}")
        _check(self.threads is None or self.threads <= MAX_THREADS, "train.threads",
               f"must be at most {MAX_THREADS}, got {said(self.threads)}")
        # 0 and negative counts trained on nothing (-5 cut every epoch to zero batches) or on everything (0)
        _check(self.max_examples_per_epoch is None or self.max_examples_per_epoch >= 2, "train.max_examples_per_epoch",
               f"must be >= 2 (a batch needs two examples) or null for every example, got {said(self.max_examples_per_epoch)}")
        # a negative norm was accepted and made clip_grad_norm_ scale every gradient by a negative factor (ascent)
        _check(self.grad_clip is None or self.grad_clip >= 0, "train.grad_clip",
               f"must be >= 0 (the largest gradient norm; 0 or null = no clipping), got {said(self.grad_clip)}")
        _check(self.weight_decay >= 0, "train.weight_decay", f"must be >= 0, got {said(self.weight_decay)}")
        _check(self.ema_decay is None or 0 <= self.ema_decay < 1, "train.ema_decay",
               f"must be in [0, 1) (0 = no average) or null, got {said(self.ema_decay)}")
        _check(self.device == "cpu" or self.device.startswith("cuda"), "train.device",
               f"must be cpu, cuda or cuda:N, got {self.device!r}")
        # bf16 is CPU autocast (the towers) and the CPU full-softmax kernel: on a GPU the run trained in float32,
        # its log silent about it. auto stays free: it means bf16 where it applies
        _check(self.precision != "bf16" or self.device == "cpu", "train.precision",
               f"bf16 multiplies in bfloat16 on the CPU only (CPU autocast); train.device={self.device} would train in "
               "float32. Set train.precision=fp32 (or auto), or train.device=cpu")
        _check(self.gradcache_chunk is None or self.gradcache_chunk >= 1, "train.gradcache_chunk",
               "must be an integer >= 1 (examples per tower chunk) or null to turn GradCache off, "
               f"got {said(self.gradcache_chunk)}")
        if self.distributed_backend is not None:
            _choice(self.distributed_backend, "train.distributed_backend", ("gloo", "nccl"))
        if self.encoder_backend is not None:
            from twotower.text.encoder import BACKEND_CHOICES  # numpy alone; the choices are declared there, once

            _choice(self.encoder_backend, "train.encoder_backend", BACKEND_CHOICES)
        _check(self.dist_timeout_s > 0, "train.dist_timeout_s", f"must be > 0 (seconds), got {said(self.dist_timeout_s)}")
        # below a second the heartbeats would come every few milliseconds, a load on the launcher's store
        _check(self.heartbeat_warn_s == 0 or self.heartbeat_warn_s >= 1, "train.heartbeat_warn_s",
               f"must be 0 (off) or >= 1 (seconds), got {said(self.heartbeat_warn_s)}")


@dataclass(frozen=True, kw_only=True)
class EvalConfig:
    """How runs are measured (``eval.*``): the cut-offs k, the baselines beside the model, the metric that picks
    the best epoch, and the baselines' tuning."""

    ks: tuple[int, ...] = (10, 20, 50, 100)  #: cut-offs k of Recall@k, NDCG@k, ..., each 1..10,000
    #: baselines evaluated beside the model: popularity | ease | itemknn ([] = none)
    baselines: tuple[str, ...] = ("popularity", "ease", "itemknn")
    select_metric: str = "NDCG@10"  #: validation metric (NAME@K, k 1..10,000) for early stopping and every choice made on validation
    #: above this many items ease_solver=auto solves the EASE baseline low-rank
    # EASE's dense item-item solve takes ~I^3 flops per lambda tried and ~24 I^2 bytes (20,000 items: ~9 GiB,
    # minutes per lambda on 2 cores): above this many items (or where that memory is not available) the EASE
    # baseline is solved on its Gram matrix's leading eigenpairs (evaluation/low_rank_ease.py), as the item-item
    # term is above model.item_item.max_items
    ease_max_items: int = 20_000
    #: auto: dense up to ease_max_items, low-rank above; dense: skipped above ease_max_items (no low-rank row);
    #: low_rank: on any catalogue (up to ease_low_rank_max_items)
    ease_solver: str = "auto"
    #: eigenpairs the low-rank EASE baseline keeps, 1..8192
    # eigenpairs the low-rank baseline keeps: the item-item term's (O(I * eigenpairs) memory)
    ease_eigenpairs: int = ItemItemConfig.eigenpairs
    #: above this many items the low-rank EASE baseline is skipped, with a warning
    # the low-rank baseline is skipped (with a warning saying why) above this many items. Its time is its tuning's
    # scoring of every validation user over the catalogue for each of 7 lambdas: synthetic 50,000 items x 100,000
    # users, 2 threads, the eigensolve took 35 s and one lambda 716 CPU-s (~7 CPU-ms a user), ~45 min on 2 free
    # cores in all when every user was scored (ease_tune_max_users: a tenth of that); by flops a user (2 I * 256)
    # still below the dense EASE's at its 20,000-item limit (2 * 20,000^2)
    ease_low_rank_max_items: int = 50_000
    #: validation users (at most) on which EASE, ItemKNN and the item-item term tune their settings; null = all
    # the EASE baseline (dense or low-rank) chooses its lambda, ItemKNN its k, and the item-item term
    # (model.item_item) its lambda and weight, on a sample of at most this many validation users drawn from
    # train.seed (the low-rank baseline's from seed 0, as its eigensolve; None: all of them): that scoring is their cost (above; ItemKNN: 63-167 s a k for 30,000 users
    # over 40,000 items), and a sample of 10,000 users ranks a handful of settings well enough. Named for EASE,
    # which had it first: run folders' config.json carry this key, so it is kept rather than renamed
    ease_tune_max_users: int | None = 10_000

    def __post_init__(self) -> None:
        _check_types(self, "eval.")
        # the value as typed, as TrainConfig's refusals say it (imported here: refusals imports this module)
        from twotower.pipeline.refusals import number_words as said

        _check(len(self.ks) > 0 and all(k > 0 for k in self.ks), "eval.ks", f"must be positive integers, got {list(self.ks)}")
        # the top-k lists are padded to k: 99999999999999999999 trained the whole run, then failed in numpy
        _check(max(self.ks) <= MAX_K, "eval.ks", f"must be at most {MAX_K}, got {max(self.ks)}")
        # [10, 10] trained the whole run and then failed its evaluation as "EvalProtocol.ks has duplicates"
        _check(len(set(self.ks)) == len(self.ks), "eval.ks", f"names a cut-off twice: {list(self.ks)}")
        _check(self.ease_max_items >= 1, "eval.ease_max_items", f"must be >= 1, got {said(self.ease_max_items)}")
        _choice(self.ease_solver, "eval.ease_solver", ITEM_ITEM_SOLVERS)
        _check(1 <= self.ease_eigenpairs <= 8192, "eval.ease_eigenpairs",
               f"must be in 1..8192, got {said(self.ease_eigenpairs)}")
        _check(self.ease_low_rank_max_items >= 1, "eval.ease_low_rank_max_items",
               f"must be >= 1, got {said(self.ease_low_rank_max_items)}")
        _check(self.ease_tune_max_users is None or self.ease_tune_max_users >= 1, "eval.ease_tune_max_users",
               f"must be >= 1, or null for every validation user, got {said(self.ease_tune_max_users)}")
        from twotower.evaluation.metric_names import CATALOGUE_METRICS, PER_USER_METRICS, parse_metric  # no numpy

        # Coverage and MeanPop describe the lists, not whether they hit: `MeanPop@10` kept the epoch with the most
        # popular lists as "best", and the item-item term's tuning refused it after the whole training
        base = self.select_metric.partition("@")[0]
        _check(base not in CATALOGUE_METRICS, "eval.select_metric",
               f"selects on how well the lists hit the held-out items: one of {list(PER_USER_METRICS)} at some k, "
               f"e.g. 'NDCG@10'; {base} describes the lists themselves (it is reported beside them), got "
               f"{self.select_metric!r}")
        try:  # "ndcg@10" passed --print-config and was refused only after the data was read
            _, k = parse_metric(self.select_metric, PER_USER_METRICS)
        except ConfigError as e:
            raise ConfigError(f"eval.select_metric: {e}") from None
        # validation pads its lists to k as it does eval.ks': NDCG@100000 was taken where eval.ks=[100000] is not
        _check(k <= MAX_K, "eval.select_metric", f"k must be at most {MAX_K} (as eval.ks), got {self.select_metric}")
        for b in self.baselines:
            _choice(b, "eval.baselines", ("popularity", "ease", "itemknn"))
        _check(len(set(self.baselines)) == len(self.baselines), "eval.baselines", "names a baseline twice")


@dataclass(frozen=True, kw_only=True)
class RunConfig:
    """A whole run's settings, one section each (``data``, ``model``, ``loss``, ``train``, ``eval``); what
    load_config returns from a TOML/YAML file and ``key=value`` overrides, validated on construction,
    and what a run folder's ``config.json`` holds."""

    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)

    def __post_init__(self) -> None:
        _check_sections(self, "")
        # refused here rather than by the trainer, after the data was read: --print-config showed it as fine
        if self.train.examples == "sequence" and self.model.user.history not in ("transformer", "gru"):
            raise ConfigError(f"train.examples: sequence needs a sequence user tower, and model.user.history is "
                              f"{self.model.user.history}; set model.user.history=transformer or gru, or "
                              "train.examples=causal")


# ---------------------------------------------------------------- text retrieval

#: Hybrid fusion rules a search may name: reciprocal rank fusion, or score interpolation after min-max or
#: z-score normalisation (twotower.search.fusion).
FUSION_CHOICES = ("rrf", "minmax", "zscore")


@dataclass(frozen=True, kw_only=True)
class SearchConfig:
    """Text retrieval (``twotower search evaluate | index | query``, ``POST /search``): every default once."""

    max_length: int = 256  #: document word pieces the encoders read (all-MiniLM-L6-v2's own limit)
    query_max_length: int = 64  #: query word pieces the encoders read
    fusion: str = "rrf"  #: how hybrid mode fuses BM25 and dense lists: rrf | minmax | zscore
    rrf_k: int = 60  #: the RRF constant of Cormack et al. (SIGIR 2009), 1..1,000,000
    bm25_weight: float = 0.5  #: minmax / zscore interpolation: BM25's weight w, dense 1 - w
    k: int = 10  #: results a query returns, 1..10,000
    depth: int = 100  #: candidates each retriever returns before fusion (Recall@100 is measured on them)
    rerank_top: int = 20  #: first-stage candidates (BM25's, the dense retriever's or the fused list's) the cross-encoder re-scores, 1..10,000
    #: folder of the corpus embeddings kept between runs ("~" expanded), shared by every run
    # corpus embeddings kept between runs, per user rather than per working directory ("~" is expanded): a
    # relative default made `twotower search` from another folder encode the corpus again into a new ./runs/cache
    # (or fail where the folder is read-only). Entries are keyed by the encoder's weights and the text, so one
    # cache serves every run; training's item text embeddings share it
    cache_dir: str = "~/.cache/twotower/text-embeddings"

    def __post_init__(self) -> None:
        _check_types(self, "search.")
        for name in ("max_length", "query_max_length", "rrf_k", "k", "depth", "rerank_top"):
            value = getattr(self, name)
            _check(isinstance(value, int) and not isinstance(value, bool) and value >= 1, f"search.{name}",
                   f"must be an integer >= 1, got {value!r}")
        for name in ("k", "rerank_top"):  # as `search query --k / --rerank-top`: every list is padded to k
            _check(getattr(self, name) <= MAX_K, f"search.{name}", f"must be at most {MAX_K:,}, got {getattr(self, name):,}")
        _check(self.rrf_k <= MAX_RRF_K, "search.rrf_k", f"must be at most {MAX_RRF_K:,}, got {self.rrf_k:,}")
        _choice(self.fusion, "search.fusion", FUSION_CHOICES)
        _check(isinstance(self.bm25_weight, (int, float)) and 0.0 <= self.bm25_weight <= 1.0, "search.bm25_weight",
               f"must be in [0, 1], got {self.bm25_weight!r}")


#: PrepareConfig.pair_passage_list for cells holding a list in brackets: [1, 2] (JSON), ['a', 'b'] (Python), [1 2] (NumPy)
PAIR_LIST_BRACKETS = "brackets"


#: the PrepareConfig fields that name a column of the passages or pairs table (`search prepare --<field>-col`)
PREPARE_COLUMNS = ("passage_id", "passage_text", "passage_title", "query", "query_id", "pair_passage", "score", "split")


@dataclass(frozen=True, kw_only=True)
class PrepareConfig:
    """``twotower search prepare``: column names of the passages and pairs tables (``None``: not in the file), and
    how the queries are split into qrels/train.tsv and qrels/test.tsv."""

    passage_id: str = "passage_id"  #: passages table: id column (--passage-id-col)
    passage_text: str = "text"  #: passages table: text column (--passage-text-col)
    passage_title: str | None = None  #: passages table: title column, or null (--passage-title-col)
    query: str = "query"  #: pairs table: query text column (--query-col)
    #: pairs table: query id column (--query-id-col); null: one id per distinct query text
    query_id: str | None = None  # None: one id per distinct query text (q1, q2, ... by first appearance among the pairs kept)
    #: pairs table: relevant passage id column (--pair-passage-col); null: named as passage_id
    pair_passage: str | None = None
    #: pairs table: relevance column (--score-col); null: every pair has relevance 1
    score: str | None = None
    #: pairs table: train/test column (--split-col); null: split by test_share
    split: str | None = None
    #: share of the queries written to qrels/test.tsv (--test-share), the rest to train.tsv, in [0, 1); 0: every query
    #: to test.tsv and none to train (a set for evaluation only)
    test_share: float = 0.2
    #: seed of the train/test cut (--seed)
    seed: int = 0
    #: drop and count pairs naming an unknown passage instead of refusing them (--drop-unknown)
    drop_unknown: bool = False
    #: cells of the pair passage column holding several ids (--pair-passage-list): null = one id | brackets ([1,
    #: 2]) | the one character between ids
    # None: a cell holds one passage id; "brackets": a list in brackets, [1, 2] or [1 2] (SciFact's cited_doc_ids,
    # printed NumPy arrays); or the one character between the ids in a cell (";" for 1;2). Each id is its own pair
    # (the row's query, score and split); an empty list is an empty id
    pair_passage_list: str | None = None
    #: text encoding of both tables (--encoding)
    encoding: str = "utf-8"  # of both tables (CSV/TSV/JSONL), as data.encoding for interactions; the output is UTF-8

    def __post_init__(self) -> None:
        # named as the other search configs name their settings, with the class a Python caller built
        # (``FinetuneConfig.lr: must be > 0``): "--test-share must be in [0, 1)" named a flag that caller never typed,
        # and its types were "prepare.test_share". `search prepare` replaces each by its flag
        # (cli.search_cmd._prepare_config)
        name = "PrepareConfig"
        _check_types(self, f"{name}.")
        for setting in PREPARE_COLUMNS:
            value = getattr(self, setting)
            # "" read as "no such column" in some places and as a column named "" in others (a KeyError traceback)
            _check(value is None or bool(value.strip()), f"{name}.{setting}",
                   "empty column name; give the column's name in the file, or leave it out")
        _check(0.0 <= self.test_share < 1.0, f"{name}.test_share", f"must be in [0, 1), got {self.test_share}")
        mode = self.pair_passage_list
        _check(mode is None or mode == PAIR_LIST_BRACKETS or (len(mode) == 1 and not mode.isalnum()),
               f"{name}.pair_passage_list",
               f"give {PAIR_LIST_BRACKETS!r} for cells holding a list in brackets ([1, 2], ['a', 'b'] or [1 2]), or "
               f"the one character between the ids in a cell (';' for 1;2); leave it out for one id per cell, got "
               f"{mode!r}")
        # numpy's generators take no negative seed: -1 was a traceback ("expected non-negative integer")
        _check(self.seed >= 0, f"{name}.seed", f"must be an integer >= 0, got {self.seed}")
        _check(self.seed <= MAX_SEED, f"{name}.seed", f"must be at most 2**64 - 1 (the largest torch takes), got {self.seed}")
        try:
            check_encoding(self.encoding)
        except ConfigError as e:
            raise ConfigError(str(e).replace("data.encoding", f"{name}.encoding", 1)) from None


# ---------------------------------------------------------------- text retrieval training

#: the retrievers `search train` mines hard negatives from (FinetuneConfig.mining_retriever), and `rerank train`
MINING_RETRIEVERS = ("dense", "bm25")
#: where `rerank train --mining-retriever` mines by default (and whose lists --valid-frac reranks): BM25 needs no
#: bi-encoder; dense mines from --mining-model's (a `search train` output, or zero-shot all-MiniLM-L6-v2)
RERANK_MINING_RETRIEVER = "bm25"


@dataclass(frozen=True, kw_only=True)
class FinetuneConfig:
    """Bi-encoder fine-tuning (``twotower search train``, :func:`twotower.search.finetune_bi_encoder`)."""

    #: passes over the training pairs (--epochs)
    epochs: int = 8  # SciFact's ~800 training pairs need several passes (bench/scifact.py)
    batch_size: int = 32  #: queries a batch (--batch-size), >= 2
    lr: float = 5e-5  #: learning rate (--lr)
    warmup_frac: float = 0.1  #: linear warm-up over this share of steps, then linear decay
    weight_decay: float = 0.01  #: AdamW's weight decay, >= 0
    #: softmax temperature (--temperature), in (0, 10,000]
    temperature: float = 0.05  # scale 1/0.05 = 20, the MultipleNegativesRankingLoss default for cosine scores
    max_length: int = SearchConfig.max_length  #: document word pieces (--max-length)
    query_max_length: int = SearchConfig.query_max_length  #: query word pieces
    shared: bool = False  #: one transformer for both towers (--shared)
    #: train the document tower too (--train-doc-tower); false: frozen, the corpus encoded once (fast on a CPU)
    train_doc_tower: bool = False
    corpus_negatives: bool = False  #: full softmax over the frozen corpus; needs train_doc_tower=False
    negatives_per_query: int = 3  #: mined hard negatives added per query per step (--negatives); 0: in-batch only
    #: re-mine from the model's own dense index before each epoch after the first; null: where it can (a frozen
    #: document tower, dense mining, negatives_per_query >= 1), as `search train` does
    refresh_negatives: bool | None = None
    #: where the hard negatives are mined (--mining-retriever): dense (the model's own index) or bm25 (mined once)
    # bm25's lists do not change as the model trains, so it has nothing to re-mine: refresh_negatives is refused
    mining_retriever: str = "dense"
    grad_clip: float = 1.0  #: largest gradient norm; 0 = no clipping
    seed: int = 0  #: seed of initialisation, batch order and the held-out queries (--seed)
    #: share of the training queries held out to choose the best epoch by NDCG@10 (--valid-frac), in [0, 1); 0 =
    #: off
    # share of the training queries held out (grouped by relevant document, as bench/scifact.py) and scored by dense
    # NDCG@10 before training and after each epoch; the best epoch's weights are saved, the starting ones when no
    # epoch beat them. 0 = off: the training loss alone cannot tell a pretrained model that learned nothing
    valid_frac: float = 0.0
    patience: int = 3  #: with valid_frac: stop after this many epochs without a better NDCG@10 (--patience)

    @property
    def re_mines(self) -> bool:
        """``refresh_negatives`` resolved: null re-mines where it can (frozen document tower, dense mining, mined
        negatives used)."""
        if self.refresh_negatives is not None:
            return self.refresh_negatives
        return (not self.train_doc_tower and not self.corpus_negatives and self.negatives_per_query > 0
                and self.mining_retriever == "dense")

    def __post_init__(self) -> None:
        # named as the other configs name their settings ("train.lr: must be > 0"), with the class a Python caller
        # built, as MiningConfig: "lr must be > 0, got 0" read unlike every other refusal. `search train` replaces
        # the field by its flag (cli.search_cmd._flag_config)
        _check_types(self, "FinetuneConfig.")
        name = "FinetuneConfig"
        for setting in ("epochs", "max_length", "query_max_length"):
            _check(getattr(self, setting) >= 1, f"{name}.{setting}", f"must be >= 1, got {getattr(self, setting)}")
        _check(self.batch_size >= 2, f"{name}.batch_size", f"must be >= 2 for in-batch negatives, got {self.batch_size}")
        _check(self.negatives_per_query >= 0, f"{name}.negatives_per_query",
               f"must be >= 0, got {self.negatives_per_query}")
        _choice(self.mining_retriever, f"{name}.mining_retriever", MINING_RETRIEVERS)
        _check_trainer(self)
        # re-mining feeds the mined hard negatives: with none used it was accepted and did nothing
        _check(not (self.refresh_negatives and not self.negatives_per_query and not self.corpus_negatives),
               f"{name}.refresh_negatives", f"True re-mines the hard negatives, and {name}.negatives_per_query=0 uses "
               "none; set negatives_per_query >= 1, or refresh_negatives=False")
        _check(not (self.refresh_negatives and self.mining_retriever == "bm25"), f"{name}.refresh_negatives",
               f"True re-mines from the model's own dense index, and {name}.mining_retriever='bm25' mines from BM25, "
               "whose lists do not change as the model trains: set refresh_negatives=False (BM25's negatives are "
               "mined once), or mining_retriever='dense'")
        _check(not (self.corpus_negatives and self.train_doc_tower), f"{name}.corpus_negatives",
               f"True needs {name}.train_doc_tower=False (a frozen, pre-encoded corpus)")
        _check(not (self.corpus_negatives and (self.negatives_per_query or self.refresh_negatives)),
               f"{name}.corpus_negatives", "True already scores every document, so set negatives_per_query=0 and "
               "refresh_negatives=False")
        _check(not self.shared or self.train_doc_tower, f"{name}.shared",
               "True ties the towers, so the document tower can't be frozen; set train_doc_tower=True or shared=False")


def _check_trainer(cfg: FinetuneConfig | RerankTrainConfig) -> None:
    """The settings ``search train`` and ``rerank train`` share, named by the config's class
    (``FinetuneConfig.lr: must be > 0, got 0``). The optimiser's were unchecked before: weight_decay=-1 failed in
    AdamW after the model was loaded ("Invalid weight_decay value"), and a negative grad_clip or head_lr was taken
    and stepped up the loss's gradient (clip_grad_norm_ scales by max_norm / norm; a group's lr is not checked by
    torch)."""
    name = type(cfg).__name__
    _check(cfg.lr > 0, f"{name}.lr", f"must be > 0, got {cfg.lr}")
    head_lr = getattr(cfg, "head_lr", None)
    _check(head_lr is None or head_lr > 0, f"{name}.head_lr", f"must be > 0, got {head_lr}")
    _check(0.0 <= cfg.warmup_frac < 1.0, f"{name}.warmup_frac", f"must be in [0, 1), got {cfg.warmup_frac}")
    _check(cfg.weight_decay >= 0, f"{name}.weight_decay", f"must be >= 0, got {cfg.weight_decay}")
    _check(cfg.grad_clip >= 0, f"{name}.grad_clip",
           f"must be >= 0 (the largest gradient norm; 0 = no clipping), got {cfg.grad_clip}")
    _check(0 < cfg.temperature <= MAX_TEMPERATURE, f"{name}.temperature",
           f"must be > 0 and at most {MAX_TEMPERATURE:,} (above it every scaled score is ~0 and training learns "
           f"nothing), got {cfg.temperature:g}")
    _check(cfg.seed >= 0, f"{name}.seed", f"must be an integer >= 0, got {cfg.seed}")
    _check(cfg.seed <= MAX_SEED, f"{name}.seed", f"must be at most 2**64 - 1 (the largest torch takes), got {cfg.seed}")
    _check(0.0 <= cfg.valid_frac < 1.0, f"{name}.valid_frac",
           f"must be in [0, 1) (0: no validation), got {cfg.valid_frac}")
    _check(cfg.patience >= 1, f"{name}.patience", f"must be >= 1, got {cfg.patience}")


@dataclass(frozen=True, kw_only=True)
class RerankTrainConfig:
    """Cross-encoder training (``twotower rerank train``, :func:`twotower.search.train_cross_encoder`)."""

    epochs: int = 1  #: passes over the training groups (--epochs)
    groups_per_step: int = 8  #: queries per optimiser step (--batch-size); each brings 1 positive + negatives
    negatives_per_query: int = 3  #: negatives per query group (--negatives)
    lr: float = 3e-5  #: learning rate of the encoder (--lr)
    #: learning rate of the fresh logit head and pooler
    head_lr: float = 5e-3  # fresh logit head + BERT pooler: MiniLM's pooler output is tiny (|x|~0.06), so
    # a head at the encoder's lr barely moves in a few hundred steps (loss stays at log(group size))
    warmup_frac: float = 0.1  #: linear warm-up over this share of steps, then linear decay, in [0, 1)
    weight_decay: float = 0.01  #: AdamW's weight decay, >= 0
    #: listwise softmax temperature over raw logits, in (0, 10,000]
    temperature: float = 1.0  # listwise softmax over raw logits: the head learns the scale itself
    grad_clip: float = 1.0  #: largest gradient norm; 0 = no clipping
    max_length: int = SearchConfig.max_length  #: word pieces of a query + passage pair (--max-length)
    freeze_layers: int = 0  #: bottom transformer layers (and the embeddings) kept frozen; cuts backward cost
    max_groups: int | None = None  #: train on at most this many (query, positive) groups per epoch
    seed: int = 0  #: seed of initialisation, group order and the held-out queries (--seed)
    #: share of the training queries held out to score reranking after each epoch against the first stage's order
    #: (rerank train: the --mining-retriever's lists, BM25's or dense; train_cross_encoder's own hold-out: BM25's),
    #: keeping the best epoch (--valid-frac), in [0, 1); 0 = off
    # held out grouped by relevant document. A loss 9.8% below chance said nothing of a cross-encoder that took
    # SciFact's test NDCG@10 from 0.8962 to 0.2055
    valid_frac: float = 0.0
    #: with valid_frac: stop after this many epochs without a better NDCG@10 (--patience)
    # as FinetuneConfig.patience
    patience: int = 3

    def __post_init__(self) -> None:
        # named with the class, as FinetuneConfig; `rerank train` replaces the field by its flag
        _check_types(self, "RerankTrainConfig.")
        name = "RerankTrainConfig"
        for setting in ("epochs", "groups_per_step", "negatives_per_query", "max_length"):
            _check(getattr(self, setting) >= 1, f"{name}.{setting}", f"must be >= 1, got {getattr(self, setting)}")
        _check(self.freeze_layers >= 0, f"{name}.freeze_layers", f"must be >= 0, got {self.freeze_layers}")
        _check(self.max_groups is None or self.max_groups >= 1, f"{name}.max_groups",
               f"must be >= 1 or None, got {self.max_groups}")
        _check_trainer(self)


# ---------------------------------------------------------------- (de)serialisation


def config_to_dict(cfg: Any) -> dict[str, Any]:
    """A JSON-able dict of a config dataclass (tuples become lists)."""
    return json.loads(json.dumps(dataclasses.asdict(cfg)))


def _coerce(value: Any, tp: Any, name: str) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if type(None) in args and (value is None or (isinstance(value, str) and value.lower() in ("none", "null") and str not in args)):
            return None
        errors = []
        for a in args:
            if a is type(None):
                continue
            try:
                return _coerce(value, a, name)
            except ConfigError as e:
                errors.append(str(e))
        raise ConfigError(errors[0] if errors else f"{name}: bad value {value!r}")
    if dataclasses.is_dataclass(tp):
        if isinstance(value, tp):
            return value
        if not isinstance(value, Mapping):
            # `model.item_item=false` is the natural guess for switching a section off: name its switch
            switch = next((f.name for f in dataclasses.fields(tp) if f.name == "enabled"), None)
            hint = f"; to switch it off, set {name}.{switch}=false" if switch and isinstance(value, bool) else ""
            if value is None:  # YAML's `train:` with every key under it commented out: "got None", a Python word
                raise ConfigError(f"{name}: expected a section (table), got null: a section with no settings under "
                                  "it; give it settings, or remove the line")
            raise ConfigError(f"{name}: expected a section (table), got {value!r}{hint}")
        return config_from_dict(tp, value, prefix=name)
    if origin is tuple:
        if value is None:  # was read as [None], then the string 'None': a column or a baseline called "None"
            raise ConfigError(f"{name}: expected a list, got null; write [] for none")
        if isinstance(value, str):
            value = [v for v in value.replace(",", " ").split() if v]
        if not isinstance(value, (list, tuple)):
            value = [value]
        elem = args[0] if args else Any
        return tuple(_coerce(v, elem, name) for v in value)
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "1", "yes", "on", "false", "0", "no", "off"):
            return value.lower() in ("true", "1", "yes", "on")
        # an override's `1` / `0` arrives as a JSON number: `model.user.use_id=1` was refused while "1" was taken
        if isinstance(value, numbers.Integral) and value in (0, 1):
            return bool(value)
        raise ConfigError(f"{name}: expected true/false (or yes/no, on/off, 1/0), got {value!r}")
    if tp is int:
        if isinstance(value, bool):
            raise ConfigError(f"{name}: expected an integer, got {value!r}")
        if isinstance(value, int):
            return value
        try:
            f = float(value)
        except (TypeError, ValueError, OverflowError):
            raise ConfigError(f"{name}: expected an integer, got {value!r}") from None
        if not f.is_integer():
            raise ConfigError(f"{name}: expected an integer, got {value!r}")
        return int(f)
    if tp is float:
        if isinstance(value, bool):
            raise ConfigError(f"{name}: expected a number, got {value!r}")
        try:
            f = float(value)
        except (TypeError, ValueError, OverflowError):
            raise ConfigError(f"{name}: expected a number, got {value!r}") from None
        if not math.isfinite(f):
            raise ConfigError(f"{name}: expected a finite number, got {value!r}")
        return f
    if tp is str:
        if value is None:  # str(None) made data.user_col=null a column called "None"
            raise ConfigError(f"{name}: expected a string, got null")
        if isinstance(value, (dict, list)):
            raise ConfigError(f"{name}: expected a string, got {value!r}")
        if isinstance(value, bool):  # str(True): `history_verb = true` explained "You already True ..."
            raise ConfigError(f"{name}: expected a string, got {json.dumps(value)}; write it in quotes")
        if isinstance(value, (int, float)):  # `title_col: 1e3` named a column '1000.0', YAML's `item_key: 0123` '83'
            raise ConfigError(f"{name}: expected a string, got the number {value!r}; write it in quotes, as the "
                              "file's parser reads a number in its own form (1e3 as 1000.0; in YAML, 0123 as 83)")
        return str(value)
    return value


def config_from_dict(cls: type[T], data: Mapping[str, Any], *, prefix: str = "") -> T:
    """Build ``cls`` from a nested mapping; unknown keys are errors with suggestions."""
    hints = _hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if key not in fields:
            close = difflib.get_close_matches(str(key), list(fields), n=3)
            hint = _near_names(close, prefix) if close else f"; valid keys: {', '.join(fields)}"
            raise ConfigError(f"unknown setting {name!r}{hint}")
        f = fields[key]
        if isinstance(value, Mapping) and dataclasses.is_dataclass(hints[key]):
            # a partial section keeps the parent's defaults for that section
            # (e.g. the user tower's history pooling), not the bare class defaults
            default = _field_default(f)
            if default is not None:
                merged = config_to_dict(default)
                _deep_update(merged, value)
                value = merged
        kwargs[key] = _coerce(value, hints[key], name)
    try:
        return cls(**kwargs)
    except TypeError as e:  # pragma: no cover - dataclass signature mismatch
        raise ConfigError(f"{prefix or cls.__name__}: {e}") from e
    except ConfigError as e:
        # validators name a field by its class ("tower.history"); the user wrote "model.user.history"
        m = re.match(r"([A-Za-z_]+)\.([A-Za-z_]+)(: .*)", str(e), re.S)
        if prefix and m and m.group(2) in fields:
            raise ConfigError(f"{prefix}.{m.group(2)}{m.group(3)}") from e
        raise


def _field_default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return f.default_factory()  # type: ignore[misc]
    return None


def _parse_scalar(text: str) -> Any:
    """Parse an override value: JSON when it parses (numbers, lists, true), else a string."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        low = text.lower()
        if low in ("true", "false"):
            return low == "true"
        if low == "null":
            return None
        inner = text.strip()[1:-1]
        if text.strip()[:1] == "[" and text.strip()[-1:] == "]" and not any(c in inner for c in "[]{}"):
            # `eval.baselines=[popularity,ease]` (no JSON quotes, as a shell strips them) was the one string
            # '[popularity,ease]', refused as no baseline; each bare word is an item, read as one value is
            return [_parse_scalar(w.strip().strip("'\"")) for w in inner.split(",") if w.strip()]
        # "none" stays a string: it is a legitimate choice (model.user.history=none);
        # optional numeric settings turn it into None in _coerce
        return text


def apply_overrides(data: dict[str, Any], overrides: list[str], label: str = "overrides") -> dict[str, Any]:
    """Apply ``section.key=value`` overrides to a nested dict (in place, returned); ``label`` is where errors say
    they were written (:func:`load_config`'s ``overrides_label``: the CLI's "command line")."""
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"{label}: {item!r} must look like section.key=value (e.g. train.epochs=5)")
        key, raw = item.split("=", 1)
        parts = key.strip().split(".")
        if any(not p for p in parts):
            raise ConfigError(f"{label}: {item!r}: empty name part")
        node = data
        for p in parts[:-1]:
            nxt = node.setdefault(p, {})
            if not isinstance(nxt, dict):
                raise ConfigError(f"{label}: {item!r}: {p!r} is a value, not a section")
            node = nxt
        value = _parse_scalar(raw.strip())
        if isinstance(value, (bool, int, float)) and _text_setting(parts):
            value = raw.strip()  # `data.title_col=1e3` named a column '1000.0', `data.history_verb=true` 'True'
        node[parts[-1]] = value
    return data


def _text_setting(parts: list[str]) -> bool:
    """Whether ``parts`` (``["data", "title_col"]``) name a setting that takes text only (``str`` or ``str | None``):
    an override's value for it is the text as typed, not the number or boolean JSON would read from it."""
    cls: Any = RunConfig
    for p in parts[:-1]:
        cls = _hints(cls).get(p)
        if cls is None or not dataclasses.is_dataclass(cls):
            return False
    tp = _hints(cls).get(parts[-1])
    return tp is not None and str in _plain_types(tp) and _plain_types(tp) <= {str, None}


def refuse_repeated_overrides(overrides: list[str], label: str = "command line") -> None:
    """One setting overridden twice with different values, as a file's key written twice is refused: on a command
    line `train.epochs=3 ... train.epochs=4` trained 4 epochs without a word about the 3. (load_config's own
    list keeps the later value: scripts add overrides on top of a recipe's.)"""
    seen: dict[str, tuple[str, Any]] = {}
    for item in overrides:
        if "=" not in item:
            continue  # apply_overrides names the malformed one
        key = item.split("=", 1)[0].strip()
        value = _parse_scalar(item.split("=", 1)[1].strip())
        if key in seen and seen[key][1] != value:
            raise ConfigError(f"{label}: {key} is given twice with different values ({seen[key][0]} and "
                              f"{item.strip()}); give it once")
        seen.setdefault(key, (item.strip(), value))


def _load_yaml_unique(text: str) -> Any:
    """``yaml.safe_load`` that refuses a key given twice in one mapping (PyYAML keeps the last)."""
    import yaml

    class Loader(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):  # type: ignore[no-untyped-def]
            seen: set[Any] = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                if key in seen:
                    raise DuplicateKey(f"key {key!r} appears twice in one mapping (line {key_node.start_mark.line + 1})",
                                       key)
                seen.add(key)
            return super().construct_mapping(node, deep=deep)

    # YAML 1.1 reads `lr: 1e-3` (no dot) and `5.0e2` (a dot, an unsigned exponent) as text, which a quoted
    # number's refusal would then refuse: numbers as TOML and JSON read them
    Loader.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"), list("-+0123456789."))
    loader = Loader(text)  # what yaml.load does, with a SafeLoader subclass: no arbitrary objects
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def _toml_twice_hint(error: str, text: str) -> str:
    """What tomllib's "Cannot overwrite a value (at line 3, ...)" means, in the words a JSON or YAML file's key given
    twice is refused with: the key and its line (tomllib names neither the key nor the fix)."""
    m = re.match(r"Cannot (?:overwrite a value|declare (.+) twice) \(at line (\d+),", error)
    if not m:
        return ""
    line = int(m.group(2))
    lines = text.splitlines()
    said = lines[line - 1].strip() if 0 < line <= len(lines) else ""
    if m.group(1) and said.startswith("["):
        return f"; the table {said} is given twice (the second time on line {line}); write its settings under one"
    key = said.split("=", 1)[0].strip() if "=" in said else said
    return f"; {key!r} is given twice (the second time on line {line}); give each setting once" if key else ""


def read_config_file(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"config file {path} does not exist")
    try:
        text = path.read_text(encoding="utf-8-sig")  # a byte-order mark (Notepad, PowerShell) is skipped, as in data files
    except UnicodeDecodeError as e:
        raise ConfigError(f"config file {path}: not UTF-8 text ({e}); re-save it as UTF-8") from e
    except OSError as e:
        raise ConfigError(f"config file {path}: cannot read it ({e.strerror or e})") from e
    if not text.strip():  # TOML and YAML read an empty file as no settings: a truncated save trained on defaults
        raise ConfigError(f"config file {path} is empty; write settings in it, or leave --config out for the defaults")
    try:
        if path.suffix.lower() == ".toml":
            try:
                import tomllib
            except ModuleNotFoundError:  # Python 3.10
                import tomli as tomllib  # type: ignore[no-redef]
            data = tomllib.loads(text)
        elif path.suffix.lower() in (".yaml", ".yml"):
            data = _load_yaml_unique(text) or {}
        elif path.suffix.lower() == ".json":
            data = loads_unique(text)
        else:
            raise ConfigError(f"config file {path}: use .toml, .yaml/.yml or .json")
    except ConfigError:
        raise
    except DuplicateKey as e:
        raise ConfigError(f"config file {path}: {e}; give each setting once (the later value would silently "
                          "replace the earlier)") from e
    except Exception as e:  # parser errors carry line numbers; keep them
        # PyYAML says "found character '\t' that cannot start any token": the fix is never named
        tabbed = [i for i, line in enumerate(text.splitlines(), 1) if "\t" in line[:len(line) - len(line.lstrip())]]
        hint = (f"; YAML indents with spaces, not tabs (a tab starts line {tabbed[0]})"
                if path.suffix.lower() in (".yaml", ".yml") and tabbed else _toml_twice_hint(str(e), text))
        raise ConfigError(f"config file {path}: cannot parse ({e}){hint}") from e
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path}: top level must be a table/mapping")
    if not data:  # comments alone, `{}` or `---`: what the empty file is refused for, in another spelling
        raise ConfigError(f"config file {path} holds no settings; write settings in it, or leave --config out for "
                          "the defaults")
    return data


def _sections_holding(cls: type, key: str, prefix: str = "") -> list[str]:
    """The dotted names of ``key`` in the sections of ``cls`` (``train.epochs``; ``model.user.hidden`` and
    ``model.item.hidden``)."""
    found = []
    for name, hint in _hints(cls).items():
        if dataclasses.is_dataclass(hint):
            found += _sections_holding(hint, key, f"{prefix}{name}.")
        elif prefix and name == key:
            found.append(f"{prefix}{name}")
    return found


def section_names(cls: type | None = None, prefix: str = "") -> list[str]:
    """The dotted names of every section of ``cls`` (RunConfig: data, model, model.user, model.item, ...), in
    declaration order, as ``twotower train --help`` lists them."""
    found = []
    for name, hint in _hints(cls or RunConfig).items():
        if dataclasses.is_dataclass(hint):
            found += [f"{prefix}{name}", *section_names(hint, f"{prefix}{name}.")]
    return found


def check_known_settings(cls: type, data: Mapping[str, Any], source: str, *, prefix: str = "",
                         root: type | None = None) -> None:
    """Refuse a setting name ``cls`` does not have, saying where it was written.

    ``source`` is what the user typed it in ("config file c.toml", "command line", "overrides"): a typo in a
    file otherwise reads exactly like one in an override and the user looks in the wrong place.
    Only names are checked here; values are checked when the merged config is built.
    """
    unknown = _unknown_settings(cls, data, prefix, root or cls)
    if len(unknown) == 1:
        name, hint = unknown[0]
        raise ConfigError(f"{source}: unknown setting {name!r}; {hint}")
    if unknown:  # every one at once: `batchsize` and `epoch` in one file took two runs to find
        said = [f"{name!r} ({hint})" for name, hint in unknown]
        raise ConfigError(f"{source}: unknown settings {', '.join(said[:-1])} and {said[-1]}")


def _unknown_settings(cls: type, data: Mapping[str, Any], prefix: str, root: type) -> list[tuple[str, str]]:
    """The dotted names in ``data`` that ``cls`` does not have, each with what was likely meant (or its valid keys)."""
    hints = _hints(cls)
    fields = [f.name for f in dataclasses.fields(cls)]
    found = []
    for key, value in data.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if key not in fields:
            close = difflib.get_close_matches(str(key), fields, n=3)
            hint = _near_names(close, prefix).removeprefix("; ") if close else f"valid keys: {', '.join(fields)}"
            homes = _sections_holding(root, str(key)) if not close else []
            if homes and not prefix:  # `epochs = 3` above any [train] header, or `epochs=3` on the command line
                hint = (f"settings sit in a section: did you mean {' or '.join(homes)}? (valid sections: "
                        f"{', '.join(fields)})")
            elif homes:  # `temperature` under [train] listed train's keys and never said loss.temperature
                hint = f"did you mean {' or '.join(homes)}? (valid keys of {prefix}: {', '.join(fields)})"
            found.append((name, hint))
        elif isinstance(value, Mapping) and dataclasses.is_dataclass(hints[key]):
            found += _unknown_settings(hints[key], value, name, root)
    return found


def _near_names(close: list[str], prefix: str) -> str:
    """``; did you mean train.epochs?``: the near settings by their dotted names, as they are typed (``did you
    mean epochs?`` left the section to the reader)."""
    return f"; did you mean {', '.join(f'{prefix}.{c}' if prefix else c for c in close)}?"


def _plain_types(tp: Any) -> set[Any]:
    """The leaf types a setting's annotation allows (``int | None`` -> {int, None}; ``tuple[int, ...]`` -> {int})."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return set().union(*(_plain_types(a) for a in typing.get_args(tp)))
    if typing.get_origin(tp) is tuple:
        return set().union(*(_plain_types(a) for a in typing.get_args(tp) if a is not Ellipsis))
    return {None if tp is type(None) else tp}


def refuse_quoted_values(cls: type, data: Mapping[str, Any], source: str, *, prefix: str = "") -> None:
    """A file's quoted number or boolean where the setting takes no text: `epochs = "5"` in a TOML file trained 5
    epochs as if unquoted, though the file's own format says it is text (overrides are typed text, so they
    convert). "none" / "null" stay taken for an optional setting: TOML has no null."""
    hints = _hints(cls)
    for key, value in data.items():
        tp = hints.get(key)
        if tp is None:
            continue
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and dataclasses.is_dataclass(tp):
            refuse_quoted_values(tp, value, source, prefix=f"{name}.")
            continue
        allowed = _plain_types(tp)
        if str in allowed or not allowed & {int, float, bool}:
            continue
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, str) and not (None in allowed and v.lower() in ("none", "null")):
                kind = "true/false" if bool in allowed else "a number"
                raise ConfigError(f"{source}: {name}: expected {kind}, got the text {v!r}; write it without quotes")


def _optional(tp: Any) -> bool:
    """``str | None``, ``int | None``: a setting null leaves unset (not a list whose elements may be null)."""
    return typing.get_origin(tp) in (typing.Union, types.UnionType) and type(None) in typing.get_args(tp)


def toml_nulls(cls: type, data: dict[str, Any]) -> None:
    """A TOML file's ``"none"`` (or ``"null"``) for an optional setting is null, in place: TOML has no null.

    Optional numbers already read it so, but an optional text setting kept the text: `timestamp_col = "none"` read
    the data (seconds) and then looked for a column called 'none', so a TOML file could not turn the time or
    rating column off. YAML and JSON write null; an override's `data.timestamp_col=null` is null and its `=none`
    stays the text."""
    hints = _hints(cls)
    for key, value in data.items():
        tp = hints.get(key)
        if tp is None:
            continue
        if isinstance(value, dict) and dataclasses.is_dataclass(tp):
            toml_nulls(tp, value)
        elif isinstance(value, str) and value.lower() in ("none", "null") and _optional(tp):
            data[key] = None


#: load_config's config files: one path, or several (``--config base.toml --config ci.toml``) merged in order
ConfigPaths = typing.Union[str, os.PathLike, typing.Sequence[typing.Union[str, os.PathLike]], None]


def read_config_files(path: ConfigPaths) -> list[tuple[str | os.PathLike[str], dict[str, Any]]]:
    """Each config file of ``path`` (one path, several, or None) with its settings, in order, each checked on its
    own (names, quoted numbers; TOML's "none" read as null) so that an error names the file that holds the key.
    A run's own ``config.json`` reads as the run was trained (the settings its version lacked at that version's
    values: pipeline/saved_config.py), not with today's defaults."""
    # (imported here: it imports this module)
    from twotower.pipeline.saved_config import check_run_settings, is_run_record, run_record_as_trained

    paths = [] if path is None else [path] if isinstance(path, (str, os.PathLike)) else list(path)
    files = []
    for one in paths:
        settings = read_config_file(one)
        if is_run_record(one):  # nobody typed a run's settings: one unknown here is likely a newer version's
            check_run_settings(settings, f"config file {one}")
        else:
            check_known_settings(RunConfig, settings, f"config file {one}")
        refuse_quoted_values(RunConfig, settings, f"config file {one}")
        if Path(one).suffix.lower() == ".toml":
            toml_nulls(RunConfig, settings)
        files.append((one, run_record_as_trained(one, settings)))
    return files


def merged_settings(files: list[tuple[Any, dict[str, Any]]]) -> dict[str, Any]:
    """The settings of :func:`read_config_files`' files merged in order: a later file's key replaces an earlier
    one's, as an override replaces a file's (a base recipe, then a CI file's changes); the files are not changed."""
    merged: dict[str, Any] = {}
    for _, settings in files:
        _deep_update(merged, copy.deepcopy(settings))
    return merged


def _file_setting(files: list[tuple[Any, dict[str, Any]]], name: str) -> Any:
    """The last of ``files`` that sets the dotted ``name`` (the one whose value is read), or None."""
    return next((one for one, settings in reversed(files) if _has_key(settings, name)), None)


def load_config(path: ConfigPaths = None, overrides: list[str] | None = None,
                base: dict[str, Any] | RunConfig | None = None, *, overrides_label: str = "overrides") -> RunConfig:
    """Resolve a RunConfig from optional config files (one path, or several merged in order: a later file's key
    replaces an earlier one's), an optional base (a dict, or a RunConfig such as a loaded run's ``run.config``) and
    overrides, which replace them all. ``overrides_label`` is where errors say the overrides were written (the CLI
    passes "command line")."""
    if isinstance(path, (Mapping, RunConfig)):  # was a TypeError from pathlib: "expected str, bytes or os.PathLike"
        raise ConfigError(f"load_config's first argument is a config file's path, got a {type(path).__name__}; pass "
                          "settings as load_config(base=...), e.g. load_config(base={'train': {'epochs': 5}})")
    if isinstance(base, RunConfig):  # was json.dumps'd as is: "Object of type RunConfig is not JSON serializable"
        base = config_to_dict(base)
    if isinstance(overrides, (str, Mapping)):  # a string was read letter by letter: "override 't' must look like ..."
        example = repr([overrides]) if isinstance(overrides, str) else "load_config(base={'train': {'epochs': 5}})"
        raise ConfigError(f"overrides must be a list of 'section.key=value' strings, got a {type(overrides).__name__}; "
                          f"write {example}" + ("" if isinstance(overrides, str) else " for a nested dict"))
    data: dict[str, Any] = json.loads(json.dumps(base)) if base else {}
    files = read_config_files(path)
    from_file = merged_settings(files)
    _deep_update(data, from_file)
    given = apply_overrides({}, list(overrides or []), overrides_label)
    if overrides:
        check_known_settings(RunConfig, given, overrides_label)
    apply_overrides(data, list(overrides or []))
    _expand_home(data.get("data"))
    try:
        config = config_from_dict(RunConfig, data)
    except ConfigError as e:
        # a bad value written in the file: say which file, as unknown keys already do; a check of two settings
        # ("model.user.out_dim: 64 must equal model.item.out_dim 32") counts the one the file gave too
        names = [str(e).split(":", 1)[0], *re.findall(r"\b[a-z_]+(?:\.[a-z_]+)+\b", str(e).split(":", 1)[-1])]
        in_file = list(dict.fromkeys(n for n in names if _has_key(from_file, n) and not _has_key(given, n)))
        in_overrides = list(dict.fromkeys(n for n in names if _has_key(given, n)))
        holders = list(dict.fromkeys(_file_setting(files, n) for n in in_file))
        if in_file and not in_overrides and len(holders) == 1:
            raise ConfigError(f"config file {holders[0]}: {e}{_yaml_syntax_hint(holders[0], str(e))}") from e
        if in_overrides and not in_file:
            # said where it was typed, as a file's bad value names the file: `train.lr=abc` on a long command line
            # read "train.lr: expected a number" and the user searched their config file for it
            raise ConfigError(f"{overrides_label}: {_typed_overrides(overrides or [], in_overrides)}: {e}") from e
        if in_file:
            # `--config examples/sasrec.toml model.user.history=gru`: the clash was of a file's value and an
            # override's, and the error named neither place, so the user looked for seq_positions on their line
            where = "; ".join([*(f"{n}: config file {_file_setting(files, n)}" for n in in_file),
                               *(f"{n}: {overrides_label}" for n in in_overrides)])
            raise ConfigError(f"{e} [{where}]") from e
        raise
    # which model.* keys the file and the overrides set (not the base's: a resumed run's config.json names every
    # key), for the start-up warnings of sizes a tower does not read (models/unread.py); kept on the ModelConfig,
    # which a dataclasses.replace of the RunConfig (the CLI's resolved train.threads) carries over
    object.__setattr__(config.model, _GIVEN, frozenset(k for k in (*_leaf_keys(from_file), *_leaf_keys(given))
                                                       if k.startswith("model.")))
    # where each data.* setting was given, for the messages that name one (`data.path (x.csv, config file c.toml)`):
    # they named the flag that sets it, which a config file's or an override's user never typed
    origins = {n: f"config file {_file_setting(files, n)}" for n in _leaf_keys(from_file) if n.startswith("data.")}
    note_origins(config.data, {**origins, **{n: "override" for n in _leaf_keys(given) if n.startswith("data.")}})
    return config


#: the attribute of a ModelConfig that load_config resolved, holding the model.* keys its sources set
_GIVEN = "_settings_given"


#: the attribute of a DataConfig that load_config resolved, holding where each data.* setting it was given came from
_ORIGINS = "_origins"


def setting_origins(data: DataConfig) -> dict[str, str]:
    """Where each ``data.*`` setting :func:`load_config` was given came from, by its dotted name: ``"config file
    c.toml"``, ``"override"``, or the flag a command noted (:func:`note_origins`: ``"--train"``); empty for a
    DataConfig built in Python, and for one a ``dataclasses.replace`` made."""
    return dict(getattr(data, _ORIGINS, {}))


def note_origins(data: DataConfig, origins: Mapping[str, str]) -> None:
    """Record where ``data``'s settings were given (``{"data.train": "--train"}``), over what is recorded already."""
    object.__setattr__(data, _ORIGINS, {**setting_origins(data), **origins})


def located(message: str, origins: Mapping[str, str]) -> str:
    """A refusal naming settings (``data.split='time' needs data.valid_start ...``) with where they were given, in
    load_config's words: ``config file c.toml: ...`` when one file gave every one of them that was given, else
    ``... [data.valid_start: override; data.split: config file c.toml]`` when a file gave one; as it is when none
    came from a file (the command line's own settings: the user typed them). ``origins``: :func:`setting_origins`."""
    named = {n: origins[n] for n in re.findall(r"\b[a-z_]+(?:\.[a-z_]+)+\b", message) if n in origins}
    files = {where for where in named.values() if where.startswith("config file ")}
    if not files:
        return message
    if len(set(named.values())) == 1:
        return f"{next(iter(files))}: {message}"
    return f"{message} [{'; '.join(f'{n}: {where}' for n, where in named.items())}]"


def settings_given(model: ModelConfig) -> frozenset[str]:
    """The dotted ``model.*`` keys that a config file or an override set when :func:`load_config` resolved
    ``model`` (``"model.item.history_len"``); empty for a ModelConfig built in Python, whose towers may share one
    dict of sizes (USER_TOWER_ONLY)."""
    return getattr(model, _GIVEN, frozenset())


def _leaf_keys(tree: Mapping[str, Any], prefix: str = "") -> list[str]:
    """``{"model": {"item": {"history_len": 5}}}`` -> ``["model.item.history_len"]``."""
    out: list[str] = []
    for key, value in tree.items():
        name = f"{prefix}{key}"
        out.extend(_leaf_keys(value, f"{name}.") if isinstance(value, Mapping) else [name])
    return out


def _typed_overrides(overrides: list[str], names: list[str]) -> str:
    """The overrides that set ``names`` as they were typed (``'train.lr=abc'``), the last of a name repeated (the
    one applied); an override of a whole section (``model.user={"hidden": ["a"]}``) is the one for its settings."""
    typed: dict[str, str] = {}
    for item in overrides:
        key = item.split("=", 1)[0].strip()
        if any(n == key or n.startswith(f"{key}.") for n in names):
            typed[key] = repr(item.strip())
    return ", ".join(typed.values()) or ", ".join(names)


def _yaml_syntax_hint(path: str | os.PathLike[str] | None, message: str) -> str:
    """Why a YAML file's text value came out empty or null, where YAML read the value as its own syntax:
    `multi_separator: |` is an empty block, `multi_separator: #` a comment (the key then null)."""
    if path is None or Path(path).suffix.lower() not in (".yaml", ".yml"):
        return ""
    if ("got null" not in message and "must be a non-empty string" not in message) or "expected a section" in message:
        return ""
    return ("; in YAML a value starting with #, |, >, & or * is read as syntax (a comment, a block, an anchor), and a "
            "key with nothing after it is null: write such a value in quotes, e.g. '|'")


def _expand_home(section: Any) -> None:
    """``~/data/train.csv`` in a config file (or a quoted override) names the home folder, as it would on a
    command line; no shell expands it there, and it was read as a folder literally named ``~``."""
    if not isinstance(section, dict):
        return
    for name in DATA_FILE_SETTINGS:
        value = section.get(name)
        if isinstance(value, str) and value.startswith("~"):
            section[name] = os.path.expanduser(value)


def _has_key(data: Mapping[str, Any], dotted: str) -> bool:
    node: Any = data
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return False
        node = node[part]
    return True


def _deep_update(dst: dict[str, Any], src: Mapping[str, Any]) -> None:
    for k, v in src.items():
        if isinstance(v, Mapping) and isinstance(dst.get(k), dict):
            _deep_update(dst[k], v)
        else:
            dst[k] = v
