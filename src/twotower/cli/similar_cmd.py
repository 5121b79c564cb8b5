"""``twotower similar``: the items most similar to an item ("more like this"), as ``POST /similar-items`` answers.

One item (``--item``) prints its list, or with ``--json`` the service's JSON answer; a list of items
(``--items all|ID,ID,...``) writes ``item_id,similar_item_id,rank,score`` CSV rows. Both search through
:func:`twotower.pipeline.similar.similar_items`, the function behind the HTTP route, so with an exact index
the lists are the service's, scores included.
"""
from __future__ import annotations

import argparse
import logging
import sys

import numpy as np

from twotower.cli.printing import say
from twotower.cli.stopping import sigterm_keeps_out
from twotower.errors import ConfigError
from twotower.utils.shell import shell_arg

__all__ = ["cmd_similar", "register"]

log = logging.getLogger("twotower")


def register(sub: argparse._SubParsersAction) -> None:
    from twotower.cli.flags import OneId
    from twotower.cli.main import add_index_flag, add_no_verify
    from twotower.config import COLD_SIMILAR
    from twotower.serving.settings import ServiceSettings  # the service's defaults, so both agree

    p = sub.add_parser("similar", help="items most similar to an item (as POST /similar-items), one or in batch")
    p.add_argument("--run", required=True, help="run folder (from `twotower train --out DIR`)")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--item", action=OneId, plural="--items", help="one item id: prints its most similar items with titles")
    which.add_argument("--items", help="'all' or a comma list of item ids (a JSON array for ids with commas): "
                                       "CSV rows item_id,similar_item_id,rank,score")
    from twotower.cli.flags import count_or_typed

    # a --k that is no integer is refused by the command, in the words of HTTP and Python (count_or_typed)
    p.add_argument("--k", type=count_or_typed, default=None, metavar="K",
                   help=f"list length (default {ServiceSettings.default_k}, as the service)")
    p.add_argument("--cold-similar", choices=COLD_SIMILAR, default=ServiceSettings.cold_similar,
                   help="how an item without training interactions of a dual-head run is queried: semantic (its "
                        f"semantic head) or item (its served vector); default {ServiceSettings.cold_similar}, "
                        "as `serve --cold-similar`")
    p.add_argument("--exact", action="store_true",
                   help="rank the whole catalogue exactly instead of with the run's built index (RUN/index)")
    add_index_flag(p)
    p.add_argument("--out", help="with --items: the CSV file (written whole or not at all); - or left out: stdout "
                                 "(not with --json)")
    p.add_argument("--json", action="store_true",
                   help="--item: print the JSON answer of POST /similar-items; --items: print JSON records "
                        "(not with --out: redirect stdout for a file)")
    from twotower.cli.flags import add_exclude_items_flag, add_filter_exact_max_flag, add_filter_flag

    add_exclude_items_flag(p, "POST /similar-items", "the item itself", "--items")
    add_filter_flag(p, "POST /similar-items")
    add_filter_exact_max_flag(p)
    p.add_argument("--threads", type=int, help="torch threads (default: TWOTOWER_THREADS or torch's)")
    add_no_verify(p)
    p.set_defaults(func=cmd_similar)


def _check_args(args: argparse.Namespace) -> int:
    """The list length; argument errors before the (slow) run load, as `recommend` checks its own."""
    from twotower.cli.flags import refuse_json_with_out
    from twotower.cli.flags import check_k_flag
    from twotower.serving.settings import ServiceSettings

    from twotower.cli.main import refuse_index_with_exact

    refuse_index_with_exact(args)
    k = args.k if args.k is not None else ServiceSettings.default_k
    check_k_flag(k)  # the words of tt.similar and POST /similar-items
    from twotower.cli.flags import parse_filters

    args.filters = parse_filters(args.filter)  # its form checked before the run loads; fields and values after
    from twotower.cli.id_lists import parse_id_list

    args.listed_ids = None if args.exclude_items is None else parse_id_list(args.exclude_items, "--exclude-items")
    if args.out and args.item is not None:
        raise ConfigError(f"--out writes the CSV of --items; for one item write `--items {shell_arg(args.item)} --out "
                          f"{shell_arg(args.out)}`, or --json for the printed answer")
    refuse_json_with_out(args, "--items")
    if args.out:
        from twotower.cli.provenance import check_out_and_record

        # refuses a file of a run (its weights, items.csv, ...), the only input, for the CSV and its record
        check_out_and_record(args.out, {}, example="similar.csv")
    return k


