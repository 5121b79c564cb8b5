"""`twotower recommend`: top-k lists for one user, a new user's history, or many users (CSV with a provenance record)."""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from twotower.cli.flags import (
    _threads,
    check_history_flag,
    check_filter_exact_max,
    check_history_ids,
    filter_at,
    filter_item_at,
    flag_named,
    parse_filters,
    parse_user_features,
    refuse_empty_history_early,
    refuse_json_with_out,
    refuse_missing_inputs,
    say_feature_notes,
    say_flag_note,
    user_features_named,
)
from twotower.cli.id_lists import parse_id_list
from twotower.cli.paths import STDOUT
from twotower.cli.printing import _print_items, say, stdout_data_write, stdout_json
from twotower.cli.stopping import sigterm_keeps_out
from twotower.errors import ConfigError, NotFoundError
from twotower.utils.run_folder import check_run_folder
from twotower.utils.shell import shell_arg

__all__ = ["cmd_recommend"]

log = logging.getLogger("twotower")


def _parse_user_list(run, spec: str) -> list[int]:  # noqa: ANN001 - TrainedRun
    if spec == "all":
        # every user the run knows, as `evaluate` averages over them: a user of the user table without
        # interactions (or without rows in the --history-from files) is ranked from an empty history. Only users
        # with an input history were listed, so the figures recomputed from `--users all --out recs.csv` counted
        # those users as misses where `evaluate` scored their lists
        return list(range(len(run.user_vocab)))
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
    if len(unique) < len(ids):  # a warning: a script pairing its ids with the output's rows would shift (-q hid it)
        log.warning("--users: %d ids, %d distinct: one list per user (tt.recommend and POST /recommend/batch give one "
                    "per id as given)", len(ids), len(unique))
    from twotower.cli.flags import id_place
    from twotower.pipeline.refusals import USER_LIST, hint_unknown_user, locate, rows_naming_every_unknown

    with flag_named("--users"):
        # the words of --user, POST /recommend/batch and tt.recommend: the first unknown id named by its place as
        # typed, 1-based as --history's ids (tt.recommend: user_ids[1]), then every other unknown one
        return rows_naming_every_unknown(
            unique, run.user_row,
            lambda pos, e: locate(hint_unknown_user(e, run, "--history"), id_place("--users", "user", ids.index(unique[pos]), len(ids))),
            what=USER_LIST)


def _refuse_no_user_ids(spec: str | None) -> None:
    """``--users ','`` (separators alone), ``--users '[]'`` or ``--users ''``: refused before the run loads, in the
    words of ``similar --items ','``. They printed the CSV header alone and exited 0 ('' was read as the folder '.')."""
    if spec is None or spec.strip() == "all":
        return
    if spec.strip():
        try:
            if Path(spec).exists():  # a file of users: its rows are read once the run has loaded
                return
        except OSError:  # a comma list of a thousand ids is no file name (ENAMETOOLONG)
            pass
        if parse_id_list(spec, "--users"):
            return
    raise ConfigError("--users: no user ids given; pass 'all', a comma list, e.g. --users 1,2, or a file with a "
                      "user column")


def _user_row(run, user_id: str) -> int:  # noqa: ANN001 - TrainedRun
    """The run's row of ``--user``; an unknown id (e.g. a user who first appears after training, in the test split)
    refused in the words of HTTP and Python."""
    with flag_named("--user"):
        try:
            return run.user_row(user_id)
        except NotFoundError as e:
            from twotower.pipeline.refusals import hint_unknown_user

            raise hint_unknown_user(e, run, "--history") from None


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
                        f"{list(map(str, df.columns))}; "
                        f"{_no_header_hint(run, df.columns) or 'rename the one that holds the user ids to ' + repr(names[0])}",
                        file=str(path), column=names[0])
    ids = ids_to_str(df[col], file=str(path), column=col, rows=rows).tolist()
    if not ids:  # a header alone printed the CSV header and exited 0, as --users ',' did before it was refused
        raise DataError(f"no data rows (only a header): no user ids to rank for; add one {col!r} per line, or pass "
                        "--users all", file=str(path))
    first: dict[str, int] = {}  # each id's first position, in file order
    for pos, u in enumerate(ids):
        first.setdefault(u, pos)
    if len(first) < len(ids):  # an interactions file lists a user once per row: one list per user
        log.info("--users: %d ids, %d distinct: one list per user", len(ids), len(first))
    from twotower.pipeline.refusals import USER_LIST, rows_naming_every_unknown

    unique, at = list(first), list(first.values())
    # the first unknown id named by its row, then every other unknown one, as a comma list's
    return rows_naming_every_unknown(
        unique, run.user_row,
        lambda pos, e: DataError(e.message, file=str(path), row=rows.number(at[pos]), column=col, unit=rows.unit),
        what=USER_LIST)


