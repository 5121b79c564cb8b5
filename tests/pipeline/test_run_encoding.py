"""Files handed to a trained run (--exclude, --history-from, evaluate --test) are decoded with the run's
data.encoding, from its config.json; the run's own data/*.csv copies stay UTF-8 and are read as such."""
from __future__ import annotations

import pytest

from tests.pipeline.test_run_inputs import FAST
from tests.synthetic import make_interactions
from twotower.cli.main import main
from twotower.pipeline.artifacts import TrainedRun
from twotower.pipeline.recommend import exclusions_from_files
from twotower.pipeline.run_inputs import read_run_interactions


@pytest.fixture(scope="module")
def cp1252_run(tmp_path_factory):
    """A run trained on cp1252 files whose item ids hold accents ("Café 3")."""
    d = tmp_path_factory.mktemp("cp1252")
    df = make_interactions(n_users=12, n_items=10, per_user=6)
    df["item_id"] = df["item_id"].str.replace("i", "Café ", regex=False)
    df = df.sort_values(["user_id", "timestamp"], kind="stable")
    last = df.groupby("user_id").cumcount(ascending=False) < 1
    (d / "train.csv").write_bytes(df[~last].to_csv(index=False).encode("cp1252"))
    (d / "valid.csv").write_bytes(df[last].to_csv(index=False).encode("cp1252"))
    assert main(["-q", "train", "--train", str(d / "train.csv"), "--valid", str(d / "valid.csv"), "--out",
                 str(d / "run"), "--epochs", "1", "--no-eval", "data.encoding=cp1252", *FAST]) == 0
    return d, TrainedRun.load(d / "run")


def test_the_run_keeps_the_encoding_and_reads_later_files_with_it(cp1252_run):
    d, run = cp1252_run
    assert run.config.data.encoding == "cp1252"
    df = read_run_interactions(run, d / "valid.csv")
    assert df["item_id"].str.startswith("Café ").all()
    assert (run.item_vocab.encode(df["item_id"].to_numpy()) >= 0).all()  # every id known: none dropped


def test_the_runs_own_utf8_copies_are_not_decoded_as_cp1252(cp1252_run):
    d, run = cp1252_run
    own = run.dir / "data" / "valid.csv"
    assert "Café".encode("utf-8") in own.read_bytes()  # written by twotower as UTF-8
    # read as cp1252 the ids were "CafÃ© 3": unknown to the run, dropped from the exclusions without a word
    mine, theirs = (exclusions_from_files(run, [f], include_seen=False) for f in (own, d / "valid.csv"))
    assert mine.nnz == theirs.nnz == 12


def test_recommend_users_file_is_read_in_the_runs_encoding(cp1252_run, tmp_path, capsys):
    d, run = cp1252_run
    users = tmp_path / "users.csv"
    users.write_bytes("user_id,région\nu0,Île-de-France\nu1,Bretagne\n".encode("cp1252"))
    assert main(["-q", "recommend", "--run", str(run.dir), "--users", str(users), "--k", "2"]) == 0
    out = capsys.readouterr().out
    assert "u0" in out and "u1" in out and "Café" in out
