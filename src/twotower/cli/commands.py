"""Implementations of the core subcommands (imported lazily by main)."""
from __future__ import annotations

import argparse
import contextlib
import errno
import json
import logging
import os
import signal
import sys
import threading
import time
import unicodedata
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from twotower.cli.id_lists import parse_id_list
from twotower.cli.paths import (
    STDOUT,
    artefact_owning,
    check_output_dir,
    check_output_file,
    is_file,
    write_output_text,
)
from twotower.errors import ConfigError, NotFoundError

if TYPE_CHECKING:  # torch is imported only by the commands that train
    from twotower.training.trainer import TrainResult

log = logging.getLogger("twotower")


def printable(value: Any) -> str:
    """``str(value)`` with control characters and line breaks written as escapes (``\\n``, ``\\x1b``): a
    catalogue's title or genres printed raw split a list's line in two and sent terminal escapes through."""
    text = str(value)
    if text.isprintable():
        return text
    return "".join(c.encode("unicode_escape").decode("ascii") if unicodedata.category(c) in ("Cc", "Zl", "Zp")
                   else c for c in text)


@contextlib.contextmanager
def flag_named(flag: str) -> Iterator[None]:
    """An unknown id raised inside names the flag it came from: ``--history: unknown item '9' (...)``."""
    try:
        yield
    except NotFoundError as e:
        if not e.message.startswith(flag + ": "):
            e.message = f"{flag}: {e.message}"
        parts = str(e.id).replace(";", " ").split() if isinstance(e.id, str) else []
        if flag in ("--history", "--users") and len(parts) > 1:  # `--history '50 181'` or '50;181': one unknown id
            e.message += f"; {flag} takes a comma list, e.g. {flag} {','.join(parts[:3])}"
        raise


def _threads(args: argparse.Namespace) -> None:
    from twotower.utils.runtime import set_threads, threads_from_env

    set_threads(getattr(args, "threads", None) or threads_from_env())


def resolve_train_config(args: argparse.Namespace, *, need_data: bool = True):
    from twotower.config import load_config

    overrides = list(args.overrides or []) + list(getattr(args, "set_overrides", None) or [])
    flags: list[tuple[str, str, Any]] = []  # (flag, setting, value) of the shortcut flags given
    for flag, key in (("train", "data.train"), ("valid", "data.valid"), ("test", "data.test"), ("data", "data.path"),
                      ("dataset", "data.dataset"), ("items", "data.items"), ("users", "data.users"),
                      ("epochs", "train.epochs"), ("threads", "train.threads")):
        value = getattr(args, flag, None)
        if value is not None:
            flags.append((f"--{flag}", key, value))
    if args.no_progress:  # `--no-progress train.progress=true` kept the flag's false without a word
        flags.append(("--no-progress", "train.progress", False))
    _refuse_flag_override_clash(flags, overrides)
    overrides += [f"{key}={json.dumps(value)}" for _, key, value in flags]
    cfg = load_config(args.config, overrides)
    if need_data and cfg.data.train is None and cfg.data.path is None and cfg.data.dataset is None:
        raise ConfigError("no training data: pass --train FILE (and --valid FILE), --data FILE, or --dataset movielens-100k")
    return cfg


def _refuse_flag_override_clash(flags: list[tuple[str, str, Any]], overrides: list[str]) -> None:
    """A shortcut flag and a dotted override of the same setting with another value: which one wins is a guess.

    `--epochs 5 train.epochs=3` trained 5 epochs whatever the order, without a word about the 3."""
    from twotower.config import _coerce, apply_overrides

    given = apply_overrides({}, overrides)  # parsed as load_config parses them (3, "x.csv", null)
    for flag, key, value in flags:
        node: Any = given
        for part in key.split("."):
            node = node.get(part, _ABSENT) if isinstance(node, dict) else _ABSENT
        if isinstance(value, bool) and node is not _ABSENT:  # train.progress=on / yes / 1 read as load_config reads them
            with contextlib.suppress(ConfigError):
                node = _coerce(node, bool, key)
        if node is not _ABSENT and node != value:
            given_flag = flag if isinstance(value, bool) else f"{flag} {value}"
            raise ConfigError(f"{given_flag} and the override {key}={json.dumps(node)} set the same setting to "
                              f"different values; give one of them")


_ABSENT = object()


def print_eval_table(rows: list[dict], ks: tuple[int, ...], title: str, protocol: str | None = None) -> None:
    """One table: a row per (model, k), a column per metric, fit seconds last; ``protocol`` the footer."""
    from twotower.evaluation.table import format_table
    from twotower.pipeline.experiment import PROTOCOL_TEXT

    from twotower.cli.main import PLOT_METRICS  # the table's columns are the metrics --plot may draw

    metrics = list(PLOT_METRICS)
    long_rows = []
    for k in ks:
        for r in rows:
            if f"Recall@{k}" not in r:
                continue
            long_rows.append({"model": r["model"], "k": k, **{m: r.get(f"{m}@{k}") for m in metrics}, "fit_s": r.get("fit_s")})
    print(format_table(long_rows, ["model", "k", *metrics, "fit_s"], title=title, formats={"fit_s": ".1f", "MeanPop": ".1f"}))
    coverage = users_line(rows)
    if coverage:  # under the table, above the protocol footer (the last line)
        print(coverage)
    print(protocol or PROTOCOL_TEXT)