def _no_header_hint(run, columns) -> str | None:  # noqa: ANN001 - TrainedRun, the frame's columns
    """What to do with a list of ids without a header line (``cut -d, -f1 > users.txt``), whose first id was read
    as the column's name: "columns present: ['c1']" alone did not say that 'c1' is a user of the run."""
    if len(columns) != 1:
        return None
    first = str(columns[0]).strip()
    try:
        run.user_row(first)
    except (LookupError, ValueError):  # NotFoundError is a KeyError: a header that is no user's id
        return None
    return (f"the file has no header line: its first line {first!r} is one of the run's users; add the line "
            f"'user_id' above the ids")


@sigterm_keeps_out  # SIGTERM mid `--users all --out recs.csv`: one line on what recs.csv holds, status 143
def cmd_recommend(args: argparse.Namespace) -> int:
    if args.out and args.users is None:  # --users "" --out: refused as an empty list below
        # --user/--history print their list: --out used to be ignored without a word, leaving no file
        one = f"--users {shell_arg(args.user)}" if args.user is not None else "--users ID"
        raise ConfigError(f"--out writes the CSV of --users; for one user write `{one} --out {shell_arg(args.out)}`, "
                          "or --json for the printed list")
    refuse_json_with_out(args, "--users")
    args.filters = parse_filters(args.filter)  # its form checked at once; its fields and values once the run loads
    args.listed_ids = None if args.exclude_items is None else parse_id_list(args.exclude_items, "--exclude-items")
    if args.out:
        from twotower.cli.provenance import check_out_and_record  # FILE.json beside it: what produced the lists

        check_out_and_record(args.out, {"--users": [args.users], "--exclude": args.exclude or [],
                                        "--history-from": getattr(args, "history_from", None) or []})
    # the words of HTTP's 422 and tt.recommend; a run with user features decides once loaded (--user-features alone)
    refuse_empty_history_early(None if args.history is None else parse_id_list(args.history, "--history"), args.run)
    if args.user is not None and not args.user.strip():
        # it was "unknown user ''" once the run had loaded; the words of POST /recommend's 422, flags named as typed
        from twotower.pipeline.refusals import empty_user_id_refusal

        raise ConfigError(f"--user: {empty_user_id_refusal('--history')}")
    _refuse_no_user_ids(args.users)
    # argument checks before the (slow) run load: a typo is one line at once
    from twotower.config import USERS_K
    from twotower.serving.settings import ServiceSettings  # the service's default list length, so both agree

    k = args.k if args.k is not None else (USERS_K if args.users else ServiceSettings.default_k)
    from twotower.cli.flags import check_k_flag  # the words of tt.recommend and POST /recommend

    check_k_flag(k)
    from twotower.cli.main import refuse_index_with_exact

    refuse_index_with_exact(args)
    if getattr(args, "history_from", None) and args.history is not None:
        raise ConfigError("--history-from reads known users' histories from files; --history describes one new "
                          "user: use one or the other")
    if args.exclude and args.history is not None:
        # the files hold (user, item) pairs of known users: none of them is the new user, so nothing would be
        # excluded, silently
        raise ConfigError("--exclude reads known users' items from files; --history describes one new user, whose "
                          "history is excluded already (--no-exclude-seen keeps it): drop --exclude")
    features = parse_user_features(args)
    check_filter_exact_max(args)  # serve's check, before the run loads
    refuse_missing_inputs({"--exclude": args.exclude, "--history-from": getattr(args, "history_from", None)})
    check_run_folder(args.run)  # a wrong folder is one line at once, not after torch is imported
    import numpy as np

    from twotower.pipeline.artifacts import TrainedRun
    from twotower.pipeline.recommend import (
        exclusions_from_files,
        measured_recall_notes,
        open_served_index,
        recommend_history,
        recommend_users,
    )
    from twotower.pipeline.results_csv import results_to_json, write_results_csv

    _threads(args)
    run = TrainedRun.load(args.run)
    hist = None
    if args.history is not None:
        from twotower.pipeline.artifacts import refuse_empty_history

        hist = parse_id_list(args.history, "--history")
        # an empty one refused before any lookup, as POST /recommend's route refuses it
        refuse_empty_history(hist, "--history", run=run, user_features=features, features_field="--user-features")
    from twotower.serving.service import filter_allow, run_filter_mask

    # POST /recommend's checks, before the index and in its order: filters, exclusions, then the new user's
    # features and the query's ids (a bad --user-features value was named before an unknown --filter field)
    mask = run_filter_mask(run, args.filters, field_at=filter_at, item_at=filter_item_at)
    listed = _listed_rows(run, args.listed_ids)  # its ids checked before the index, as --history's
    if hist is not None:  # the first unknown id named by its place, as HTTP and Python name it
        hist = check_history_flag(hist, run, features)
        check_history_ids(hist, run)
    # --user's and --users' ids too: an unknown one was refused only after the index was opened (and its
    # `ranking with ...` line printed), where POST /recommend and tt.recommend refuse it before any work
    user_row = _user_row(run, args.user) if hist is None and args.user is not None else None
    rows = None if hist is not None or args.user is not None else np.asarray(_parse_user_list(run, args.users), np.int64)
    served = open_served_index(run, getattr(args, "index", None), exact=getattr(args, "exact", False))  # the index `twotower serve` answers from
    index, used = served.index, served.description
    say(f"ranking with {used}")
    allow = filter_allow(mask, index)
    for note in measured_recall_notes(served, k, allow, args.filter_exact_max):
        print(f"warning: {note}", file=sys.stderr)
    histories = None
    if getattr(args, "history_from", None):
        from twotower.pipeline.histories import exclude_histories, read_input_histories

        histories = read_input_histories(run, args.history_from)
    if hist is not None:
        with flag_named("--history"), user_features_named():  # a tower output that is not finite: --user-features
            res = recommend_history(run, hist, k, exclude_seen=not args.no_exclude_seen, index=index,
                                    user_features=features, allow=allow, listed=listed, log_feature_notes=False,
                                    log_history_note=False, filter_exact_max=args.filter_exact_max)
        say_feature_notes(run.new_user_feature_notes(features))
        from twotower.pipeline.recommend import long_history_note

        hist_rows = [run.item_vocab.index(i) for i in hist]  # the ids were checked above
        long = long_history_note(run, len(hist), exclude_seen=not args.no_exclude_seen, distinct=len(set(hist)),
                                 rows=hist_rows)
        if long:  # a `warning: --history: ...` line as the others, not a log line in HTTP's field name
            say_flag_note(long, "history", "--history")
        from twotower.pipeline.similar import untrained_history_note

        cold = untrained_history_note(run, hist_rows)
        if cold:
            say_flag_note(cold, "history", "--history")
        _say_shortfall(res, k, ["a new user"], filtered=allow is not None, index_size=len(index))
        title = (f"recommendations for a new user with {len(hist)} history items" if hist
                 else "recommendations for a new user from their features alone (no history yet)")
        _print_answer(args, run, res, k, None, title,
                      notes=[*run.new_user_feature_notes(features), *([long] if long else []), *([cold] if cold else [])])
        return 0
    exclude = exclusions_from_files(run, args.exclude or [], include_seen=not args.no_exclude_seen)
    if histories is not None and not args.no_exclude_seen:
        exclude = exclude_histories(exclude, histories)  # the input history counts as seen
    if user_row is not None:
        from twotower.pipeline.similar import untrained_history_note

        # as a new user's --history is said: the tower leaves such items out of the input history too
        cold = None if histories is None else untrained_history_note(
            run, histories.sequences.of(user_row), f"user {args.user}'s history in the --history-from files")
        if not cold:  # the note says it when none of the user's items is left, in its own words
            _say_no_input_history(run, [user_row], histories)
        res = recommend_users(run, np.array([user_row]), k, exclude, histories=histories, index=index, allow=allow,
                              listed=listed, filter_exact_max=args.filter_exact_max)
        _say_shortfall(res, k, [f"user {args.user}"], filtered=allow is not None, index_size=len(index))
        if cold:
            print(f"warning: {cold}", file=sys.stderr)
        _print_answer(args, run, res, k, args.user, f"top {k} for user {args.user}", notes=[cold] if cold else None)
        return 0
    assert rows is not None
    _say_no_input_history(run, rows, histories)
    train_cfg = run.config.train  # the run's own progress settings
    res = recommend_users(run, rows, k, exclude, histories=histories, index=index, allow=allow, listed=listed,
                          filter_exact_max=args.filter_exact_max, log_every_s=train_cfg.log_every_s if train_cfg.progress else None)
    _say_shortfall(res, k, [f"user {run.user_vocab.id_at(int(r))}" for r in rows], filtered=allow is not None, index_size=len(index))
    if args.json:  # never with --out (refused above)
        print(results_to_json(run, rows, res))
        return 0
    # written block by block with progress lines: 300k users' lists (3M rows) were one silent write of 8-20 s
    write_every_s = train_cfg.log_every_s if train_cfg.progress else None
    if args.out and args.out != STDOUT:
        n = _write_recommendations(args, run, index, used, rows, res, k, write_every_s)
    else:  # `--out -` and no --out: stdout
        n = write_results_csv(run, rows, res, stdout_data_write, log_every_s=write_every_s)
    if args.out:  # stderr, so that with `--out -` stdout holds the CSV alone
        where = "standard output" if args.out == STDOUT else args.out
        say(f"wrote {n} rows for {len(rows)} users to {where}")
    return 0


