"""Vocabularies, encoded splits, feature arrays and sequences for one run."""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from twotower.data.features import FeatureEncoder
from twotower.data.interactions import EncodedInteractions, encode_interactions, to_csr
from twotower.data.vocab import Vocabulary
from twotower.errors import DataError
from twotower.models.feature_block import FeatureArrays
from twotower.models.history import UserSequences
from twotower.pipeline.sources import Sources
from twotower.utils.wording import plural

__all__ = ["Prepared", "prepare"]

log = logging.getLogger(__name__)


@dataclass
class Prepared:
    """A run's data in internal rows.

    The user vocabulary holds every training user (and feature-table users);
    the item vocabulary every training item plus the item table's items, so
    items seen only in evaluation but described by features stay rankable.
    Ids outside the vocabularies are counted in ``report``, never remapped.
    """

    user_vocab: Vocabulary
    item_vocab: Vocabulary
    train: EncodedInteractions
    valid: EncodedInteractions | None
    test: EncodedInteractions | None
    train_seqs: UserSequences
    item_features: FeatureArrays | None
    user_features: FeatureArrays | None
    item_encoder: FeatureEncoder | None
    user_encoder: FeatureEncoder | None
    item_meta: pd.DataFrame | None
    sources: Sources
    report: dict[str, Any] = field(default_factory=dict)

    @property
    def n_users(self) -> int:
        return len(self.user_vocab)

    @property
    def n_items(self) -> int:
        return len(self.item_vocab)

    def matrix(self, part: str) -> sp.csr_matrix | None:
        enc = {"train": self.train, "valid": self.valid, "test": self.test}[part]
        return None if enc is None else to_csr(enc)

    def item_counts(self) -> np.ndarray:
        """Distinct training users of each item ``[I]``: the popularity of ``MeanPop@k`` and of the Popularity
        baseline (a user's repeats of an item count once, as `twotower evaluate` counts them)."""
        return np.asarray(self.matrix("train").sum(axis=0), dtype=np.float64).ravel()


def prepare(src: Sources) -> Prepared:
    train = src.train
    if len(train) == 0:
        raise DataError("the training split is empty; check the split settings or the train file")
    # the distinct ids first (in C): set() over the column iterated its 1M Arrow strings one by one (1.9 s on ML-1M)
    user_ids = set(train["user_id"].unique())
    item_ids = set(train["item_id"].unique())
    # the entities training reads: only their categorical values get embeddings (FeatureEncoder.fit's trained)
    trained_users, trained_items = frozenset(user_ids), frozenset(item_ids)
    if src.items is not None:
        table = set(src.items["item_id"].astype(str))
        _warn_if_table_keys_differ(item_ids, table, "item", "--items")
        item_ids |= table
    if src.users is not None:
        table = set(src.users["user_id"].astype(str))
        _warn_if_table_keys_differ(user_ids, table, "user", "--users")
        user_ids |= table
    user_vocab = Vocabulary.from_ids(user_ids, kind="user")
    item_vocab = Vocabulary.from_ids(item_ids, kind="item")
    report: dict[str, Any] = dict(src.report)
    enc_train, r = encode_interactions(train, user_vocab, item_vocab, name="train")
    report["train_encoding"] = r
    parts: dict[str, EncodedInteractions | None] = {}
    for name, df in (("valid", src.valid), ("test", src.test)):
        if df is None:
            parts[name] = None
            continue
        enc, r = encode_interactions(df, user_vocab, item_vocab, name=name)
        parts[name] = enc
        report[f"{name}_encoding"] = r  # encode_interactions has warned about the cold rows it dropped
    seqs = UserSequences.from_arrays(enc_train.users, enc_train.items, enc_train.timestamps, len(user_vocab))
    item_features = user_features = None
    item_encoder = user_encoder = None
    if src.items is not None and src.item_spec is not None:
        item_encoder = FeatureEncoder(src.item_spec)
        item_encoder.fit(src.items, item_vocab, trained=trained_items)
        item_features = FeatureArrays.from_encoded(item_encoder.transform(src.items, item_vocab))
    if src.users is not None and src.user_spec is not None:
        user_encoder = FeatureEncoder(src.user_spec)
        user_encoder.fit(src.users, user_vocab, trained=trained_users)
        user_features = FeatureArrays.from_encoded(user_encoder.transform(src.users, user_vocab))
    item_meta = _item_meta(src, item_vocab)
    cold_items = int((np.bincount(enc_train.items, minlength=len(item_vocab)) == 0).sum())
    # users of the user table with no interaction are known users too (a list from their features and an empty
    # history): counted, as the items are, since "943 users" read as 943 trained on when 300 were
    cold_users = int((np.bincount(enc_train.users, minlength=len(user_vocab)) == 0).sum())
    report["vocab"] = {"users": len(user_vocab), "items": len(item_vocab), "items_without_training_interactions": cold_items,
                       "users_without_training_interactions": cold_users}
    log.info("vocabularies: %d users (%d without training interactions), %d items (%d without training interactions)",
             len(user_vocab), cold_users, len(item_vocab), cold_items)
    return Prepared(
        user_vocab, item_vocab, enc_train, parts["valid"], parts["test"], seqs, item_features, user_features,
        item_encoder, user_encoder, item_meta, src, report,
    )


