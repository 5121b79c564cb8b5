"""`twotower evaluate`: a run and its baselines scored on a held-out split, as a table, JSON, CSV or a plot."""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys

from twotower.cli.flags import _threads, refuse_missing_inputs
from twotower.cli.id_lists import split_comma_list
from twotower.cli.paths import STDOUT, _check_out_is_no_input, check_output_file, write_output_text
from twotower.cli.printing import say
from twotower.cli.provenance import record_path
from twotower.cli.stopping import sigterm_keeps_files
from twotower.errors import ConfigError
from twotower.utils.run_folder import check_run_folder
from twotower.utils.wording import plural

__all__ = ["cmd_evaluate", "print_eval_table", "users_line", "rows_to_csv"]


def print_eval_table(rows: list[dict], ks: tuple[int, ...], title: str, protocol: str | None = None) -> None:
    """One table: a row per (model, k), a column per metric, fit seconds last; ``protocol`` the footer.

    Rows of a segment (``evaluate --segments``: a ``segment`` other than ``"all"``) get a table of their own each,
    titled with the segment's held-out pairs and users, under the main one."""
    from twotower.evaluation.table import format_table
    from twotower.pipeline.experiment import PROTOCOL_TEXT

    from twotower.cli.main import PLOT_METRICS  # the table's columns are the metrics --plot may draw

    metrics = list(PLOT_METRICS)
    by_segment: dict[str, list[dict]] = {}
    for r in rows:
        by_segment.setdefault(r.get("segment", "all"), []).append(r)
    main_rows = by_segment.pop("all", [])

    def long_rows(rows: list[dict]) -> list[dict]:
        out = []
        for k in sorted(ks):  # ascending whatever order --ks or eval.ks gave, as the JSON and CSV columns are
            for r in rows:
                if f"Recall@{k}" not in r:
                    continue
                out.append({"model": r["model"], "k": k, **{m: r.get(f"{m}@{k}") for m in metrics}, "fit_s": r.get("fit_s")})
        return out

    formats = {"fit_s": ".1f", "MeanPop": ".1f"}
    print(format_table(long_rows(main_rows), ["model", "k", *metrics, "fit_s"], title=title, formats=formats))
    coverage = users_line(main_rows)
    if coverage:  # under the table, above the protocol footer (the last line)
        print(coverage)
    for segment, seg_rows in by_segment.items():
        print()
        print(format_table(long_rows(seg_rows), ["model", "k", *metrics], title=segment_title(segment, seg_rows[0]),
                           formats=formats))
    print(protocol or PROTOCOL_TEXT)


#: what each ``evaluate --segments`` part holds, for its table's title
SEGMENT_MEANING = {
    "cold items": "their item has no row in the run's training data",
    "warm items": "their item has training rows",
    "new users": "their user has no row in the run's training data",
    "known users": "their user has training rows",
}


def segment_title(segment: str, row: dict) -> str:
    """``cold items: 48 held-out pairs of 30 users (their item has no row in ...)``."""
    pairs, users = row.get("held_out_pairs", 0), row.get("users_held_out", 0)
    return (f"{segment}: {plural(pairs, 'held-out pair')} of {plural(users, 'user')} "
            f"({SEGMENT_MEANING.get(segment, segment)}); each figure as if these pairs alone were held out")


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
        return f"users: all {held:,} held-out users evaluated" if held != 1 else "users: the 1 held-out user evaluated"
    skipped = held - done  # "the other 1 are skipped" read wrong
    return (f"users: {done:,} of {plural(held, 'held-out user')} evaluated; the other {skipped:,} "
            f"{'is' if skipped == 1 else 'are'} skipped, not counted as "
            f"misses: their held-out items (or they) never occur in train, so no model here can rank them (as misses, "
            f"every per-user figure would scale by {done / held:.4f}; Coverage and MeanPop would not)")


