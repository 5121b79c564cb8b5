"""Interactions, vocabularies, splits, feature tables and MovieLens-100K."""
from twotower.data.features import EncodedFeatures, FeatureEncoder, FeatureSpec, read_feature_table
from twotower.data.interactions import EncodedInteractions, Histories, encode_interactions, to_csr
from twotower.data.movielens import (
    MOVIELENS_GENRES,
    MOVIELENS_ITEM_FEATURES,
    MOVIELENS_USER_FEATURES,
    MovieLens,
    default_movielens_dir,
    fetch_movielens_100k,
    load_movielens_100k,
)
from twotower.data.readers import CANONICAL_COLUMNS, ColumnMap, read_interactions, read_table
from twotower.data.splits import (
    Split,
    global_time_split,
    leave_last_n_out,
    random_split,
    split_report,
    temporal_split,
)
from twotower.data.vocab import Vocabulary

__all__ = [
    "CANONICAL_COLUMNS",
    "ColumnMap",
    "read_table",
    "read_interactions",
    "Vocabulary",
    "EncodedInteractions",
    "encode_interactions",
    "to_csr",
    "Histories",
    "Split",
    "temporal_split",
    "leave_last_n_out",
    "global_time_split",
    "random_split",
    "split_report",
    "FeatureSpec",
    "read_feature_table",
    "EncodedFeatures",
    "FeatureEncoder",
    "MovieLens",
    "load_movielens_100k",
    "fetch_movielens_100k",
    "default_movielens_dir",
    "MOVIELENS_GENRES",
    "MOVIELENS_ITEM_FEATURES",
    "MOVIELENS_USER_FEATURES",
]
