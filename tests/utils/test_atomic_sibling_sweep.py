"""A dead writer's temporary is removed by the next atomic write into its folder, whichever target it was for.

Before, `search train --out X` killed (kill -9) while it saved left a ~90 MB `.X.tmp-PID-...` folder beside X, removed
only by a later write into that very X; writes into its siblings (another --out, a file) kept it for ever.
A pid is looked up only in the pid namespace that wrote it: a live writer in another container sharing the volume, or
on another machine over NFS, looked dead and had its temporary removed under it.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time

from twotower.utils.atomic import UNMARKED_SWEEP_AGE_S, _pid_space, _start_ticks, atomic_dir, atomic_path


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _leftovers(folder):  # noqa: ANN001, ANN202
    """Temporaries of dead writers (gone, or pid reused) and of live ones, for other targets than the write's."""
    dead, parent, host = _dead_pid(), os.getppid(), _pid_space()
    start = _start_ticks(parent)
    gone = folder / f".bi.tmp-{dead}-s12345-h{host}-abcd1234.tmp"  # a folder swapped in whole (search train --out bi)
    gone.mkdir()
    (gone / "model.safetensors").write_bytes(b"x" * 1000)
    older = folder / f".recs.csv.tmp-{dead}-k2j4h5g6.tmp"  # a name from before start times were recorded, left long
    older.write_bytes(b"half")
    os.utime(older, (time.time() - UNMARKED_SWEEP_AGE_S - 60,) * 2)
    reused = folder / f".cross.tmp-{parent}-s{start + 1}-h{host}-zz99yy88.tmp"  # its pid now names a later process
    reused.mkdir()
    dead_ones = [gone, older, reused]
    live = [folder / f".idx.tmp-{parent}-s{start}-qwer5678.tmp",  # a running writer's: kept
            folder / f".own.tmp-{os.getpid()}-s{_start_ticks(os.getpid())}-asdf1234.tmp",  # this process's: kept
            folder / f".notes.tmp-{dead}.txt", folder / "my.tmp",
            # a writer in another container sharing the volume, or on another machine (NFS): its pid names no
            # process here, yet it may be running
            folder / f".shared.tmp-{dead}-s12345-h{'0' * 8 if host != '0' * 8 else '1' * 8}-abcd1234.tmp",
            folder / f".unmarked.tmp-{dead}-s12345-abcd1234.tmp"]  # from before namespaces were recorded, recent  # not a temporary's name: not ours to remove
    for p in live:
        p.write_bytes(b"busy")
    return dead_ones, live


def test_an_atomic_dir_write_removes_a_dead_writers_temporary_for_a_sibling(tmp_path):
    dead, live = _leftovers(tmp_path)
    with atomic_dir(tmp_path / "other") as d:
        (d / "x").write_text("1")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["other", *(p.name for p in live)])


def test_an_atomic_file_write_removes_them_too(tmp_path):
    dead, live = _leftovers(tmp_path)
    with atomic_path(tmp_path / "a.json") as p:
        p.write_text("{}")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["a.json", *(p.name for p in live)])


def test_sweep_dead_temporaries_names_what_it_removed(tmp_path):
    from twotower.utils.atomic import sweep_dead_temporaries

    dead, live = _leftovers(tmp_path)
    assert sorted(sweep_dead_temporaries(tmp_path)) == sorted(dead)
    assert all(p.exists() for p in live)
    assert sweep_dead_temporaries(tmp_path / "missing") == []


def test_a_previous_version_kept_by_another_namespaces_writer_is_left_to_it(tmp_path, monkeypatch):
    """``atomic_dir``'s two-rename fallback (no renameat2, as on NFS) keeps the previous version in ``.NAME.old.PID``
    between its renames: a write from another container moved it back under the live writer, whose second rename
    then found the folder taken."""
    from twotower.utils import atomic

    target = tmp_path / "index"
    foreign = tmp_path / f".index.old.{_dead_pid()}-h{'0' * 8 if _pid_space() != '0' * 8 else '1' * 8}"
    foreign.mkdir()
    (foreign / "a").write_text("old")
    monkeypatch.setattr(atomic, "_rename_exchange", lambda a, b: False)
    with atomic_dir(target) as d:
        assert not target.exists()  # not restored: its writer may be between its renames
        (d / "a").write_text("new")
    assert (target / "a").read_text() == "new" and (foreign / "a").read_text() == "old"