def _id_key(x: str) -> str:
    """An id as people tend to mean it: case, surrounding spaces, leading zeros and a ``.0`` ignored ("007" ~ "7",
    and "12.0" ~ "12": pandas writes an integer id column holding a blank as floats)."""
    x = x.strip().lower()
    if re.fullmatch(r"\d+\.0*", x):
        x = x.split(".", 1)[0]
    return x.lstrip("0") or "0" if x.isdigit() else x


def _warn_if_table_keys_differ(interaction_ids: set[str], table_ids: set[str], kind: str, flag: str) -> None:
    """Say so when a feature table's keys are written differently from the interactions' ids.

    Every table key joins the catalogue (an item may be known before anyone interacted with it), so keys
    that only differ in spelling ("001" vs "1") add a second, featureless copy of each entity instead of
    failing; most such mistakes show as ids that match once case, spaces and leading zeros are ignored.
    """
    missing = interaction_ids - table_ids
    unused = table_ids - interaction_ids
    if not missing or not unused:
        return
    by_key = {}
    for t in unused:
        by_key.setdefault(_id_key(t), t)
    pairs = [(i, by_key[_id_key(i)]) for i in sorted(missing) if _id_key(i) in by_key]
    if pairs:
        shown = ", ".join(f"{a!r} vs {b!r}" for a, b in pairs[:3])
        log.warning("%s table (%s): %s of the interactions %s no row in it but %s a row once case, "
                    "spaces, leading zeros and a trailing .0 are ignored (e.g. %s); they are different ids, so each "
                    "such %s is in the catalogue twice and the interacted copy has no features: write the ids the "
                    "same way in both files", kind, flag, plural(len(pairs), f"{kind} id"),
                    "has" if len(pairs) == 1 else "have", "matches" if len(pairs) == 1 else "match", shown, kind)
    elif len(missing) > len(interaction_ids) // 2:
        log.warning("%s table (%s): %s of %s of the interactions %s no row in it (e.g. %r), and %s of its "
                    "rows %s no interaction; are the ids the same column in both?", kind, flag, f"{len(missing):,}",
                    plural(len(interaction_ids), f"{kind} id"), "has" if len(missing) == 1 else "have",
                    sorted(missing)[0], f"{len(unused):,}", "matches" if len(unused) == 1 else "match")


#: Keys the answers give an item beside its metadata (recommend / POST /recommend: score, rank, explanation;
#: GET /items: in_index, warnings; explain's history entries: contribution, age; GET /users' history entries:
#: timestamp): a metadata column of that name was overwritten in every answer without a word (or, as `warnings`,
#: broke the answer's schema), so it is shown as ``item_<name>`` instead.
RESERVED_ITEM_KEYS = ("score", "rank", "explanation", "in_index", "contribution", "age", "warnings", "timestamp")


def _item_meta(src: Sources, vocab: Vocabulary) -> pd.DataFrame | None:
    """Item metadata shown to people, aligned with the vocabulary (JSON-friendly values)."""
    if src.items is None:
        return None
    meta = src.items.copy()
    renamed = {}
    for col in RESERVED_ITEM_KEYS:
        if col in meta.columns:
            new = "item_" + col
            while new in meta.columns or new in renamed.values():
                new = "item_" + new
            renamed[col] = new
    if renamed:  # features read the table itself (by the names given), so only the metadata shown is renamed
        meta = meta.rename(columns=renamed)
        log.warning("item table: %s would be overwritten in answers by their own %s; the run shows %s as %s "
                    "(in recommend, explain, the service and its filters)",
                    ", ".join(repr(c) for c in renamed), "key" if len(renamed) == 1 else "keys",
                    "it" if len(renamed) == 1 else "them", ", ".join(repr(v) for v in renamed.values()))
    meta["item_id"] = meta["item_id"].astype(str)
    meta = meta.drop_duplicates("item_id").set_index("item_id").reindex(vocab.ids)
    meta.index.name = "item_id"
    return meta.reset_index()
