"""`twotower demo`: its flags are checked before a minute of training, not after it (no download: data faked)."""
from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest

from twotower.cli.main import main


@pytest.fixture
def no_training(monkeypatch, tmp_path):
    """MovieLens-100K stood in by three users; training fails the test (the check must come before it)."""
    import twotower.data.movielens as movielens
    import twotower.pipeline.run as run

    frame = pd.DataFrame({"user_id": ["1", "2", "943"], "item_id": ["50", "181", "50"], "timestamp": [1, 2, 3]})
    monkeypatch.setattr(movielens, "fetch_movielens_100k", lambda *a, **k: tmp_path)
    monkeypatch.setattr(movielens, "load_movielens_100k", lambda *a, **k: SimpleNamespace(interactions=frame))

    def boom(*a, **k):
        raise AssertionError("training started before the flags were checked")

    monkeypatch.setattr(run, "train_run", boom)
    monkeypatch.chdir(tmp_path)


def test_demo_epochs_zero_is_refused_not_read_as_the_default(no_training, capsys):
    # `--epochs 0` was taken as "not given" and trained the config's 30 epochs
    assert main(["demo", "--epochs", "0"]) == 2
    assert capsys.readouterr().err.strip() == "error: --epochs: must be at least 1, got 0"


def test_demo_unknown_user_is_refused_before_training(no_training, capsys):
    # it was found only at step 4/4, after the whole fit and the baselines
    assert main(["demo", "--user", "99999", "--epochs", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == "error: --user: unknown user '99999'; MovieLens-100K's 3 users are 1 to 943"
    with pytest.raises(AssertionError, match="training started"):  # a known user goes on to train
        main(["demo", "--user", "943", "--epochs", "1"])


def test_demo_out_over_a_folder_of_the_users_files_is_refused_as_typed_before_the_download(no_training, tmp_path,
                                                                                          monkeypatch, capsys):
    import twotower.data.movielens as movielens

    monkeypatch.setattr(movielens, "fetch_movielens_100k", lambda *a, **k: pytest.fail("downloaded first"))
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("mine")
    assert main(["demo", "--out", "mine", "--epochs", "1"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith(
        "error: --out mine: a non-empty folder that holds no run (notes.txt)")


def test_demo_refuses_two_users_before_training(no_training, capsys):
    # `--user 1 --user 2` showed user 2 alone, after the whole training, without a word about user 1
    assert main(["demo", "--user", "1", "--user", "2", "--epochs", "1"]) == 2
    err = capsys.readouterr().err
    assert "--user: given 2 times with different values ('1' and '2')" in err
    assert "twotower recommend --run OUT --users 1,2" in err
    with pytest.raises(AssertionError, match="training started"):  # the same user twice is no clash
        main(["demo", "--user", "1", "--user", "1", "--epochs", "1"])
