"""`twotower data fetch` and `twotower data split`: a named dataset, and train/valid/test CSVs from one file."""
from __future__ import annotations

import argparse
import hashlib
import logging
import os
from dataclasses import replace
from pathlib import Path
from collections.abc import Callable, Iterator
from typing import Any

from twotower.cli.id_lists import split_comma_list
from twotower.cli.paths import artefact_owning, check_output_dir
from twotower.cli.stopping import path_identity, sigterm_keeps_folder_at, sigterm_says
from twotower.errors import ConfigError

__all__ = ["cmd_data_fetch", "cmd_data_split", "SPLIT_OVERRIDES"]

log = logging.getLogger("twotower")


def _fetch_dest(args: argparse.Namespace) -> str:
    from twotower.data.movielens import default_movielens_dir

    return args.dest or str(default_movielens_dir())


@sigterm_keeps_folder_at(_fetch_dest)  # SIGTERM mid-copy: its temporary folder removed, one line on --dest, 143
def cmd_data_fetch(args: argparse.Namespace) -> int:
    from twotower.data.movielens import fetch_movielens_100k, load_movielens_100k

    kwargs = {}
    if args.source:
        kwargs.update(source=args.source, source_name="--source")
    path = fetch_movielens_100k(Path(args.dest) if args.dest else None, **kwargs)
    ml = load_movielens_100k(path)
    print(f"{path}: {len(ml.interactions)} interactions, {ml.interactions['user_id'].nunique()} users, "
          f"{ml.interactions['item_id'].nunique()} items (checksums verified)")
    return 0


#: the settings `data split` takes as dotted overrides: how to read --input (the split itself has flags)
SPLIT_OVERRIDES = ("data.user_col", "data.item_col", "data.timestamp_col", "data.rating_col", "data.format",
                   "data.encoding", "data.time_unit")


def _split_reading(args: argparse.Namespace):
    """The DataConfig part `data split` reads --input with: the ``data.*`` overrides `train` takes, and --format."""
    from twotower.config import RunConfig, load_config, refuse_repeated_overrides

    from twotower.cli.main import _closest, _setting_keys

    overrides = list(getattr(args, "overrides", None) or [])
    refuse_repeated_overrides(overrides)
    for item in overrides:
        key = item.split("=", 1)[0].strip()
        if key not in SPLIT_OVERRIDES:
            # a misspelt name gets the nearest one taken here, as `train` and the flags get theirs: data.user_cl
            # was only listed beside the seven names, none pointed out. A real setting (train.epochs) gets none.
            known = key in _setting_keys(RunConfig)
            near = None if known else _closest(key, list(SPLIT_OVERRIDES))
            # a name no command takes (data.weight_col) is unknown, as `train` calls it: "cannot be set here" sent
            # the user looking for the command that takes it
            what = f"{key} cannot be set here" if known else f"unknown setting {key!r}"
            raise ConfigError(f"data split: {what}; it takes {', '.join(SPLIT_OVERRIDES)} "
                              "(the split has its own flags: --method, --ratios, --n, --valid-start, --test-start, "
                              "--seed)" + (f"; did you mean {near}?" if near else ""))
    data = load_config(None, overrides, overrides_label="command line").data
    if args.format is not None:
        if any(o.split("=", 1)[0].strip() == "data.format" for o in overrides) and data.format != args.format:
            raise ConfigError(f"--format {args.format} and data.format={data.format} disagree; give one of them")
        data = replace(data, format=args.format)
    return data


def _split_input(args: argparse.Namespace, reading: Any) -> dict[str, Any]:
    """What `data split` read, for split_report.json: with the method, ratios and seed it makes the split again.

    The report named neither the file nor the data.* settings it was read with, so the three files said nothing
    of where they came from; the path is absolute (the working directory is not recorded) and the sha256 tells
    an edited file.
    """
    from twotower.utils.atomic import sha256_file

    if args.dataset:
        return {"dataset": args.dataset}
    given: dict[str, Any] = {"path": os.path.abspath(args.input), "sha256": sha256_file(Path(args.input))}
    for key in SPLIT_OVERRIDES:
        name = key.split(".", 1)[1]
        given[name] = getattr(reading, name)
    return given