def _print_answer(args: argparse.Namespace, run, res, k: int, user_id: str | None, title: str, *,  # noqa: ANN001
                  notes: list[str] | None = None) -> None:
    """Print one list: with --json, POST /recommend's answer built by its code (its item records with
    ``display_name``, ``user_id``, ``k``, ``warnings``, ``shortfall``), which the CLI's own ``{"items"}`` did not
    match (no ``display_name``, ``user_id`` or ``k``, another shortfall text); else the numbered lines."""
    from twotower.pipeline.recommend import results_to_items
    from twotower.serving.service import recommend_answer

    items = results_to_items(run, res)  # the service's item records
    if not args.json:
        for note in _unplaced_notes(run, res):
            print(f"warning: {note}", file=sys.stderr)
        _print_items(items, False, title, k)
        return
    notes = [*(notes or ()), *_unplaced_notes(run, res)]
    answer = recommend_answer(items, user_id, k, filtered=bool(args.filters),
                              exclude_seen=not args.no_exclude_seen, listed=bool(args.listed_ids),
                              notes=notes)
    print(stdout_json(answer, default=str))


def _unplaced_notes(run, res) -> list[str]:  # noqa: ANN001 - TrainedRun, Results
    """POST /recommend's warning when the list holds items the model cannot place."""
    from twotower.pipeline.similar import unplaced_item_mask, unplaced_list_note

    rows, _ = res.row(0)
    hit = rows[unplaced_item_mask(run)[rows]]
    return [unplaced_list_note([run.item_vocab.id_at(int(r)) for r in hit])] if hit.size else []