def _item_rows(run, spec: str | None, item: str | None = None) -> np.ndarray:  # noqa: ANN001 - TrainedRun
    """Item rows of ``--item``, or of ``--items``: every catalogue item for 'all', else the listed ids once
    each, in order. An unknown id is named with its flag."""
    from twotower.cli.flags import flag_named
    from twotower.cli.id_lists import parse_id_list

    if item is not None:
        with flag_named("--item"):
            return np.asarray([run.item_vocab.index(item)], np.int64)
    assert spec is not None
    if spec.strip() == "all":
        return np.arange(run.n_items, dtype=np.int64)
    given = parse_id_list(spec, "--items")
    ids = list(dict.fromkeys(given))  # an id given twice: one list
    if len(ids) < len(given):  # said, as --users says it: a script pairing ids with the output's rows would shift
        log.warning("--items: %d ids, %d distinct: one list per item (tt.similar gives one per id as given)",
                    len(given), len(ids))
    if not ids:
        raise ConfigError("--items: no item ids given; pass 'all' or a comma list, e.g. --items 50,181")
    from twotower.cli.flags import id_place
    from twotower.pipeline.refusals import ITEM_LIST, locate, rows_naming_every_unknown

    with flag_named("--items"):
        # the first unknown id named by its place as typed, 1-based as --history's (tt.similar: item_ids[1]), then
        # every other unknown one
        rows = rows_naming_every_unknown(
            ids, run.item_vocab.index,
            lambda pos, e: locate(e, id_place("--items", "item", given.index(ids[pos]), len(given))), what=ITEM_LIST)
    return np.asarray(rows, np.int64)


@sigterm_keeps_out  # SIGTERM mid `--items all --out s.csv`: one line on what s.csv holds, status 143
def cmd_similar(args: argparse.Namespace) -> int:
    from twotower.utils.run_folder import check_run_folder

    k = _check_args(args)
    from twotower.cli.flags import check_filter_exact_max

    check_filter_exact_max(args)  # serve's check, before the run loads
    check_run_folder(args.run)  # a wrong folder is one line at once, not after torch is imported
    from twotower.cli.flags import _threads
    from twotower.pipeline.artifacts import TrainedRun
    from twotower.pipeline.recommend import open_run_index

    _threads(args)
    run = TrainedRun.load(args.run)
    rows = _item_rows(run, args.items if args.item is None else None, args.item)  # a typo: one line, before the index
    from twotower.cli.flags import filter_at, filter_item_at
    from twotower.serving.service import filter_allow, run_filter_mask

    # POST /similar-items' checks, before the index
    mask = run_filter_mask(run, args.filters, field_at=filter_at, item_at=filter_item_at)
    args.listed = _listed_rows(run, args.listed_ids)  # checked before the index, as --items'
    index, used = open_run_index(run, args.index, exact=args.exact, item_queries=True)  # the index `twotower serve` answers from
    say(f"ranking with {used}")
    args.allow = filter_allow(mask, index)
    if args.item is not None:
        return _one_item(args, run, index, k, int(rows[0]))
    return _many_items(args, run, index, used, k, rows)


def _one_item(args: argparse.Namespace, run, index, k: int, row: int) -> int:  # noqa: ANN001 - TrainedRun, VectorIndex
    """Print ``--item``'s list: the service's answer (its catalogue records, its shortfall) built by its code."""
    from twotower.cli.printing import _print_items, printable, stdout_json
    from twotower.pipeline.similar import UNPLACED, similar_items, unplaced_item_mask
    from twotower.serving.catalog import ItemCatalog
    from twotower.serving.service import similar_answer

    catalog = ItemCatalog.from_run(run)
    unplaced = unplaced_item_mask(run)  # the query's and the list's: worked out once
    res, spaces = similar_items(run, np.asarray([row], np.int64), k, index, cold_similar=args.cold_similar,
                                unplaced=unplaced, **_allowed(args))
    rows, scores = res.row(0)
    answer = similar_answer(catalog, args.item, k, rows, scores, spaces[0], unplaced=unplaced,
                            filtered=args.allow is not None, listed=bool(args.listed_ids))
    if "shortfall" in answer:  # with --json too, as `recommend --json` says it: a script's log shows it
        print(answer["shortfall"]["reason"], file=sys.stderr)
    if args.json:
        print(stdout_json(answer, default=str))
        return 0
    for note in answer.get("warnings", []):  # an item the model cannot place (no list, and why), or one in the list
        print(f"warning: {note}", file=sys.stderr)
    if spaces[0] == UNPLACED:
        return 0
    where = " (queried by its semantic head: no training interactions)" if spaces[0] == "semantic" else ""
    _print_items(answer["items"], False, f"top {k} similar to {printable(catalog.display_name(row))}{where}", k)
    return 0