def _check_split_flags(args: argparse.Namespace) -> tuple[int | str | None, int | str | None]:
    """Numeric flags of `data split`, checked before the data is read; errors name the flag.

    The time cut-offs come back as given (a number, or a date's text): a date is turned into an epoch time
    only once the data is read, in the unit of its timestamps (seconds, ms, us or ns).
    """
    from twotower.data.splits import _to_epoch

    from twotower.cli.flags import check_range

    check_range("--seed", args.seed, 0)  # numpy's generators take no negative seed
    if args.method != "time":
        return None, None
    if args.valid_start is None or args.test_start is None:
        raise ConfigError("--method time needs --valid-start and --test-start (ISO dates like 2024-05-01, or epoch "
                          "times in the data's unit): valid is [valid-start, test-start), test from test-start on")
    valid, test = _maybe_int(args.valid_start), _maybe_int(args.test_start)
    v, t = _to_epoch(valid, "--valid-start"), _to_epoch(test, "--test-start")
    if isinstance(valid, str) == isinstance(test, str) and v > t:  # a date and a number compare in the data's unit
        raise ConfigError(f"--valid-start ({args.valid_start}) must not be after --test-start ({args.test_start})")
    return valid, test


#: the `data split` flags each --method reads
_SPLIT_METHOD_FLAGS = {"ratios": ("temporal", "random"), "n": ("leave_last",), "seed": ("random",),
                       "valid_start": ("time",), "test_start": ("time",)}


def _check_method_flags(args: argparse.Namespace) -> None:
    """A flag of another method is refused: `--n 1` without `--method leave_last`, or `--valid-start` without
    `--method time`, made the default temporal split without a word, ignoring what the user asked for."""
    for name, methods in _SPLIT_METHOD_FLAGS.items():
        if getattr(args, name) is not None and args.method not in methods:
            flag = "--" + name.replace("_", "-")
            raise ConfigError(f"{flag} is read by --method {' and '.join(methods)}, not by --method {args.method}"
                              f"{' (the default)' if args.method == 'temporal' else ''}, which would ignore it: choose "
                              f"--method {' or '.join(methods)} for it, or leave {flag} out")


def _check_one_input(args: argparse.Namespace) -> None:
    """--dataset is split as it is published: with --input too, the dataset was split and --input ignored without a
    word (`train --dataset X --data F` reads F), and the settings that say how to read --input (--format, the data.*
    overrides) were dropped as silently."""
    if not args.dataset:
        return
    if args.input:
        raise ConfigError(f"--input {args.input} and --dataset {args.dataset} each name the interactions to split: "
                          "give one of them")
    # data.time_unit is no reading setting alone: the time split's cut-offs are read in it, of a dataset too; an
    # explicit `auto` format (the default) ignores nothing
    pairs = [[part.strip().strip("'\"") for part in item.partition("=")[::2]]  # data.format="auto" is auto too
             for item in getattr(args, "overrides", None) or []]
    reading = (["--format"] if args.format not in (None, "auto") else []) + [
        key for key, value in pairs if key != "data.time_unit" and (key, value) != ("data.format", "auto")]
    if reading:
        raise ConfigError(f"{', '.join(reading)}: how to read --input; --dataset {args.dataset} is read in its own "
                          f"format, which would ignore {'it' if len(reading) == 1 else 'them'}: leave "
                          f"{'it' if len(reading) == 1 else 'them'} out, or split a file with --input")


def _split_left(args: argparse.Namespace) -> Callable[[], str]:
    """What a stopped `data split` left in ``--out``: its files are moved into place as one set, split_report.json
    last (:func:`~twotower.utils.atomic.atomic_write_set`), so a new report says the new split is there."""
    out = Path(args.out)
    report = out / "split_report.json"
    before = path_identity(report)

    def said() -> str:
        if path_identity(report) not in (None, before):
            return f"the split was written into {out} before it stopped: it holds this command's files" + (
                " (the previous split was replaced)" if before is not None else "")
        if before is not None:
            return (f"it stopped before the split was written into {out}; the previous split there is kept, intact, "
                    "as it was; run the command again to replace it")
        return f"it stopped before the split was written into {out}, so no file was saved; run the command again"

    return said