def _parse_ks(text: str) -> tuple[int, ...]:
    """``--ks``' cut-offs, each refused at its place in the words of ``--k`` and of the other list flags (``--ks: item
    1 of 2: must be at least 1, got 0``), before the run loads: it said "--ks must hold positive integers such as
    10,20", unlike every other flag's "--flag: ..."."""
    from twotower.cli.flags import id_place, number_flag_refusal
    from twotower.pipeline.refusals import k_refusal

    items = split_comma_list(text, "--ks")  # `10,,20`: refused naming the empty item (was dropped)
    if not items:
        raise ConfigError("--ks: an empty list; give the cut-offs, e.g. --ks 10,20, or leave --ks out for the run's "
                          "eval.ks")
    ks = []
    for pos, item in enumerate(items):
        where = id_place("--ks", "item", pos, len(items)) if len(items) > 1 else "--ks"
        try:
            k = int(item)
        except ValueError:
            raise ConfigError(number_flag_refusal(where, item)) from None
        if (why := k_refusal(k)) is not None:  # the top-k lists are padded to k: a huge one was a numpy ValueError
            raise ConfigError(f"{where}: {why}")
        ks.append(k)
    return tuple(ks)


@sigterm_keeps_files("csv", "plot")  # SIGTERM mid-evaluation: one line on what --csv and --plot hold, 143
def cmd_evaluate(args: argparse.Namespace) -> int:
    ks = baselines = None  # not given: the run's own eval.ks / eval.baselines (evaluate_run reads them)
    if args.ks is not None:
        ks = _parse_ks(args.ks)
        if len(set(ks)) < len(ks):  # was "EvalProtocol.ks has duplicates", after the run had loaded
            raise ConfigError(f"--ks: {args.ks!r} names a cut-off twice")
        ks = tuple(sorted(ks))  # `--ks 20,5`: the table and the CSV's record listed 20 first, the CSV columns 5 first
    if args.baselines is not None:
        baselines = tuple(split_comma_list(args.baselines, "--baselines"))
        for b in baselines:
            if b not in ("popularity", "ease", "itemknn"):
                raise ConfigError(f"--baselines: unknown {b!r}; choose from popularity, ease, itemknn")
        if len(set(baselines)) < len(baselines):  # as --ks refuses a repeated k: a repeat would fit and print it twice
            raise ConfigError(f"--baselines: {args.baselines!r} names a baseline twice")
    segments = ()
    if getattr(args, "segments", None) is not None:
        from twotower.pipeline.evaluate_run import SEGMENTS

        segments = tuple(split_comma_list(args.segments, "--segments"))
        for name in segments:
            if name not in SEGMENTS:
                raise ConfigError(f"--segments: unknown {name!r}; choose from {', '.join(SEGMENTS)}")
        if len(set(segments)) < len(segments):
            raise ConfigError(f"--segments: {args.segments!r} names a segment twice")
    test_file = getattr(args, "test", None)
    if test_file is not None and args.split != "test":
        raise ConfigError("--test FILE is the test split: leave --split at test")
    from twotower.cli.flags import check_range

    check_range("--ease-max-items", args.ease_max_items, 1)
    low_rank_max_items = getattr(args, "ease_low_rank_max_items", None)
    check_range("--ease-low-rank-max-items", low_rank_max_items, 1)
    csv_out, plot_out = getattr(args, "csv", None), getattr(args, "plot", None)
    if args.json and csv_out == STDOUT:  # stdout held the CSV alone: --json was dropped without a word
        raise ConfigError("--json prints the rows as JSON and --csv - prints them as CSV, both on standard output: "
                          "pass one of them (both: --json with --csv FILE)")
    if csv_out is not None:  # checked before the evaluation runs: a bad path is one line, not a late traceback
        check_output_file(csv_out, "--csv", example="eval.csv")
    from twotower.cli.main import PLOT_METRIC_DEFAULT  # here, as print_eval_table's: main imports this module

    if plot_out is None and args.plot_metric != PLOT_METRIC_DEFAULT:  # as --rerank-backend without --rerank
        logging.getLogger(__name__).warning("--plot-metric %s has no effect without --plot FILE.png", args.plot_metric)
    if plot_out is not None:
        if plot_out == STDOUT:
            raise ConfigError("--plot: a PNG needs a file name, not -")
        check_output_file(plot_out, "--plot", example="recall.png")
        from twotower.utils.extras import plotting_missing

        if (why := plotting_missing()) is not None:  # said now, not as a traceback after the evaluation's minutes
            raise ConfigError(f"--plot {plot_out}: {why}, or leave --plot out")
    inputs = {"--test": [test_file], "--history-from": getattr(args, "history_from", None) or []}
    for out, flag in ((csv_out, "--csv"), (plot_out, "--plot")):
        if out is not None:
            _check_out_is_no_input(out, inputs, flag)
    record = None if csv_out is None else record_path(csv_out)
    if record is not None:  # eval.csv.json beside eval.csv: refused before the work, like the CSV itself
        check_output_file(record, "--csv's record")
        _check_out_is_no_input(str(record), inputs, "--csv's record")
    plot_record = None if plot_out is None else record_path(plot_out)
    if plot_record is not None:  # p.png.json beside p.png, as eval.csv.json beside eval.csv
        check_output_file(plot_record, "--plot's record")
        _check_out_is_no_input(str(plot_record), inputs, "--plot's record")
    _check_outputs_apart(plot_out, {"--csv": csv_out, "--csv's record": record})
    _check_outputs_apart(plot_record, {"--csv": csv_out, "--csv's record": record}, "--plot's record")
    if plot_out is not None:
        _plot_format(plot_out)  # before any work: a .txt or .pdf name got PNG bytes without a word
    refuse_missing_inputs(inputs)
    check_run_folder(args.run)  # a wrong folder is one line at once, not after torch is imported
    from twotower.pipeline.artifacts import TrainedRun
    from twotower.pipeline.evaluate_run import NoHeldOutSplit, evaluate_run

    _threads(args)
    run = TrainedRun.load(args.run)
    _say_index_unused(run)
    _warn_ease_limits_unused(args, baselines if baselines is not None else tuple(run.config.eval.baselines))
    history_from = getattr(args, "history_from", None)
    try:
        rows = evaluate_run(run, split=args.split, baselines=baselines, ks=ks, history_from=history_from,
                            test_file=test_file, ease_max_items=args.ease_max_items,
                            ease_low_rank_max_items=low_rank_max_items,
                            exclude_seen=not getattr(args, "no_exclude_seen", False), segments=segments)
    except NoHeldOutSplit as e:  # Python's words name test_file= and split=: here the flags
        raise e.command_line() from None
    source = f"; input history from {' '.join(history_from)}" if history_from else ""
    held_out = f"{args.split} {test_file}" if test_file else args.split
    # the --json rows (and the CSV's columns) name the run they score, as `search evaluate --json` names its data and
    # model: each row said its split, never which run, so saved files of two runs could not be told apart
    identity = {"run": os.path.abspath(run.dir), "run_fingerprint": run.fingerprint()}
    saved = [{**r, **identity} for r in rows]
    if csv_out is not None:
        where = _write_csv(args, run, saved, ks, baselines) if record is not None else write_output_text(csv_out, rows_to_csv(saved))
        say(f"wrote {plural(len(rows), 'row')} to {where}")
    if plot_out is not None:
        metric = args.plot_metric
        drawn = [r for r in rows if r.get("segment", "all") == "all"]  # --segments' rows are in the CSV, not drawn
        _write_plot(args, run, drawn, ks, baselines, metric,
                    title=f"{metric}@k, {held_out} (full catalogue), run {args.run}")
        say(f"wrote {metric}@k of {plural(len(drawn), 'model')} to {plot_out}")
    if csv_out == STDOUT:  # stdout holds the CSV alone
        return 0
    if args.json:
        print(json.dumps(saved, indent=2, default=float))
    else:
        from twotower.pipeline.artifacts import run_part_file
        from twotower.pipeline.experiment import protocol_text

        print_eval_table(rows, ks if ks is not None else run.config.eval.ks,
                         f"{held_out} (full catalogue), run {args.run}{source}",
                         protocol_text(history_from, args.split,
                                       exclude_seen=not getattr(args, "no_exclude_seen", False),
                                       has_valid=run_part_file(run.dir, "valid") is not None))
    return 0


