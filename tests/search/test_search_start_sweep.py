"""A search command that writes an --out removes, before its work, the temporaries dead writers left beside it.

`search train --out X` killed with kill -9 while it saved left a ~90 MB `.X.tmp-PID-...` folder beside X, kept until
a later write into that very X; a command writing a sibling (--out Y) trained for minutes beside it.
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
from search_data import write_beir

import twotower.cli.search_cmd as search_cmd
from twotower.cli.main import main
from twotower.utils.atomic import _pid_space, _start_ticks


class _Stop(Exception):
    pass


@pytest.mark.parametrize("argv", [["search", "index"], ["search", "train", "--negatives", "0"]])
def test_a_dead_writers_temporary_beside_out_is_removed_before_the_work_starts(argv, tmp_path, monkeypatch):
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()  # a pid that names no process: the writer killed while it saved
    runs = tmp_path / "runs"
    runs.mkdir()
    dead = runs / f".bi.tmp-{proc.pid}-s4242-h{_pid_space()}-abcd1234.tmp"
    dead.mkdir()
    (dead / "model.safetensors").write_bytes(b"x" * 1000)
    parent = os.getppid()
    live = runs / f".cross.tmp-{parent}-s{_start_ticks(parent)}-efgh5678.tmp"  # a running writer's: kept
    live.mkdir()
    seen = []

    def first_work(args):  # noqa: ANN001, ANN202 - what lies beside --out when the work begins
        seen.extend(sorted(p.name for p in runs.iterdir()))
        raise _Stop

    monkeypatch.setattr(search_cmd, "_check_cache", first_work)
    beir = write_beir(tmp_path / "beir")
    with pytest.raises(_Stop):
        main(["-q", *argv, "--beir", str(beir), "--out", str(runs / "new"), "--threads", "1"])
    assert dead.name not in seen and live.name in seen