def _many_items(args: argparse.Namespace, run, index, used: str, k: int, rows: np.ndarray) -> int:  # noqa: ANN001
    """Write (or print) the lists of ``--items`` as CSV rows item_id,similar_item_id,rank,score; ``used``: the
    index line printed, for the record beside ``--out FILE``."""
    from twotower.cli.paths import STDOUT
    from twotower.cli.printing import stdout_data_write
    from twotower.pipeline.results_csv import results_to_json, write_results_csv
    from twotower.pipeline.similar import UNPLACED, similar_items
    from twotower.results import Results

    train_cfg = run.config.train  # the run's own progress settings, as `recommend --users` reads them
    every_s = train_cfg.log_every_s if train_cfg.progress else None
    res, spaces = similar_items(run, rows, k, index, cold_similar=args.cold_similar, log_every_s=every_s,
                                **_allowed(args))
    unplaced = np.asarray([sp == UNPLACED for sp in spaces], dtype=bool)
    # an unplaced item's empty list is no shortfall: the line below says why it has none
    _say_shortfall(run, rows[~unplaced], Results(res.ids[~unplaced], res.scores[~unplaced]), k,
                   filtered=args.allow is not None, listed=bool(args.listed_ids))
    if unplaced.any():
        print(f"{int(unplaced.sum())} of {len(rows)} items have no training interactions and the item tower reads "
              f"only the item ID, so the model cannot place them: no rows for them (e.g. item "
              f"{run.item_vocab.id_at(int(rows[unplaced][0]))})", file=sys.stderr)
    n_sem = spaces.count("semantic")
    if n_sem:
        say(f"{n_sem} of {len(rows)} items have no training interactions and were queried by their semantic "
            "head (--cold-similar item: by their served vector)")
    if args.json:  # never with --out (refused in _check_args)
        print(results_to_json(run, rows, res, query="item"))
        return 0
    if args.out and args.out != STDOUT:  # the CSV and beside it FILE.json, what produced it (cli/provenance.py)
        from twotower.cli.provenance import similar_record, write_csv_and_record

        ids = None if args.items.strip() == "all" else [run.item_vocab.id_at(int(r)) for r in rows]
        n = write_csv_and_record(
            args.out, lambda write: write_results_csv(run, rows, res, write, log_every_s=every_s, query="item"),
            lambda n_rows, sha: similar_record(args, run, index, used, k=k, item_ids=ids, n_items=len(rows),
                                               n_rows=n_rows, csv_sha256=sha))
    else:  # `--out -` and no --out: stdout
        n = write_results_csv(run, rows, res, stdout_data_write, log_every_s=every_s, query="item")
    if args.out:  # stderr, so that with `--out -` stdout holds the CSV alone
        where = "standard output" if args.out == STDOUT else args.out
        # the items the model cannot place have no rows (counted above): "for 63 items" over 60 items' rows misled
        listed = len(rows) - int(unplaced.sum())
        say(f"wrote {n} rows for {listed} items to {where}")
    return 0


def _allowed(args: argparse.Namespace) -> dict:
    """:func:`similar_items`' arguments of ``--filter`` (the service's allow-list and ``--filter-exact-max``)
    and of ``--exclude-items``."""
    listed = {"listed": args.listed} if args.listed is not None else {}
    if args.allow is None:
        return listed
    return {"allow": args.allow, "exact_subset_max": args.filter_exact_max, **listed}  # as `serve --filter-exact-max`


def _listed_rows(run, ids: list[str] | None):  # noqa: ANN001, ANN202 - TrainedRun, np.ndarray | None
    """Item rows of ``--exclude-items`` (None without it): an unknown id named by its place, 1-based as
    ``--items``' (``--exclude-items: item 2 of 3: unknown item ...``; HTTP ``exclude_items[1]``)."""
    from twotower.cli.flags import flag_named, id_place
    from twotower.pipeline.exclusions import listed_rows
    from twotower.pipeline.refusals import locate

    if ids is None:
        return None
    n = len(ids)
    with flag_named("--exclude-items"):
        return listed_rows(ids, run.item_vocab.index, lambda pos, e: locate(e, id_place("--exclude-items", "item", pos, n)))


def _say_shortfall(run, rows: np.ndarray, res, k: int, *, filtered: bool = False,  # noqa: ANN001
                   listed: bool = False) -> None:
    """Tell stderr when lists are shorter than k, in the words of the service's shortfall."""
    from twotower.index import shortfall
    from twotower.serving.service import _shortfall, similar_excluded  # the service's wording

    short = shortfall(res, k)
    if short.any():
        worst = int(short.argmax())
        item_id = run.item_vocab.id_at(int(rows[worst]))
        reason = _shortfall(k, k - int(short[worst]), filtered=filtered,
                            excluded=similar_excluded(item_id, listed))["reason"]
        print(f"{int((short > 0).sum())} of {len(short)} lists are shorter than k={k} (e.g. item {item_id}: "
              f"{reason})", file=sys.stderr)
