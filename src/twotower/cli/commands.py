"""The old home of the train, evaluate, recommend and data subcommands, kept so that imports from it still work.

They live in train_cmd, evaluate_cmd, recommend_cmd and data_cmd, the helpers they share in flags, printing and
paths; new code imports from those. Patching a name here changes nothing the commands call.
"""
from __future__ import annotations

from twotower.cli.data_cmd import SPLIT_OVERRIDES, cmd_data_fetch, cmd_data_split
from twotower.cli.evaluate_cmd import cmd_evaluate, print_eval_table, rows_to_csv, users_line
from twotower.cli.flags import _threads, flag_named, parse_user_features
from twotower.cli.printing import _print_items, printable
from twotower.cli.recommend_cmd import cmd_recommend
from twotower.cli.train_cmd import (
    TRAIN_TABLE_KS,
    Terminated,
    cmd_train,
    interrupted_training,
    item_item_summary,
    resolve_train_config,
    terminate_as_interrupt,
    train_summary,
)

__all__ = ["SPLIT_OVERRIDES", "TRAIN_TABLE_KS", "Terminated", "_print_items", "_threads", "cmd_data_fetch",
           "cmd_data_split", "cmd_evaluate", "cmd_recommend", "cmd_train", "flag_named", "interrupted_training",
           "item_item_summary", "parse_user_features", "print_eval_table", "printable", "resolve_train_config",
           "rows_to_csv", "terminate_as_interrupt", "train_summary", "users_line"]
