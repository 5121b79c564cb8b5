"""What produced a `recommend --users ... --out FILE`: a JSON record written beside it as ``FILE.json``.

Two recommendation files said nothing of where they came from: not the run, not whether an index (and which,
at which search setting) or exact search ranked them, not k or the files that fed and filtered the lists. The
record says all of that, with the sha256 of the CSV it describes (an older record beside a newer CSV is told
by it) and of each input file, as ``split_report.json`` records its input. The CSV itself is unchanged.
"""
from __future__ import annotations

import argparse
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from twotower.cli.paths import STDOUT, is_file
from twotower.utils.atomic import resolve_write_target, sha256_file

__all__ = ["RECORD_FORMAT", "record_path", "recommend_record", "file_entry"]

#: bumped when a key changes meaning; keys are only ever added within one format
RECORD_FORMAT = 1


def record_path(out: str | os.PathLike[str]) -> Path | None:
    """``recs.csv.json`` beside ``--out recs.csv``; None where nothing can sit beside the output (``-``, a device
    or FIFO such as ``/dev/stdout``, written into rather than replaced)."""
    if os.fspath(out) == STDOUT:
        return None
    try:
        _, atomic = resolve_write_target(out)
    except OSError:  # a loop or a folder: check_output_file has refused it already
        return None
    return Path(os.fspath(out) + ".json") if atomic else None


def file_entry(path: str | os.PathLike[str]) -> dict[str, str]:
    """``{"path", "sha256"}`` of an input file: absolute (the working directory is not recorded), and the digest
    tells an edited file."""
    return {"path": os.path.abspath(path), "sha256": sha256_file(path)}


def _index_entry(index: Any, index_dir: Path | None, used: str) -> dict[str, Any]:
    """Which index ranked: exact search over the item vectors (``path`` None), or the saved index and its search
    setting; ``used`` is the line `recommend` printed about it ("exact search over 60 items (--exact)")."""
    if index_dir is None:
        return {"kind": "exact", "path": None, "used": used}
    from twotower.index.storage import read_meta

    meta = read_meta(index_dir)
    return {"kind": "exact" if index.is_exact else "approximate", "path": os.path.abspath(index_dir), "used": used,
            "backend": index.backend, "factory": getattr(index, "factory", None), "params": index.search_params,
            "created": meta.get("created"), "meta_sha256": meta.get("meta_sha256")}


def recommend_record(args: argparse.Namespace, run: Any, index: Any, index_dir: Path | None, used: str, *, k: int,
                     n_users: int, n_rows: int, csv_sha256: str) -> dict[str, Any]:
    """The record of one ``recommend --users ... --out FILE`` (see the module docstring)."""
    from twotower.cli.main import _version  # what `twotower --version` prints

    users = args.users
    users_file = users != "all" and is_file(users)
    return {
        "format": RECORD_FORMAT,
        "command": "twotower recommend",
        "twotower_version": _version(),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "output": {"path": os.path.abspath(args.out), "sha256": csv_sha256, "rows": n_rows, "users": n_users},
        "run": {"path": os.path.abspath(run.dir), "fingerprint": run.fingerprint()},
        "index": _index_entry(index, index_dir, used),
        "k": k,
        "users": {"file": file_entry(users)} if users_file else {"given": users},
        "exclude": [file_entry(f) for f in args.exclude or []],
        "exclude_seen": not args.no_exclude_seen,
        "history_from": [file_entry(f) for f in getattr(args, "history_from", None) or []] or None,
    }
