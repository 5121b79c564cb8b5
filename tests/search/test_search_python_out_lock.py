"""The Python search calls that write a folder hold its writer lock, as the commands hold ``--out``'s.

Before, only the commands took it: two ``finetune_bi_encoder`` (or ``train_cross_encoder``, ``SearchIndex.save``,
``prepare_beir``) calls with one output folder, in two processes or two threads, ran side by side and the one that
finished last silently replaced the other's folder.
"""
from __future__ import annotations

import threading

import pytest

from tests.lock_holder import writer_lock_held
from tests.search.writer_calls import writer_calls
from twotower.errors import ConfigError
from twotower.search.prepare import prepare_beir
from twotower.utils.folder_lock import exclusive_writer


def _no_work(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
    raise AssertionError("the second writer did work before it was refused")


def _calls(tmp_path, monkeypatch):  # noqa: ANN202
    return writer_calls(tmp_path, monkeypatch, _no_work)


@pytest.mark.parametrize("call", ["finetune_bi_encoder", "train_cross_encoder", "SearchIndex.save", "prepare_beir"])
def test_a_python_call_is_refused_while_another_process_writes_its_folder(call, tmp_path, monkeypatch):
    out = tmp_path / "models" / "out"
    with writer_lock_held(out, what="twotower search train", beside=True) as holder:
        with pytest.raises(ConfigError) as e:
            _calls(tmp_path, monkeypatch)[call](out)
    name = "path" if call == "SearchIndex.save" else "out" if call == "prepare_beir" else "out_dir"
    assert str(e.value) == (f"{out}: twotower search train (pid {holder.pid}) is writing this folder; wait for it to "
                            f"finish, or give another {name}")
    assert not out.exists()


def test_another_thread_of_the_process_is_refused_too(tmp_path, monkeypatch):
    out = tmp_path / "out"
    held, release = threading.Event(), threading.Event()

    def first() -> None:
        with exclusive_writer(out, "finetune_bi_encoder", "wait", beside=True):
            held.set()
            release.wait(60)

    t = threading.Thread(target=first)
    t.start()
    try:
        assert held.wait(60)
        with pytest.raises(ConfigError, match=r"another finetune_bi_encoder \(pid \d+\) is writing this folder"):
            _calls(tmp_path, monkeypatch)["finetune_bi_encoder"](out)
    finally:
        release.set()
        t.join()


def test_a_command_holding_the_folder_in_this_thread_goes_on(tmp_path):
    """The commands hold ``--out`` themselves, around the call: the call takes the same lock again, not refused."""
    (tmp_path / "p.csv").write_text("passage_id,text\n1,a\n2,b\n")
    (tmp_path / "q.csv").write_text("query,passage_id\nq,1\nr,2\n")
    out = tmp_path / "out"
    with exclusive_writer(out, "twotower search prepare", "wait", beside=True):
        report = prepare_beir(tmp_path / "p.csv", tmp_path / "q.csv", out)
    assert report["passages"] == 2 and (out / "corpus.jsonl").is_file()
