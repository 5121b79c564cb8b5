"""The Python search calls check their output folder and sweep dead writers' temporaries, as the commands do.

Before, only the commands refused an ``--out`` that is a non-empty folder of another kind: from Python,
``prepare_beir(p, q, "/some/non-empty/dir")`` (or ``finetune_bi_encoder``, ``train_cross_encoder``,
``SearchIndex.save``) replaced that folder's contents. And only the commands removed the ``.X.tmp-PID-...``
temporaries a killed writer had left beside the folder.
"""
from __future__ import annotations

import json
import logging
import subprocess
import sys

import pytest

from twotower.cli.main import main
from twotower.errors import ConfigError, IntegrityError
from twotower.search.artefacts import BI_ENCODER_META

from tests.search.writer_calls import writer_calls
from twotower.search.prepare import prepare_beir

KINDS = {"finetune_bi_encoder": ("out_dir", "bi-encoder"), "train_cross_encoder": ("out_dir", "cross-encoder"),
         "SearchIndex.save": ("path", "search index"), "prepare_beir": ("out", "prepared BEIR folder")}


class _Worked(Exception):
    pass


def _work(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
    raise _Worked


def _calls(tmp_path, monkeypatch, **kwargs):  # noqa: ANN003, ANN202
    return writer_calls(tmp_path, monkeypatch, _work, **kwargs)


@pytest.mark.parametrize("call", list(KINDS))
def test_a_non_empty_folder_of_another_kind_is_refused_and_kept(call, tmp_path, monkeypatch):
    out = tmp_path / "thesis"
    out.mkdir()
    (out / "chapter1.tex").write_text("years of work")
    with pytest.raises(ConfigError) as e:
        _calls(tmp_path, monkeypatch)[call](out)
    param, kind = KINDS[call]
    assert str(e.value).startswith(f"{param} {out}: a non-empty folder that is not a {kind}; writing there would "
                                   "replace everything in it")
    assert [p.name for p in out.iterdir()] == ["chapter1.tex"]


@pytest.mark.parametrize("call", list(KINDS))
def test_a_new_or_empty_folder_goes_on_to_the_work(call, tmp_path, monkeypatch):
    (tmp_path / "empty").mkdir()
    for out in (tmp_path / "new", tmp_path / "empty"):
        with pytest.raises(_Worked):
            _calls(tmp_path, monkeypatch)[call](out)


def test_a_damaged_marker_is_named_not_called_another_kind(tmp_path, monkeypatch):
    out = tmp_path / "bi"
    out.mkdir()
    (out / BI_ENCODER_META).write_text('{"kind": "bi_encoder",')
    with pytest.raises(IntegrityError, match=rf"^out_dir {out}: its {BI_ENCODER_META} is not valid JSON"):
        _calls(tmp_path, monkeypatch)["finetune_bi_encoder"](out)


def test_prepare_beir_refuses_an_out_holding_its_input(tmp_path):
    (tmp_path / "p.csv").write_text("passage_id,text\n1,a\n2,b\n")
    (tmp_path / "q.csv").write_text("query,passage_id\nq,1\nr,2\n")
    with pytest.raises(ConfigError, match=rf"^out {tmp_path}: is or contains passages {tmp_path / 'p.csv'}"):
        prepare_beir(tmp_path / "p.csv", tmp_path / "q.csv", tmp_path)
    assert (tmp_path / "p.csv").is_file()


def _dead_temporary(folder):  # noqa: ANN001, ANN202
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    from twotower.utils.atomic import _pid_space

    tmp = folder / f".other.tmp-{proc.pid}-s12345-h{_pid_space()}-abcd1234.tmp"  # a killed writer's, for another folder
    tmp.mkdir(parents=True)
    (tmp / "model.safetensors").write_bytes(b"x" * 1000)
    return tmp


@pytest.mark.parametrize("call", list(KINDS))
def test_a_dead_writers_temporary_beside_the_folder_is_removed_before_the_work(call, tmp_path, monkeypatch):
    tmp = _dead_temporary(tmp_path / "models")
    with pytest.raises(_Worked):  # removed even though the call then fails: it does not wait for the save
        _calls(tmp_path, monkeypatch)[call](tmp_path / "models" / "out")
    assert not tmp.exists()


def test_the_command_sweeps_once(tmp_path, caplog):
    """`search prepare` holds --out and calls prepare_beir, which takes the lock again: one sweep, one message."""
    (tmp_path / "p.csv").write_text("passage_id,text\n1,a\n2,b\n")
    (tmp_path / "q.csv").write_text("query,passage_id\nq,1\nr,2\n")
    tmp = _dead_temporary(tmp_path / "data")
    with caplog.at_level(logging.INFO):
        assert main(["search", "prepare", "--passages", str(tmp_path / "p.csv"), "--pairs", str(tmp_path / "q.csv"),
                     "--out", str(tmp_path / "data" / "beir")]) == 0
    assert not tmp.exists() and (tmp_path / "data" / "beir" / "corpus.jsonl").is_file()
    assert [r.getMessage() for r in caplog.records if "left by a writer that is gone" in r.getMessage()] == [
        f"removed {tmp}, left by a writer that is gone (killed while it saved)"]


#: an earlier folder of each kind, as its writer left it: file -> text (the marker names its files where it does)
_EARLIER = {
    "finetune_bi_encoder": {BI_ENCODER_META: {"kind": "bi_encoder", "format": 2, "files": {"query/model.bin": "0"}},
                            "query/model.bin": "w"},
    "train_cross_encoder": {"twotower_cross_encoder.json": {"kind": "cross_encoder", "format": 2,
                                                            "files": {"model.bin": "0"}}, "model.bin": "w"},
    "SearchIndex.save": {"meta.json": {"kind": "search_index", "format": 2, "files": {"bm25/meta.json": "0"}},
                         "bm25/meta.json": "{}"},
    "prepare_beir": {"prepare.json": {"splits": {"test": {}}}, "corpus.jsonl": "", "queries.jsonl": "",
                     "qrels/test.tsv": ""},
}


def _earlier(call, out):  # noqa: ANN001, ANN202
    for name, content in _EARLIER[call].items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(content if isinstance(content, str) else json.dumps(content))


@pytest.mark.parametrize("call", list(KINDS))
def test_an_earlier_folder_holding_the_users_files_is_refused_and_kept(call, tmp_path, monkeypatch):
    """Review: an earlier folder of the kind was replaced whole, the user's notes in it deleted without a word
    (`twotower export` refused the same case); now refused naming them, as export does, unless force=True."""
    out = tmp_path / "earlier"
    _earlier(call, out)
    (out / "NOTES.txt").write_text("my notes")
    (out / "qrels").mkdir(exist_ok=True)
    (out / "qrels" / "mine.tsv").write_text("kept")
    param, kind = KINDS[call]
    with pytest.raises(ConfigError) as e:
        _calls(tmp_path, monkeypatch)[call](out)
    assert str(e.value) == (f"{param} {out}: an earlier {kind} with files it did not write (NOTES.txt, "
                            f"qrels/mine.tsv); the new {kind} replaces the whole folder, so they would be lost: "
                            "choose a new or empty folder, move them out, or pass force=True to replace it anyway")
    assert (out / "NOTES.txt").read_text() == "my notes"
    with pytest.raises(_Worked):  # force=True goes on, and an earlier folder of its own files alone too
        _calls(tmp_path, monkeypatch, force=True)[call](out)
    (out / "NOTES.txt").unlink()
    (out / "qrels" / "mine.tsv").unlink()
    with pytest.raises(_Worked):
        _calls(tmp_path, monkeypatch)[call](out)
