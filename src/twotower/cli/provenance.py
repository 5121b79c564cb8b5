"""What produced a `recommend --users ... --out FILE` or a `similar --items ... --out FILE`: a JSON record
written beside it as ``FILE.json``.

Two recommendation files said nothing of where they came from: not the run, not whether an index (and which,
at which search setting) or exact search ranked them, not k or the files that fed and filtered the lists. The
record says all of that, with the sha256 of the CSV it describes (an older record beside a newer CSV is told
by it) and of each input file, as ``split_report.json`` records its input. The CSV itself is unchanged.
`similar --items ... --out FILE` wrote its CSV with no such record; both commands now write it here, the same
way (:func:`check_out_and_record`, :func:`write_csv_and_record`).
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from twotower.cli.paths import STDOUT, _check_out_is_no_input, check_output_file, is_file
from twotower.cli.printing import say
from twotower.utils.atomic import resolve_write_target, sha256_file
from twotower.utils.version import VERSION_KEY, installed_version

__all__ = ["RECORD_FORMAT", "check_out_and_record", "evaluate_record", "file_entry", "recommend_record", "record_path",
           "similar_record", "write_csv_and_record", "write_file_and_record"]

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


def check_out_and_record(out: str, inputs: dict[str, list], example: str = "recs.csv") -> None:
    """Refuse, before any work, an ``--out`` or a record beside it that would replace a run's file or one of the
    command's ``inputs`` (``{flag: [files]}``): ``--out runs/ml/config`` wrote its record over ``config.json``."""
    check_output_file(out, example=example)  # `example`: the file name a folder given as --out is suggested with
    _check_out_is_no_input(out, inputs)
    record = record_path(out)
    if record is not None:
        check_output_file(record, "--out's record")
        _check_out_is_no_input(os.fspath(record), inputs, "--out's record")


def _earlier_files(out: str | os.PathLike[str]) -> list[str]:
    """The files at ``out`` and its record that a write there replaces (a device written into replaces none)."""
    record = record_path(out)
    return [] if record is None else [os.fspath(p) for p in (out, record) if is_file(p)]


def _say_replaced(out: str | os.PathLike[str], earlier: list[str]) -> None:
    """One line when the write replaced an earlier output: a rerun onto the same FILE replaced it without a word."""
    if not earlier:
        return
    record = [p for p in earlier if p != os.fspath(out)]
    say(f"{os.fspath(out)} held an earlier file: replaced it" + (f" and its record {record[0]}" if record else ""))


def write_csv_and_record(out: str, write_rows: Callable[[Callable[[str], None]], int],
                         make_record: Callable[[int, str], dict[str, Any]]) -> int:
    """Write the CSV of ``--out`` through ``write_rows(write) -> rows`` and, beside it, ``make_record(rows,
    csv_sha256)``; returns the rows written. Both are written in full to temporaries before either is moved into
    place, and the record holds the CSV's sha256, so a record is never taken for that of another CSV. Replacing
    an earlier file is said in one line (silent under -q)."""
    from twotower.utils.atomic import atomic_path, json_text, signals_deferred

    earlier = _earlier_files(out)
    digest = hashlib.sha256()
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(atomic_path(out))
        with open(tmp, "w", encoding="utf-8", newline="") as f:

            def write(text: str) -> None:
                f.write(text)
                digest.update(text.encode("utf-8"))  # newline="": the bytes written, hashed without reading back

            n = write_rows(write)
        where = record_path(out)
        if where is not None:
            record = make_record(n, digest.hexdigest())
            stack.enter_context(atomic_path(where)).write_text(json_text(record), encoding="utf-8")
        with signals_deferred():  # a Ctrl-C between the two moves left a new CSV beside an old record
            stack.close()
    _say_replaced(out, earlier)
    return n


def write_file_and_record(out: str | os.PathLike[str], write_file: Callable[[Path], None],
                          make_record: Callable[[str], dict[str, Any]]) -> None:
    """Write ``out`` through ``write_file(temporary)`` and, beside it, ``make_record(sha256 of the file)``: both in
    full to temporaries before either is moved into place, as :func:`write_csv_and_record` does for a CSV (a PNG of
    ``evaluate --plot`` is written through here)."""
    from twotower.utils.atomic import atomic_path, json_text, signals_deferred

    earlier = _earlier_files(out)
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(atomic_path(out))
        write_file(tmp)
        where = record_path(out)
        if where is not None:
            record = make_record(sha256_file(tmp))
            stack.enter_context(atomic_path(where)).write_text(json_text(record), encoding="utf-8")
        with signals_deferred():  # a Ctrl-C between the two moves left a new file beside an old record
            stack.close()
    _say_replaced(out, earlier)


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

    from twotower.pipeline.recommend import recall_record

    meta = read_meta(index_dir)
    return {"kind": "exact" if index.is_exact else "approximate", "path": os.path.abspath(index_dir), "used": used,
            "backend": index.backend, "factory": getattr(index, "factory", None), "params": index.search_params,
            "created": meta.get("created"), "meta_sha256": meta.get("meta_sha256"),
            # the recall its build measured, and at which k: the lists' own k may be above it (the record's "k")
            "recall": recall_record(index_dir)}