def users_line(rows: list[dict]) -> str | None:
    """How many of the held-out file's users the figures average over, and what became of the others.

    On sparse data many held-out rows name an item that never occurs in train (no ID-table model can rank it);
    those users are skipped, so the metrics are over fewer users than the file has, which the table must say.
    """
    first = rows[0] if rows else {}
    held, done = first.get("users_held_out"), first.get("users_evaluated")
    if held is None or done is None:
        return None
    if done >= held:
        return f"users: all {held:,} held-out users evaluated"
    return (f"users: {done:,} of {held:,} held-out users evaluated; the other {held - done:,} are skipped, not counted as "
            f"misses: their held-out items (or they) never occur in train, so no model here can rank them (as misses, "
            f"every per-user figure would scale by {done / held:.4f}; Coverage and MeanPop would not)")


def train_summary(result: TrainResult, metric: str, out: Path) -> str:
    """The line that ends `twotower train`: what the best epoch was chosen on.

    Without validation data the trainer selects on the negated training loss (it maximises), so that
    number is printed as the loss it is, not as a validation metric.
    """
    on_valid = any(f"valid_{metric}" in row for row in result.history)
    best = f"valid {metric} {result.best_metric:.4f}" if on_valid else f"train loss {-result.best_metric:.4f}"
    # an early-stopped or time-budgeted fit says so: "4 epochs" alone reads as a finished schedule
    why = f", stopped by {result.stopped}" if result.stopped else ""
    # after --resume the seconds are this command's: "4 epochs, 7.2s" read as 4 epochs in 7.2 s when 2 ran
    done = result.resumed_after
    took = (f"resumed after epoch {done}: {result.epochs_run - done} in {result.seconds:.1f}s" if done
            else f"{result.seconds:.1f}s")
    n = result.epochs_run
    return (f"trained: best {best} at epoch {result.best_epoch} ({n} epoch{'' if n == 1 else 's'}{why}, {took}); "
            f"run folder {out}")


def item_item_summary(result: TrainResult, metric: str) -> str | None:
    """The line after the summary when the item-item term was fitted (model.item_item), else None:
    ``"item-item term: weight 0.3 chosen on valid NDCG@10 (0.2178; the towers alone 0.2033)"``."""
    info = result.item_item
    if not info:
        return None
    alone = next((row[metric] for row in info["valid"] if row["weight"] == 0.0), None)
    if not info["weight"]:
        return f"item-item term: none (the towers alone validate best on {metric})"
    return (f"item-item term: weight {info['weight']:g} chosen on valid {metric} ({result.final_metric:.4f}"
            + (f"; the towers alone {alone:.4f})" if alone is not None else ")"))


def cmd_train(args: argparse.Namespace) -> int:
    from twotower.pipeline.run import train_run
    from twotower.training import distributed as tdist

    if getattr(args, "print_config", False):  # what a config file and overrides add up to, before a long run
        from twotower.config import config_to_dict

        print(json.dumps(config_to_dict(resolve_train_config(args, need_data=False)), indent=2))
        return 0
    out = check_output_dir(args.out)  # before the data is read: a bad --out is one line, not a late traceback
    cfg = resolve_train_config(args)
    from twotower.cli.search_cmd import _encoder_env

    _encoder_env(args)  # --encoder-backend / --encoder-threads for the item text embeddings, checked before the data
    item = cfg.model.item
    given = [f for f, v in (("--encoder-backend", args.encoder_backend), ("--encoder-threads", args.encoder_threads))
             if v is not None]
    if given and not (item.text_embeddings or item.dual_head):  # the only text encoder training loads
        log.warning("%s has no effect: the item tower reads no text (model.item.text_embeddings=true or "
                    "model.item.dual_head=true embeds the item titles)", " and ".join(given))
    started = time.time()

    def left(out: Path) -> str:
        return interrupted_training(out, resumed=args.resume, since=started, checkpointing=cfg.train.checkpoint)

    with terminate_as_interrupt(), _run_folder_lock(out):
        try:
            run, result, prep = train_run(cfg, out, resume=args.resume)
            main = tdist.is_main()
        except KeyboardInterrupt as e:
            if tdist.is_main():  # under torchrun every rank gets the signal; one line tells what the run holds
                print(f"{_stopped_by(e)}: {left(out)}{_peer_failure_hint(e)}", file=sys.stderr)
            return _interrupt_status(e)
        except OSError as e:
            from twotower.utils.atomic import storage_error_line

            line = storage_error_line(e)
            if line is None or e.errno == errno.EROFS or not tdist.is_main():
                raise
            # the disk filled mid-run: the epochs checkpointed before it are not lost, and the user should know
            print(f"{line}; free space there, then: {left(out)}", file=sys.stderr)
            return 2
        finally:
            tdist.cleanup()  # under torchrun: leave the group; rank 0 alone reports and evaluates
        if not main:
            return 0
        print(train_summary(result, cfg.eval.select_metric, out))
        if (line := item_item_summary(result, cfg.eval.select_metric)) is not None:
            print(line)
        try:
            _evaluate_trained(args, cfg, run, prep, out)
        except KeyboardInterrupt as e:
            print(f"{_stopped_by(e)} during the test evaluation; the trained run in {out} is complete: "
                  f"`twotower evaluate --run {out}` scores it", file=sys.stderr)
            return _interrupt_status(e)
    return 0


