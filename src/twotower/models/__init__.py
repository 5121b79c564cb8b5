"""Towers and the two-tower model."""
from twotower.models.feature_block import FeatureArrays, FeatureBlock
from twotower.models.history import UserSequences, pad_histories, windows_before
from twotower.models.mlp import MLP
from twotower.models.towers import HeadOutputs, ItemTower, UserTower
from twotower.models.two_tower import TwoTowerModel

__all__ = [
    "FeatureArrays",
    "FeatureBlock",
    "HeadOutputs",
    "ItemTower",
    "MLP",
    "TwoTowerModel",
    "UserSequences",
    "UserTower",
    "pad_histories",
    "windows_before",
]
