"""A mistyped subcommand, choice or flag names the one meant (Python < 3.14's argparse suggests nothing)."""
from __future__ import annotations

import pytest

from twotower.cli.main import main


@pytest.mark.parametrize("argv, hint", [
    (["trian"], "did you mean 'train'?"),
    (["index", "biuld", "--run", "r"], "did you mean 'build'?"),
    (["data", "split", "--method", "tempral", "--out", "o"], "did you mean 'temporal'?"),
    (["evaluate", "--run", "r", "--plot-metric", "ndcg"], "did you mean 'NDCG'?"),  # case aside
    # a flag's value is kept, as a setting's is (it was dropped: "did you mean --epochs?")
    (["train", "--epohcs", "3"], "did you mean --epochs 3?"),
    (["train", "--epohcs=3"], "did you mean --epochs=3?"),
    (["train", "--no-evla"], "did you mean --no-eval?"),  # a switch takes no value
    (["serve", "--run", "r", "--max-wiat-ms", "3"], "did you mean --max-wait-ms 3?"),
    (["train", "--epohcs", "3", "--thredas", "1"], "did you mean --epochs 3 (for --epohcs), --threads 1 (for --thredas)?"),
    # a setting with no flag of its own is answered with its override, value and all (--lr used to get --help)
    (["train", "--lr", "0.01"], "did you mean train.lr=0.01?"),
    (["train", "--batch-size=256"], "did you mean train.batch_size=256?"),
    (["train", "--temprature", "0.1"], "did you mean loss.temperature=0.1?"),
    (["train", "--lr", "--epohcs", "3"], "did you mean train.lr=VALUE (for --lr), --epochs 3 (for --epohcs)?"),
    # words in another order are too far apart letter by letter: this got a bare "unrecognized arguments"
    (["index", "build", "--run", "r", "--recall-target", "0.99"], "did you mean --target-recall 0.99?"),
    (["evaluate", "--run", "r", "--metric-plot", "NDCG"], "did you mean --plot-metric NDCG?"),
])
def test_a_typo_is_answered_with_the_nearest_name(argv, hint, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.endswith(hint), err


def test_a_flag_near_nothing_gets_no_guess(capsys):
    assert main(["train", "--zzzzz"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == "twotower train: error: unrecognized arguments: --zzzzz"


@pytest.mark.parametrize("argv, prog", [
    (["train", "--epohcs", "3"], "twotower train"),
    (["index", "build", "--run", "r", "--nprbe", "3"], "twotower index build"),
    (["data", "split", "--dataset", "movielens-100k", "--out", "o", "--metohd", "random"], "twotower data split"),
])
def test_a_mistyped_flag_shows_the_subcommands_usage(argv, prog, capsys):
    # the top-level usage ({demo,data,train,...}) was printed: not the flags of the command the user typed
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: {prog} "), err
    assert f"{prog}: error: unrecognized arguments: " in err