@sigterm_says(_split_left)  # SIGTERM mid-split: its temporaries removed, one line on what --out holds, status 143
def cmd_data_split(args: argparse.Namespace) -> int:
    from twotower.config import DataConfig, TrainConfig
    from twotower.data.readers import read_interactions
    from twotower.data.splits import global_time_split
    from twotower.pipeline.sources import _read_counts, _split, column_map
    from twotower.utils.atomic import atomic_write_set
    from twotower.utils.folder_lock import exclusive_writer
    from twotower.utils.progress import heartbeat
    from twotower.utils.whole_numbers import whole_numbers_as_integers

    _check_one_input(args)
    _check_method_flags(args)
    defaults = DataConfig()
    args.ratios = ",".join(map(str, defaults.ratios)) if args.ratios is None else args.ratios
    args.n = defaults.leave_n if args.n is None else args.n
    args.seed = TrainConfig.seed if args.seed is None else args.seed
    items = split_comma_list(args.ratios, "--ratios")  # `0.8,,0.1`: refused naming the empty item
    try:
        ratios = tuple(float(r) for r in items)
    except ValueError:
        raise ConfigError(f"--ratios must be three comma-separated numbers, got {args.ratios!r}") from None
    out = check_output_dir(args.out)
    # RUN/data holds the split the run was trained and is evaluated on: replaced, `evaluate` scored another test set
    owner = next(filter(None, (artefact_owning(out.absolute() / f"{n}.csv") for n in ("train", "valid", "test"))), None)
    if owner is not None:
        raise ConfigError(f"--out {out}: holds the split of the {owner}, which evaluate and --resume read; "
                          "choose another folder")
    if args.input:  # `--input data/train.csv --out data` replaced the user's file by its own train part, silently
        target = next((out / f"{n}.csv" for n in ("train", "valid", "test")
                       if (out / f"{n}.csv").resolve() == Path(args.input).resolve()), None)
        if target is not None:
            raise ConfigError(f"--input {args.input} is the file this split writes as {target}: it would be "
                              f"replaced by one part of itself; split into another --out")
    reading = _split_reading(args)
    valid_start, test_start = _check_split_flags(args)
    from twotower.cli.flags import check_range

    check_range("--n", args.n, 1)  # DataConfig's bound, said as `--k 0` is, with the value
    try:  # before the data is read; a bad value is named by the flag the user typed, not the setting
        cfg = DataConfig(split=args.method, ratios=ratios, leave_n=args.n,  # type: ignore[arg-type]
                         valid_start=valid_start, test_start=test_start, time_unit=reading.time_unit)
    except ConfigError as e:
        flags = {"data.leave_n": "--n", "data.ratios": "--ratios", "data.split": "--method",
                 "data.valid_start": "--valid-start", "data.test_start": "--test-start"}
        name, _, rest = str(e).partition(":")
        raise ConfigError(f"{flags.get(name, name)}:{rest}") from e
    items = users = None
    if args.dataset:
        from twotower.data.movielens import fetch_movielens_100k, load_movielens_100k

        ml = load_movielens_100k(fetch_movielens_100k())
        df, items, users = ml.interactions, ml.items, ml.users
    elif args.input:
        # a line before each long step (reading, sorting and splitting, formatting each file): a 10M-row split
        # said nothing for a minute between "read" and "wrote", on a terminal and in a log alike
        if os.path.isfile(args.input):  # a missing file is for the reader to name, without a line before it
            log.info("data split: reading %s (%.0f MB)", args.input, os.path.getsize(args.input) / 1e6)
        # read as `train` reads it (data.*_col, data.format); the frame has the canonical column names
        df = read_interactions(args.input, column_map(reading), format=reading.format, encoding=reading.encoding,
                               time_unit=reading.time_unit, log_every_s=TrainConfig.log_every_s)
    else:
        raise ConfigError("data split needs --input FILE or --dataset movielens-100k")
    log.info("data split: sorting %d rows by user, time and item, then splitting them (--method %s)", len(df),
             args.method)
    # one sort of every row, with nothing to count: 20M rows took 97-107 s with no line after this one
    with heartbeat(log, "data split: sorting and splitting", TrainConfig.log_every_s):
        if args.method == "time":  # errors and warnings name the flags the user typed
            # a part the cut-offs ask for coming out empty is refused before anything is written: empty valid/test
            # files replaced a good earlier split in --out with only a warning (valid_start == test_start asks for none)
            split = global_time_split(df, valid_start, test_start, names=("--valid-start", "--test-start"),
                                      time_unit=reading.time_unit, refuse_empty=True)
        else:
            split = _split(df, cfg, args.seed)
    # the input's rows the reader dropped (duplicates): without them the report's rows summed to fewer than the
    # file held, and nothing in it said why (train's run.json has the same counts under "read")
    read = _read_counts(df) if "report" in df.attrs else {}
    report = {**split.report, "read": read} if read else split.report
    report["input"] = _split_input(args, reading)
    # where each row's rating came from: `"input": {"rating_col": "rating"}` (the setting) read as if that column had
    # been read where the file had none and every row was given 1.0 (what the split files then hold). Beside "input",
    # whose keys besides path and sha256 are data.* settings that make the split again
    for key in ("rating_source", "timestamp_source"):
        if isinstance(source := df.attrs.get("report", {}).get(key), str):
            report[key] = source
    # one set: an interrupted split must not leave this split's train.csv beside an earlier one's test.csv
    # the item and user tables' whole numbers as integers (year 1995, not 1995.0: pandas reads a column with an empty
    # cell as float), missing ones empty, as the JSON answers give them (utils/whole_numbers.py)
    items, users = (None if t is None else whole_numbers_as_integers(t) for t in (items, users))
    tables = {"train": split.train, "valid": split.valid, "test": split.test, "items": items, "users": users}
    files = {}
    # each file's digest and rows: a folder whose files were replaced one at a time (a kill -9 between the renames)
    # or edited since is told from this split (`train` warns: twotower.data.splits.warn_split_mismatch)
    report["files"] = {}
    for name, table in tables.items():
        if table is not None:
            files[out / f"{name}.csv"] = _csv_pieces(f"{name}.csv", table, report["files"])
    files[out / "split_report.json"] = _report_piece(report)
    log.info("data split: saving %d files into %s", len(files), out)
    earlier_split = (out / "split_report.json").is_file()
    # one writer at a time: two splits into one folder at once could interleave their moves (this one's train.csv
    # beside the other's test.csv); each set is whole, and the second is refused rather than mixed in
    with exclusive_writer(out, "twotower data split", "wait for it to finish, or split into another --out"):
        atomic_write_set(files)
    extra = [n for n, t in (("items.csv", items), ("users.csv", users)) if t is not None] + ["split_report.json"]
    # an earlier --dataset split's tables beside this split's files read as its own (train --items out/items.csv);
    # they may be the user's, so they are named, not removed
    left = [n for n, t in (("items.csv", items), ("users.csv", users)) if t is None and (out / n).is_file()]
    if left and earlier_split:
        log.warning("%s held an earlier split: %s there %s not from this split (of %s, which has no item or user "
                    "table), so `train --items/--users` would read another data set's; remove %s if the earlier "
                    "split wrote %s, or split into a new --out", out, " and ".join(left),
                    "is" if len(left) == 1 else "are", args.input, *(("it", "it") if len(left) == 1 else ("them", "them")))
    dropped = read.get("rows_read", 0) - read.get("rows", 0)
    print(f"wrote {out}/train.csv ({len(split.train)} rows), valid.csv ({len(split.valid)}), "
          f"test.csv ({len(split.test)}), {', '.join(extra)}"
          + (f"; {dropped} duplicate row(s) of the input dropped ({read['duplicates_dropped']} exact, "
             f"{read['conflicting_duplicates_dropped']} with another rating)" if dropped else ""))
    return 0


def _csv_pieces(name: str, table: Any, listed: dict[str, Any]) -> Iterator[bytes]:
    """The file's bytes a block of rows at a time, its sha256 and rows put in ``listed`` once the last is written:
    the whole text of a 16M-row train.csv, held with the other files' until all were written, took `data split`
    of 20M rows to 7.7 GB where reading and splitting them took 1.7 GB."""
    from twotower.utils.csv_text import frame_to_csv_blocks

    log.info("data split: writing %s (%d rows)", name, len(table))
    digest = hashlib.sha256()
    for text in frame_to_csv_blocks(table):
        data = text.encode("utf-8")
        digest.update(data)
        yield data
    listed[name] = {"sha256": digest.hexdigest(), "rows": len(table)}


def _report_piece(report: dict[str, Any]) -> Iterator[bytes]:
    """split_report.json, made when its turn to be written comes: after the files whose digests it lists."""
    from twotower.utils.atomic import json_text

    yield json_text(report).encode("utf-8")


def _maybe_int(v: str | None):
    if v is None:
        return None
    try:
        return int(v)
    except ValueError:
        return v