def _say_index_unused(run) -> None:  # noqa: ANN001 - TrainedRun
    """One line on stderr when the run has a built index: `recommend` and `serve` rank through it, `evaluate`
    ranks exactly over the full catalogue, which it did without a word (its table measures the model, not the
    index; the index's recall against exact search is in its tune.json).

    An index built before a retrain or a ``--resume`` (another model fingerprint), which `recommend` and `serve`
    refuse, was pointed to as the place of "its recall against exact search", a recall of the old weights; a
    damaged one likewise. Both are now named as what they are, with the command that rebuilds them."""
    from twotower.errors import IntegrityError, NotFoundError
    from twotower.index.storage import read_meta
    from twotower.pipeline.artifacts import rebuild_command
    from twotower.pipeline.recommend import run_index_dir

    index_dir = run_index_dir(run.dir)
    if index_dir is None:
        return
    unused = f"evaluation ranks exactly over the full catalogue; the index in {index_dir} is not used"
    rebuild = f"`{rebuild_command(run.dir, index_dir)}`"
    try:
        built_for = read_meta(index_dir).get("model_fingerprint")
    except (IntegrityError, NotFoundError, OSError, ValueError) as e:
        why = str(e).replace("rebuild with `twotower index build --run DIR`", f"rebuild it with {rebuild}")
        why = why if rebuild in why else f"{why}; rebuild it with {rebuild}"
        print(f"{unused}, and it is damaged (recommend and serve refuse it): {why}", file=sys.stderr)
        return
    now = run.fingerprint()
    if built_for != now:
        print(f"{unused}, and it is stale: built for model {built_for}, but the run {run.dir} now holds model {now} "
              f"(retrained or resumed since), so recommend and serve refuse it until it is rebuilt: {rebuild}",
              file=sys.stderr)
        return
    say(f"{unused} (its recall against exact search is in {index_dir / 'tune.json'})")