def _common_record(command: str, out: str, output: dict[str, Any], run: Any, index: Any, used: str, exact: bool,
                   k: int, index_dir: str | None = None) -> dict[str, Any]:
    """The keys every record holds: what wrote it, when, the CSV it describes, the run, the index and k."""
    from twotower.pipeline.recommend import run_index_dir

    index_dir = run_index_dir(run.dir, index_dir, exact=exact)  # as open_run_index chose
    return {
        "format": RECORD_FORMAT,
        "command": command,
        VERSION_KEY: installed_version(),  # what `twotower --version` prints
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "output": {"path": os.path.abspath(out), **output},
        "run": {"path": os.path.abspath(run.dir), "fingerprint": run.fingerprint()},
        "index": _index_entry(index, index_dir, used),
        "k": k,
    }


def recommend_record(args: argparse.Namespace, run: Any, index: Any, used: str, *, k: int, n_users: int, n_rows: int,
                     csv_sha256: str) -> dict[str, Any]:
    """The record of one ``recommend --users ... --out FILE`` (see the module docstring)."""
    users = args.users
    users_file = users != "all" and is_file(users)
    output = {"sha256": csv_sha256, "rows": n_rows, "users": n_users}
    return {
        **_common_record("twotower recommend", args.out, output, run, index, used, getattr(args, "exact", False), k,
                         getattr(args, "index", None)),
        "users": {"file": file_entry(users)} if users_file else {"given": users},
        "exclude": [file_entry(f) for f in args.exclude or []],
        "exclude_seen": not args.no_exclude_seen,
        "exclude_items": getattr(args, "listed_ids", None),  # --exclude-items, as POST /recommend's JSON
        "history_from": [file_entry(f) for f in getattr(args, "history_from", None) or []] or None,
        "filters": getattr(args, "filters", None),  # --filter, as POST /recommend's JSON
        # how a filter is ranked through an approximate index (exactly over at most this many items, else a wider
        # index search): a setting that can change the lists, which the record left out
        "filter_exact_max": getattr(args, "filter_exact_max", None),
    }


def items_entry(item_ids: Sequence[str] | None) -> dict[str, Any]:
    """The ``--items`` selection: ``{"given": "all"}``, or a list's ``count`` and the ``sha256`` of its ids as a
    compact JSON array (a thousand ids would swamp the record; the digest still tells two lists apart)."""
    if item_ids is None:
        return {"given": "all"}
    text = json.dumps(list(item_ids), ensure_ascii=False, separators=(",", ":"))
    return {"count": len(item_ids), "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest()}


def similar_record(args: argparse.Namespace, run: Any, index: Any, used: str, *, k: int, item_ids: Sequence[str] | None,
                   n_items: int, n_rows: int, csv_sha256: str) -> dict[str, Any]:
    """The record of one ``similar --items ... --out FILE``; ``item_ids`` None for ``--items all``, else the
    distinct ids listed, in order."""
    output = {"sha256": csv_sha256, "rows": n_rows, "items": n_items}
    return {
        **_common_record("twotower similar", args.out, output, run, index, used, args.exact, k, args.index),
        "items": items_entry(item_ids),
        "cold_similar": args.cold_similar,
        "exclude_items": getattr(args, "listed_ids", None),  # --exclude-items, as POST /similar-items' JSON
        "filters": getattr(args, "filters", None),  # --filter, as POST /similar-items' JSON
        "filter_exact_max": getattr(args, "filter_exact_max", None),  # as recommend's record
    }


def evaluate_record(args: argparse.Namespace, run: Any, *, ks: Sequence[int], baselines: Sequence[str], n_rows: int,
                    csv_sha256: str, tuned_rows: bool, out: str | os.PathLike[str] | None = None,
                    plot_metric: str | None = None) -> dict[str, Any]:
    """The record of one ``evaluate --csv FILE`` (or, with ``out`` and ``plot_metric``, of its ``--plot FILE.png``:
    the same keys, the PNG's ``output``, its ``rows`` the models drawn, and the metric drawn as ``plot_metric``): the run, the held-out split (or ``--test`` file) and the
    ``--history-from`` files with their sha256, the resolved ``ks`` and ``baselines``, and the tuned baselines' file
    the λ and k came from, None unless ``tuned_rows`` (a row of EASE or ItemKNN tuned on the valid split: with
    ``--baselines popularity``, or no valid split, the file fed no row, though it may sit in the run).
    Two evaluation CSVs otherwise said nothing of the run, split or cut-offs behind them."""
    from twotower.pipeline.tuned_baselines import TUNED_FILE

    test_file, tuned = getattr(args, "test", None), Path(run.dir) / TUNED_FILE
    record = {
        "format": RECORD_FORMAT,
        "command": "twotower evaluate",
        VERSION_KEY: installed_version(),  # what `twotower --version` prints
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "output": {"path": os.path.abspath(args.csv if out is None else out), "sha256": csv_sha256, "rows": n_rows},
        "run": {"path": os.path.abspath(run.dir), "fingerprint": run.fingerprint()},
        "split": args.split,
        "test": file_entry(test_file) if test_file else None,
        "history_from": [file_entry(f) for f in getattr(args, "history_from", None) or []] or None,
        "ks": list(ks),
        "baselines": list(baselines),
        "tuned_baselines": file_entry(tuned) if tuned_rows and tuned.is_file() else None,
        "ease_max_items": args.ease_max_items,
        "ease_low_rank_max_items": getattr(args, "ease_low_rank_max_items", None),
        "exclude_seen": not getattr(args, "no_exclude_seen", False),
        "segments": split_segments(getattr(args, "segments", None)),
    }
    if plot_metric is not None:
        record["plot_metric"] = plot_metric
    return record


def split_segments(value: str | None) -> list[str] | None:
    """``evaluate --segments``'s names as the record lists them (None: not given)."""
    from twotower.cli.id_lists import split_comma_list

    return None if value is None else split_comma_list(value, "--segments")