def _run_folder_lock(out: Path) -> contextlib.AbstractContextManager[None]:
    """The run folder's writer lock, held over training and the closing evaluation: released in between, a
    second `train --out` could replace the run before this one wrote its metrics.json beside the new run.
    Under torchrun rank 0 alone writes, and the group is not joined yet, so the launcher's RANK says which."""
    from twotower.pipeline.run import RUN_WRITER
    from twotower.utils.folder_lock import exclusive_writer

    if os.environ.get("RANK", "0") not in ("", "0"):
        return contextlib.nullcontext()
    return exclusive_writer(out, *RUN_WRITER)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the process is, so that it unwinds like Ctrl-C."""


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM (a scheduler's preemption, `timeout`, `kill`) stops training as Ctrl-C does.

    By default SIGTERM ends Python on the spot: the temporary files of an atomic write are left behind and
    nothing says that the checkpoint can be resumed. Only the main thread may set a handler, and one set by
    someone else (an embedding application) is kept.
    """
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) != signal.SIG_DFL:
        yield
        return

    def raise_terminated(signum: int, frame: object) -> None:
        raise Terminated

    signal.signal(signal.SIGTERM, raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _stopped_by(e: KeyboardInterrupt) -> str:
    return "terminated (SIGTERM)" if isinstance(e, Terminated) else "interrupted"


def _peer_failure_hint(e: KeyboardInterrupt) -> str:
    """Under torchrun, what rank 0's SIGTERM may mean besides a scheduler's: torchrun stops the other ranks this
    way when one fails, and rank 0's line alone ("no epoch was checkpointed ...; run the command again") read as
    the cause and sent the user to repeat the failing command."""
    from twotower.training import distributed as tdist

    if not isinstance(e, Terminated) or tdist.world_size() < 2:
        return ""
    return ("\n(under torchrun a SIGTERM also stops every rank when one of them fails: a `[rank N] error:` line, "
            "printed above or on that rank's node, then says why)")


def _interrupt_status(e: KeyboardInterrupt) -> int:
    """The shell's status for death by the signal (128 + its number), which schedulers read."""
    return 128 + (signal.SIGTERM if isinstance(e, Terminated) else signal.SIGINT)


def interrupted_training(out: Path, *, resumed: bool, since: float, checkpointing: bool = True) -> str:
    """What an interrupted `twotower train` left in ``out`` and what to run next (Ctrl-C should not leave
    the user guessing whether an hour of epochs is lost). ``checkpointing``: ``train.checkpoint``."""
    from twotower.utils.atomic import read_json

    if not checkpointing:
        # it said "no epoch was checkpointed ... run the command again", as if every epoch were lost: the best
        # weights validated so far are written as they come (model.safetensors), and evaluate/recommend read them
        weights = out / "model.safetensors"
        try:
            kept = weights.is_file() and weights.stat().st_mtime >= since - 2.0
        except OSError:
            kept = False
        saved = (f"{weights} holds the best weights validated so far (log.jsonl lists the epochs), which "
                 f"`twotower evaluate --run {out}` and `recommend` read" if kept else "no epoch was saved")
        return (f"{saved}; train.checkpoint=false, so there is no checkpoint to --resume from (leave "
                "train.checkpoint at true, the default, to continue an interrupted run)")

    path = out / "checkpoint" / "state.json"
    try:
        state = read_json(path) if path.is_file() else None
        # else an earlier run's checkpoint, not yet replaced (2 s: filesystems that keep whole-second mtimes)
        ours = resumed or path.stat().st_mtime >= since - 2.0
    except (OSError, ValueError):  # IntegrityError is a ValueError: a damaged state says nothing to resume
        state, ours = None, False
    if isinstance(state, dict) and not ours:
        return f"training had not started; {out} still holds the earlier run"
    if isinstance(state, dict) and isinstance(state.get("epoch"), int):
        best = state.get("best_epoch")
        return (f"{path.parent} holds epoch {state['epoch']}" + (f" (best so far: epoch {best})" if best else "")
                + "; run the same command with --resume to continue from there (without --resume it starts over)")
    return "no epoch was checkpointed, so there is nothing to resume; run the command again"


#: The cut-offs of eval.ks that train's closing table shows (all of eval.ks when it has none of them), to keep
#: it short; metrics.json and `twotower evaluate` hold every k.
TRAIN_TABLE_KS = (10, 20)


def _evaluate_trained(args: argparse.Namespace, cfg, run, prep, out: Path) -> None:  # noqa: ANN001
    """`twotower train`'s closing test evaluation against the baselines (metrics.json, eval.txt)."""
    from twotower.pipeline.evaluate_run import evaluate_run
    from twotower.utils.atomic import atomic_write_json, atomic_write_text

    if not args.no_eval and prep.test is not None:
        ks = cfg.eval.ks
        rows = evaluate_run(run, baselines=cfg.eval.baselines, ks=ks, select_metric=cfg.eval.select_metric)
        atomic_write_json(out / "metrics.json", {"test": rows})
        import io
        import contextlib

        buf = io.StringIO()
        shown = tuple(k for k in ks if k in TRAIN_TABLE_KS) or ks
        with contextlib.redirect_stdout(buf):
            print_eval_table(rows, shown, "test (full catalogue)")
            left = [k for k in ks if k not in shown]
            if left:  # said, not silently dropped: eval.ks=[10, 50] printed k=10 alone
                print(f"k={','.join(map(str, left))} (eval.ks) are in {out / 'metrics.json'}; "
                      f"`twotower evaluate --run {out}` prints every k")
        atomic_write_text(out / "eval.txt", buf.getvalue())
        print(buf.getvalue())
        train_file, valid_file = getattr(args, "train", None), getattr(args, "valid", None)
        loo = bool(train_file and valid_file and _leave_last_split(train_file))
        if not loo and cfg.data.train is None and cfg.data.path is not None and cfg.data.split == "leave_last":
            # `train --data FILE data.split=leave_last` split here: its files are the run's copy of the split
            # (the hint was only printed for `data split`'s files, so this run's reader was not told)
            train_file, valid_file, loo = out / "data" / "train.csv", out / "data" / "valid.csv", True
        if cfg.model.user.history != "none" and loo:
            # the table above read each test user's train history only; the leave-one-out protocol's test input
            # is train + valid, and a reader of this table was not told how to get it
            print(f"test users read their train history only (the protocol line); for the leave-one-out test input "
                  f"(train + valid): `twotower evaluate --run {out} --history-from {train_file} {valid_file}`")


def _leave_last_split(train_file: str) -> bool:
    """Was ``train_file`` written by `twotower data split --method leave_last` (its split_report.json says so)?"""
    report = Path(train_file).parent / "split_report.json"
    try:
        return json.loads(report.read_text(encoding="utf-8")).get("method") == "leave_last_n_out"
    except (OSError, ValueError, AttributeError):
        return False


def cmd_evaluate(args: argparse.Namespace) -> int:
    from twotower.pipeline.artifacts import TrainedRun
    from twotower.pipeline.evaluate_run import evaluate_run

    _threads(args)
    ks = baselines = None  # not given: the run's own eval.ks / eval.baselines (evaluate_run reads them)
    if args.ks is not None:
        try:
            ks = tuple(int(k) for k in args.ks.split(",") if k)
        except ValueError:
            raise ConfigError(f"--ks must be comma-separated integers, got {args.ks!r}") from None
        if not ks or min(ks) < 1:  # named as the flag, before the run loads (was EvalProtocol.ks, after it)
            raise ConfigError(f"--ks must hold positive integers such as 10,20, got {args.ks!r}")
        from twotower.config import MAX_K

        if max(ks) > MAX_K:  # the top-k lists are padded to k: a huge one was a numpy ValueError after the run loaded
            raise ConfigError(f"--ks: at most {MAX_K}, got {max(ks)}")
        if len(set(ks)) < len(ks):  # was "EvalProtocol.ks has duplicates", after the run had loaded
            raise ConfigError(f"--ks: {args.ks!r} names a cut-off twice")
    if args.baselines is not None:
        baselines = tuple(b.strip() for b in args.baselines.split(",") if b.strip())
        for b in baselines:
            if b not in ("popularity", "ease", "itemknn"):
                raise ConfigError(f"--baselines: unknown {b!r}; choose from popularity, ease, itemknn")
        if len(set(baselines)) < len(baselines):  # as --ks refuses a repeated k: a repeat would fit and print it twice
            raise ConfigError(f"--baselines: {args.baselines!r} names a baseline twice")
    test_file = getattr(args, "test", None)
    if test_file is not None and args.split != "test":
        raise ConfigError("--test FILE is the test split: leave --split at test")
    if args.ease_max_items is not None and args.ease_max_items < 1:
        raise ConfigError(f"--ease-max-items must be >= 1, got {args.ease_max_items}")
    low_rank_max_items = getattr(args, "ease_low_rank_max_items", None)
    if low_rank_max_items is not None and low_rank_max_items < 1:
        raise ConfigError(f"--ease-low-rank-max-items must be >= 1, got {low_rank_max_items}")
    csv_out, plot_out = getattr(args, "csv", None), getattr(args, "plot", None)
    if csv_out is not None:  # checked before the evaluation runs: a bad path is one line, not a late traceback
        check_output_file(csv_out, "--csv")
    if plot_out is not None:
        if plot_out == STDOUT:
            raise ConfigError("--plot: a PNG needs a file name, not -")
        check_output_file(plot_out, "--plot")
    inputs = {"--test": [test_file], "--history-from": getattr(args, "history_from", None) or []}
    for out, flag in ((csv_out, "--csv"), (plot_out, "--plot")):
        if out is not None:
            _check_out_is_no_input(out, inputs, flag)
    run = TrainedRun.load(args.run)
    history_from = getattr(args, "history_from", None)
    rows = evaluate_run(run, split=args.split, baselines=baselines, ks=ks, history_from=history_from,
                        test_file=test_file, ease_max_items=args.ease_max_items,
                        ease_low_rank_max_items=low_rank_max_items)
    source = f"; input history from {' '.join(history_from)}" if history_from else ""
    held_out = f"{args.split} {test_file}" if test_file else args.split
    if csv_out is not None:
        where = write_output_text(csv_out, rows_to_csv(rows))
        print(f"wrote {len(rows)} rows to {where}", file=sys.stderr)
    if plot_out is not None:
        from twotower.evaluation.plots import plot_recall_at_k

        metric = getattr(args, "plot_metric", "Recall")
        plot_recall_at_k({r["model"]: r for r in rows}, plot_out, metric,
                         title=f"{metric}@k, {held_out} (full catalogue), run {args.run}")
        print(f"wrote {metric}@k of {len(rows)} models to {plot_out}", file=sys.stderr)
    if csv_out == STDOUT:  # stdout holds the CSV alone
        return 0
    if args.json:
        print(json.dumps(rows, indent=2, default=float))
    else:
        from twotower.pipeline.experiment import protocol_text

        print_eval_table(rows, ks if ks is not None else run.config.eval.ks,
                         f"{held_out} (full catalogue), run {args.run}{source}",
                         protocol_text(history_from, args.split))
    return 0


def rows_to_csv(rows: list[dict]) -> str:
    """Evaluation rows as CSV: one line per model, the JSON rows' keys as columns (first seen first), so a row
    missing a key (a baseline without fit_s) leaves its cell empty instead of shifting the others."""
    import csv
    import io

    columns = list(dict.fromkeys(k for r in rows for k in r))
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow({k: (float(v) if hasattr(v, "dtype") else v) for k, v in r.items()})
    return buf.getvalue()


def _parse_user_list(run, spec: str, histories=None) -> list[int]:
    import numpy as np

    if spec == "all":  # every user with an input history (the training one unless --history-from)
        if histories is not None:
            return list(histories.users())
        return list(np.flatnonzero(run.history.lengths() > 0))
    p = Path(spec)
    try:
        is_path = p.exists()
    except OSError:  # a comma list of a thousand ids is no file name (ENAMETOOLONG): it crashed with a traceback
        is_path = False
    if is_path:
        return _user_rows_from_file(run, p)
    if "/" in spec or "\\" in spec or p.suffix.lower() in (".csv", ".tsv", ".txt", ".parquet", ".jsonl", ".json"):
        raise ConfigError(f"--users {spec}: no such file (give 'all', a comma list of user ids, or a file with a "
                          "user column)")
    ids = parse_id_list(spec, "--users")
    unique = list(dict.fromkeys(ids))  # an id given twice: one list per user
    if len(unique) < len(ids):
        log.info("--users: %d ids, %d distinct: one list per user", len(ids), len(unique))
    with flag_named("--users"):
        return [run.user_row(u) for u in unique]


def _user_rows_from_file(run, path: Path) -> list[int]:  # noqa: ANN001 - TrainedRun
    """The run's rows of the users a ``--users FILE`` lists, once each, in file order.

    Ids are text, as in every file the run reads: read as numbers, ``007`` became user 7 (another user's list,
    silently) and a blank cell turned every id of the column into ``1.0``. An unknown id names the file, its row
    and the column, as a bad cell of any input file does.
    """
    from twotower.data.columns import ids_to_str
    from twotower.data.readers import read_table_numbered
    from twotower.errors import DataError
    from twotower.pipeline.run_inputs import run_file_encoding

    # the run's own user column first (an interactions file of this run), then the canonical one
    names = list(dict.fromkeys((run.config.data.user_col, "user_id")))
    df, rows = read_table_numbered(path, dtype={c: str for c in names}, literal=names,
                                   encoding=run_file_encoding(run, path))  # as the run read its files
    col = next((c for c in names if c in df.columns), None)
    if col is None:
        raise DataError(f"needs a {' or '.join(map(repr, names))} column with the run's user ids; columns present: "
                        f"{list(map(str, df.columns))}; rename the one that holds the user ids to {names[0]!r}",
                        file=str(path), column=names[0])
    ids = ids_to_str(df[col], file=str(path), column=col, rows=rows).tolist()
    first: dict[str, int] = {}  # each id's first position, in file order
    for pos, u in enumerate(ids):
        first.setdefault(u, pos)
    if len(first) < len(ids):  # an interactions file lists a user once per row: one list per user
        log.info("--users: %d ids, %d distinct: one list per user", len(ids), len(first))
    out = []
    for u, pos in first.items():
        try:
            out.append(run.user_row(u))
        except NotFoundError as e:
            raise DataError(e.message, file=str(path), row=rows.number(pos), column=col, unit=rows.unit) from None
    return out


def parse_user_features(args: argparse.Namespace) -> dict[str, Any] | None:
    """``--user-features JSON`` (with ``--history``: a new user) as a dict, or None when not given."""
    if getattr(args, "user_features", None) is None:
        return None
    if args.history is None:
        raise ConfigError("--user-features describes a new user: give it with --history (a known user is read "
                          "with the features it was trained with)")
    try:
        features = json.loads(args.user_features)
    except json.JSONDecodeError as e:
        raise ConfigError(f"--user-features: not JSON ({e.msg} at character {e.pos}); e.g. "
                          '\'{"age": 25, "gender": "F"}\'') from None
    if not isinstance(features, dict):
        raise ConfigError(f"--user-features: a JSON object of column -> value, got {type(features).__name__}")
    return features


def cmd_recommend(args: argparse.Namespace) -> int:
    import numpy as np

    from twotower.pipeline.artifacts import TrainedRun
    from twotower.pipeline.recommend import (
        exclusions_from_files,
        open_run_index,
        recommend_history,
        recommend_users,
        results_to_frame,
        results_to_items,
    )
    from twotower.pipeline.results_csv import write_results_csv
    _threads(args)
    if args.out and not args.users:
        # --user/--history print their list: --out used to be ignored without a word, leaving no file
        one = f"--users {args.user}" if args.user is not None else "--users ID"
        raise ConfigError(f"--out writes the CSV of --users; for one user write `{one} --out {args.out}`, "
                          "or --json for the printed list")
    if args.out:
        from twotower.cli.provenance import record_path

        inputs = {"--users": [args.users], "--exclude": args.exclude or [],
                  "--history-from": getattr(args, "history_from", None) or []}
        check_output_file(args.out)
        _check_out_is_no_input(args.out, inputs)
        record = record_path(args.out)  # FILE.json beside it: what produced the recommendations
        if record is not None:
            check_output_file(record, "--out's record")
            _check_out_is_no_input(os.fspath(record), inputs, "--out's record")
    if args.history is not None and not parse_id_list(args.history, "--history"):
        # the same rule as HTTP (an empty history is a 422 there)
        raise ConfigError("--history: no item ids given; pass at least one, e.g. --history 50,181")
    # argument checks before the (slow) run load: a typo is one line at once
    from twotower.serving.settings import ServiceSettings  # the service's default list length, so both agree

    k = args.k if args.k is not None else (100 if args.users else ServiceSettings.default_k)
    from twotower.config import MAX_K

    if not 1 <= k <= MAX_K:
        raise ConfigError(f"--k must be between 1 and {MAX_K}, got {k}")
    if getattr(args, "history_from", None) and args.history is not None:
        raise ConfigError("--history-from reads known users' histories from files; --history describes one new "
                          "user: use one or the other")
    if args.exclude and args.history is not None:
        # the files hold (user, item) pairs of known users: none of them is the new user, so nothing would be
        # excluded, silently
        raise ConfigError("--exclude reads known users' items from files; --history describes one new user, whose "
                          "history is excluded already (--no-exclude-seen keeps it): drop --exclude")
    features = parse_user_features(args)
    run = TrainedRun.load(args.run)
    index, used = open_run_index(run, exact=getattr(args, "exact", False))  # the index `twotower serve` answers from
    print(f"ranking with {used}", file=sys.stderr)
    histories = None
    if getattr(args, "history_from", None):
        from twotower.pipeline.histories import exclude_histories, read_input_histories

        histories = read_input_histories(run, args.history_from)
    if args.history is not None:
        hist = parse_id_list(args.history, "--history")
        with flag_named("--history"):
            res = recommend_history(run, hist, k, exclude_seen=not args.no_exclude_seen, index=index,
                                    user_features=features)
        _say_shortfall(res, k, ["a new user"])
        items = results_to_items(run, res)
        _print_items(items, args.json, f"recommendations for a new user with {len(hist)} history items", k)
        return 0
    exclude = exclusions_from_files(run, args.exclude or [], include_seen=not args.no_exclude_seen)
    if histories is not None and not args.no_exclude_seen:
        exclude = exclude_histories(exclude, histories)  # the input history counts as seen
    if args.user is not None:
        with flag_named("--user"):
            try:
                row = run.user_row(args.user)
            except NotFoundError as e:  # e.g. a user who first appears after training (in the test split)
                if run.model.user_tower.id_emb is None and run.model.user_tower.uses_history:
                    e.message += ("; a user not in the run's training data is served from their items: "
                                  "--history ITEM,ITEM,... (oldest first)")
                raise
        _say_no_input_history(run, [row], histories)
        res = recommend_users(run, np.array([row]), k, exclude, histories=histories, index=index)
        _say_shortfall(res, k, [f"user {args.user}"])
        _print_items(results_to_items(run, res), args.json, f"top {k} for user {args.user}", k)
        return 0
    rows = np.asarray(_parse_user_list(run, args.users, histories), np.int64)
    _say_no_input_history(run, rows, histories)
    train_cfg = run.config.train  # the run's own progress settings
    res = recommend_users(run, rows, k, exclude, histories=histories, index=index,
                          log_every_s=train_cfg.log_every_s if train_cfg.progress else None)
    _say_shortfall(res, k, [f"user {run.user_vocab.id_at(int(r))}" for r in rows])
    if args.json and not args.out:
        print(results_to_frame(run, rows, res).to_json(orient="records"))
        return 0
    # written block by block with progress lines: 300k users' lists (3M rows) were one silent write of 8-20 s
    write_every_s = train_cfg.log_every_s if train_cfg.progress else None
    if args.out and args.out != STDOUT:
        n = _write_recommendations(args, run, index, used, rows, res, k, write_every_s)
    else:  # `--out -` and no --out: stdout
        n = write_results_csv(run, rows, res, sys.stdout.write, log_every_s=write_every_s)
    if args.out:  # stderr, so that with `--out -` stdout holds the CSV alone
        where = "standard output" if args.out == STDOUT else args.out
        print(f"wrote {n} rows for {len(rows)} users to {where}", file=sys.stderr)
    return 0


def _write_recommendations(args: argparse.Namespace, run, index, used: str, rows, res, k: int,  # noqa: ANN001
                           write_every_s: float | None) -> int:
    """Write the CSV of ``--out`` and, beside it, the record of what produced it (cli/provenance.py); returns
    the rows written. Both are written in full to temporaries before either is moved into place, and the
    record holds the CSV's sha256, so a record is never taken for that of another CSV."""
    import hashlib

    from twotower.cli.provenance import record_path, recommend_record
    from twotower.pipeline.recommend import run_index_dir
    from twotower.pipeline.results_csv import write_results_csv
    from twotower.utils.atomic import atomic_path, json_text, signals_deferred

    digest = hashlib.sha256()
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(atomic_path(args.out))
        with open(tmp, "w", encoding="utf-8", newline="") as f:

            def write(text: str) -> None:
                f.write(text)
                digest.update(text.encode("utf-8"))  # newline="": the bytes written, hashed without reading back

            n = write_results_csv(run, rows, res, write, log_every_s=write_every_s)
        where = record_path(args.out)
        if where is not None:
            index_dir = run_index_dir(run.dir, exact=getattr(args, "exact", False))  # as open_run_index chose
            record = recommend_record(args, run, index, index_dir, used, k=k, n_users=len(rows), n_rows=n,
                                      csv_sha256=digest.hexdigest())
            stack.enter_context(atomic_path(where)).write_text(json_text(record), encoding="utf-8")
        with signals_deferred():  # a Ctrl-C between the two moves left a new CSV beside an old record
            stack.close()
    return n


def _check_out_is_no_input(out: str, inputs: dict[str, list], flag: str = "--out") -> None:
    """Refuse an --out that is one of the command's own input files: it was read, then replaced by the output
    (`--exclude valid.csv --out valid.csv` lost the user's validation split)."""
    if out == STDOUT or not is_file(out):
        return
    for in_flag, files in inputs.items():
        for f in files:
            if f and is_file(f) and Path(f).samefile(out):
                raise ConfigError(f"{flag} {out}: is the {in_flag} file {f}, which writing the output there would "
                                  "replace; choose another file name")


def _say_no_input_history(run, rows, histories) -> None:  # noqa: ANN001 - TrainedRun, InputHistories
    """Tell stderr when a user asked for by id has no row in the --history-from files: their list is the
    empty-history one (a sequence tower's fitted empty state: pipeline/empty_history.py), not one read from
    their training history, which a user who misspelt a file or its ids would otherwise take for an answer."""
    if histories is None:
        return
    lengths = histories.sequences.lengths()  # once: per row it was a pass over every user
    empty = [int(r) for r in rows if lengths[int(r)] == 0]
    if empty:
        print(f"{len(empty)} of {len(rows)} users have no rows of known items in the --history-from files (e.g. user "
              f"{run.user_vocab.id_at(empty[0])}): each is ranked from an empty input history, not from their "
              "training history", file=sys.stderr)


def _say_shortfall(res, k: int, who: list) -> None:  # noqa: ANN001 - Results
    """Tell stderr when a list is shorter than k: fewer than k items were left after exclusions."""
    from twotower.index import shortfall

    short = shortfall(res, k)
    if short.any():
        worst = int(short.argmax())
        print(f"{int((short > 0).sum())} of {len(short)} lists are shorter than k={k} because fewer items are left "
              f"after exclusions (e.g. {who[worst]}: {k - int(short[worst])} of {k})", file=sys.stderr)


def _print_items(items: list[dict], as_json: bool, title: str, k: int) -> None:
    if as_json:
        answer: dict = {"items": items}
        if len(items) < k:  # as the HTTP answer says it: only on a short list
            answer["shortfall"] = {"missing": k - len(items), "reason": f"fewer than k={k} items are left after "
                                   f"the exclusions; all {len(items)} eligible items are returned"}
        print(json.dumps(answer, ensure_ascii=False, default=str))
        return
    print(title)
    for it in items:
        extra = f"  [{printable(it['genres'])}]" if isinstance(it.get("genres"), str) and it.get("genres") else ""
        if it.get("title"):
            print(f"{it['rank']:>3}. {printable(it['title'])} (item {printable(it['item_id'])}, "
                  f"score {it['score']:.3f}){extra}")
        else:  # a catalogue without titles: the id once, not "150 (item 150, ...)"
            print(f"{it['rank']:>3}. item {printable(it['item_id'])} (score {it['score']:.3f}){extra}")


def cmd_data_fetch(args: argparse.Namespace) -> int:
    from twotower.data.movielens import fetch_movielens_100k, load_movielens_100k

    kwargs = {}
    if args.source:
        kwargs["source"] = args.source
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
    from twotower.config import load_config

    overrides = list(getattr(args, "overrides", None) or [])
    for item in overrides:
        key = item.split("=", 1)[0].strip()
        if key not in SPLIT_OVERRIDES:
            raise ConfigError(f"data split: {key} cannot be set here; it takes {', '.join(SPLIT_OVERRIDES)} "
                              "(the split has its own flags: --method, --ratios, --n, --valid-start, --test-start, "
                              "--seed)")
    data = load_config(None, overrides).data
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

    if args.seed is not None and args.seed < 0:
        raise ConfigError(f"--seed must be an integer >= 0, got {args.seed}")
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


def cmd_data_split(args: argparse.Namespace) -> int:
    from twotower.config import DataConfig, TrainConfig
    from twotower.data.readers import read_interactions
    from twotower.data.splits import global_time_split
    from twotower.pipeline.sources import _read_counts, _split, column_map
    from twotower.utils.atomic import atomic_write_set, json_text
    from twotower.utils.folder_lock import exclusive_writer

    _check_method_flags(args)
    defaults = DataConfig()
    args.ratios = ",".join(map(str, defaults.ratios)) if args.ratios is None else args.ratios
    args.n = defaults.leave_n if args.n is None else args.n
    args.seed = TrainConfig.seed if args.seed is None else args.seed
    try:
        ratios = tuple(float(r) for r in args.ratios.split(","))
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
        # read as `train` reads it (data.*_col, data.format); the frame has the canonical column names
        df = read_interactions(args.input, column_map(reading), format=reading.format, encoding=reading.encoding,
                               time_unit=reading.time_unit)
    else:
        raise ConfigError("data split needs --input FILE or --dataset movielens-100k")
    if args.method == "time":  # errors and warnings name the flags the user typed
        split = global_time_split(df, valid_start, test_start, names=("--valid-start", "--test-start"),
                                  time_unit=reading.time_unit)
    else:
        split = _split(df, cfg, args.seed)
    # the input's rows the reader dropped (duplicates): without them the report's rows summed to fewer than the
    # file held, and nothing in it said why (train's run.json has the same counts under "read")
    read = _read_counts(df) if "report" in df.attrs else {}
    report = {**split.report, "read": read} if read else split.report
    report["input"] = _split_input(args, reading)
    # one set: an interrupted split must not leave this split's train.csv beside an earlier one's test.csv
    tables = {"train": split.train, "valid": split.valid, "test": split.test, "items": items, "users": users}
    files = {out / f"{name}.csv": t.to_csv(index=False).encode("utf-8") for name, t in tables.items() if t is not None}
    files[out / "split_report.json"] = json_text(report).encode("utf-8")
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


def _maybe_int(v: str | None):
    if v is None:
        return None
    try:
        return int(v)
    except ValueError:
        return v