def _warn_ease_limits_unused(args: argparse.Namespace, baselines: tuple[str, ...]) -> None:
    """``--ease-max-items`` / ``--ease-low-rank-max-items`` size the EASE baseline only: with no EASE row they did
    nothing without a word (`--baselines popularity --ease-max-items 50000`)."""
    if "ease" in baselines:
        return
    for flag, value in (("--ease-max-items", args.ease_max_items),
                        ("--ease-low-rank-max-items", getattr(args, "ease_low_rank_max_items", None))):
        if value is not None:
            logging.getLogger(__name__).warning("%s %d has no effect: ease is not among the baselines (%s)", flag,
                                                value, ",".join(baselines) or "none")


def _check_outputs_apart(plot_out: str | os.PathLike[str] | None, others: dict[str, str | os.PathLike[str] | None],
                         flag: str = "--plot") -> None:
    """Refuse a --plot that lands on the --csv file or its record: the PNG was written last and replaced it without
    a word (`--csv e.csv --plot e.csv.json` left a record that was a PNG)."""
    if plot_out is None:
        return
    where = flag
    plot_real = os.path.realpath(plot_out)  # a symlink, ./ or ../ name the same file as a plain path does
    for name, other in others.items():
        if other is not None and os.fspath(other) != STDOUT and os.path.realpath(other) == plot_real:
            raise ConfigError(f"{where} {os.fspath(plot_out)}: is also the {name} file {os.fspath(other)}, which the plot would "
                              "replace; choose another file name")


