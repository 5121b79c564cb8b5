"""One writer at a time for a search command's --out, as `index build` and `export` have it.

Before, two `search train --out X` (or `rerank train`, `search index`, `search prepare`) ran side by side for minutes,
each swapping its own folder in: the one that finished first printed the summary of a model the other replaced.
"""
from __future__ import annotations

import pytest
from search_data import write_beir

import twotower.cli.search_cmd as search_cmd
from tests.lock_holder import writer_lock_held
from twotower.cli.main import main

COMMANDS = {
    "twotower search train": ["search", "train", "--epochs", "1", "--negatives", "0"],
    "twotower rerank train": ["rerank", "train", "--epochs", "1"],
    "twotower search index": ["search", "index"],
}


def _no_work(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
    raise AssertionError("the second writer did work before it was refused")


@pytest.mark.parametrize("what", list(COMMANDS))
def test_a_second_writer_of_the_same_out_is_refused_before_any_work(what, tmp_path, monkeypatch, capsys):
    for stage in ("_train_pairs", "_corpus", "_threads", "_check_cache"):  # the first steps after the checks of --out
        monkeypatch.setattr(search_cmd, stage, _no_work)
    beir = write_beir(tmp_path / "beir")
    out = tmp_path / "out"
    with writer_lock_held(out, what=what, beside=True) as holder:
        rc = main(["-q", *COMMANDS[what], "--beir", str(beir), "--out", str(out), "--threads", "1"])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert f"{out}: another {what} (pid {holder.pid}) is writing this folder; wait for it to finish, or give " \
           "another --out" in err
    assert not out.exists()  # nothing written, and no empty folder left behind


def test_the_holder_is_named_when_another_search_command_writes_the_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(search_cmd, "_train_pairs", _no_work)
    beir = write_beir(tmp_path / "beir")
    out = tmp_path / "out"
    with writer_lock_held(out, what="twotower search index", beside=True) as holder:
        rc = main(["-q", *COMMANDS["twotower search train"], "--beir", str(beir), "--out", str(out)])
    assert rc == 2
    assert f"twotower search index (pid {holder.pid}) is writing this folder" in capsys.readouterr().err


def test_search_prepare_takes_the_same_lock(tmp_path, monkeypatch, capsys):
    import twotower.search.prepare as prepare

    monkeypatch.setattr(prepare, "prepare_beir", _no_work)
    (tmp_path / "p.csv").write_text("passage_id,text\n1,a\n")
    (tmp_path / "q.csv").write_text("query,passage_id\nq,1\n")
    out = tmp_path / "out"
    with writer_lock_held(out, what="twotower search prepare", beside=True) as holder:
        rc = main(["-q", "search", "prepare", "--passages", str(tmp_path / "p.csv"), "--pairs",
                   str(tmp_path / "q.csv"), "--out", str(out)])
    assert rc == 2
    assert f"another twotower search prepare (pid {holder.pid}) is writing this folder" in capsys.readouterr().err


def test_the_lock_is_free_again_once_the_holder_is_gone(tmp_path, monkeypatch):
    """A writer killed with kill -9 leaves no lock (the kernel drops it): the next command goes on to its work."""
    reached = []
    monkeypatch.setattr(search_cmd, "_check_cache", lambda args: reached.append(args.out) or _no_work())
    beir = write_beir(tmp_path / "beir")
    out = tmp_path / "out"
    with writer_lock_held(out, what="twotower search index", beside=True):
        pass  # SIGKILLed on leaving
    with pytest.raises(AssertionError, match="did work"):
        main(["-q", "search", "index", "--beir", str(beir), "--out", str(out)])
    assert reached == [str(out)]
