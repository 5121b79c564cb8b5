"""bench/serve_load.py --workers N writes the vectors into a twotower-serve-* folder before its workers start: a
Ctrl-C during the write left the folder (and its half-written file) in the temporary directory. It is removed now,
as `twotower serve --workers N` removes it."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest


def _folders() -> list[Path]:
    return list(Path(tempfile.gettempdir()).glob(f"twotower-serve-{os.getpid()}-*"))


def test_a_ctrl_c_while_the_vectors_are_written_leaves_no_folder(bench: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import twotower.serving.workers as workers

    serve_load = bench("serve_load")
    before = set(_folders())

    def interrupted(service: object, folder: Path) -> None:
        (Path(folder) / "item_vectors.npy").write_bytes(b"half")
        raise KeyboardInterrupt

    monkeypatch.setattr(workers, "share_arrays", interrupted)
    monkeypatch.setattr(workers, "run_workers", lambda *a, **k: pytest.fail("the workers started"))
    with pytest.raises(KeyboardInterrupt):
        serve_load.serve_workers(SimpleNamespace(run="run", workers=2), SimpleNamespace(), SimpleNamespace(),
                                 SimpleNamespace())
    assert set(_folders()) == before