def _resolved(run, ks: tuple[int, ...] | None, baselines: tuple[str, ...] | None,  # noqa: ANN001 - TrainedRun
              rows: list[dict]) -> tuple[tuple[int, ...], tuple[str, ...], bool]:
    """The ``ks`` and ``baselines`` a record lists (None: the run's own ``eval.ks`` / ``eval.baselines``), and
    whether a row's λ or k came from the run's tuned baselines' file."""
    from twotower.pipeline.artifacts import run_part_file

    ks = tuple(sorted(ks if ks is not None else run.config.eval.ks))
    baselines = tuple(baselines if baselines is not None else run.config.eval.baselines)
    # the rows whose λ / k were tuned on valid (and kept in tuned_baselines.json): EASE's and ItemKNN's, when the
    # run has a valid split; `--baselines popularity` recorded the file all the same, as if it had fed a row
    tuned_rows = run_part_file(run.dir, "valid") is not None and any(
        str(r.get("model", "")).split(" ", 1)[0] in ("ease", "itemknn") for r in rows)
    return ks, baselines, tuned_rows


#: the image formats --plot writes, named by its file's ending (matplotlib writes each without extra packages)
PLOT_FORMATS = ("png", "svg", "pdf")


def _plot_format(path: str) -> str:
    """The format ``--plot``'s file ending names; ConfigError for any other ending (it wrote PNG bytes whatever the
    name: ``--plot eval.pdf`` gave a PNG a PDF viewer would not open)."""
    ending = os.path.splitext(str(path))[1].lower().lstrip(".")
    if ending not in PLOT_FORMATS:
        raise ConfigError(f"--plot {path}: the file's ending names the image format: one of "
                          f"{', '.join('.' + f for f in PLOT_FORMATS)}, e.g. recall.png; got "
                          f"{'no ending' if not ending else repr('.' + ending)}")
    return ending


def _write_plot(args: argparse.Namespace, run, rows: list[dict], ks: tuple[int, ...] | None,  # noqa: ANN001
                baselines: tuple[str, ...] | None, metric: str, *, title: str) -> None:
    """``--plot FILE.png`` and, beside it, ``FILE.png.json``: the record ``--csv`` writes, of the PNG (its
    ``rows`` the models drawn) with ``plot_metric``; the plot was written with no record of what made it."""
    from twotower.cli.provenance import evaluate_record, write_file_and_record
    from twotower.evaluation.plots import results_figure

    fig = results_figure({r["model"]: r for r in rows}, metric, title=title)
    ks, baselines, tuned_rows = _resolved(run, ks, baselines, rows)
    write_file_and_record(args.plot, lambda tmp: fig.savefig(tmp, format=_plot_format(args.plot)), lambda digest: evaluate_record(
        args, run, ks=ks, baselines=baselines, n_rows=len(rows), csv_sha256=digest, tuned_rows=tuned_rows,
        out=args.plot, plot_metric=metric))


def _write_csv(args: argparse.Namespace, run, rows: list[dict], ks: tuple[int, ...] | None,  # noqa: ANN001 - TrainedRun
               baselines: tuple[str, ...] | None) -> str:
    """``--csv FILE`` and, beside it, ``FILE.json`` saying what produced it (as ``recommend --out`` does); ``ks`` and
    ``baselines`` None are the run's own (``eval.ks`` / ``eval.baselines``), recorded resolved."""
    from twotower.cli.provenance import evaluate_record, write_csv_and_record

    ks, baselines, tuned_rows = _resolved(run, ks, baselines, rows)

    def write_rows(write) -> int:  # noqa: ANN001 - the record writer's text sink
        write(rows_to_csv(rows))
        return len(rows)

    write_csv_and_record(args.csv, write_rows, lambda n, digest: evaluate_record(
        args, run, ks=ks, baselines=baselines, n_rows=n, csv_sha256=digest, tuned_rows=tuned_rows))
    return str(args.csv)


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