def _listed_rows(run, ids: list[str] | None):  # noqa: ANN001, ANN202 - TrainedRun, np.ndarray | None
    """Item rows of ``--exclude-items`` (None without it): an unknown id named by its place, 1-based as
    ``--history``'s (``--exclude-items: item 2 of 3: unknown item ...``; HTTP ``exclude_items[1]``)."""
    from twotower.cli.flags import id_place
    from twotower.pipeline.exclusions import listed_rows
    from twotower.pipeline.refusals import locate

    if ids is None:
        return None
    n = len(ids)
    with flag_named("--exclude-items"):
        return listed_rows(ids, run.item_vocab.index, lambda pos, e: locate(e, id_place("--exclude-items", "item", pos, n)))


def _write_recommendations(args: argparse.Namespace, run, index, used: str, rows, res, k: int,  # noqa: ANN001
                           write_every_s: float | None) -> int:
    """Write the CSV of ``--out`` and, beside it, the record of what produced it (cli/provenance.py); returns
    the rows written."""
    from twotower.cli.provenance import recommend_record, write_csv_and_record
    from twotower.pipeline.results_csv import write_results_csv

    return write_csv_and_record(
        args.out, lambda write: write_results_csv(run, rows, res, write, log_every_s=write_every_s),
        lambda n, sha: recommend_record(args, run, index, used, k=k, n_users=len(rows), n_rows=n, csv_sha256=sha))


def _say_no_input_history(run, rows, histories) -> None:  # noqa: ANN001 - TrainedRun, InputHistories
    """Tell stderr when a user asked for by id has no row in the --history-from files: their list is the
    empty-history one (a sequence tower's fitted empty state: pipeline/empty_history.py)."""
    from twotower.pipeline.recommend import no_input_history_note

    if (note := no_input_history_note(run, rows, histories, "--history-from")) is not None:
        print(note, file=sys.stderr)


def _say_shortfall(res, k: int, who: list, *, filtered: bool = False, index_size: int | None = None) -> None:  # noqa: ANN001 - Results
    """Tell stderr when a list is shorter than k: k is above the index's items, or fewer than k items were left
    after exclusions (and --filter)."""
    from twotower.pipeline.recommend import shortfall_note

    if (note := shortfall_note(res, k, who, filtered="--filter" if filtered else None,
                               index_size=index_size)) is not None:
        print(note, file=sys.stderr)


