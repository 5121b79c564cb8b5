"""`twotower explain`: why a run recommends an item to a user (mounted by ``cli.main`` when present)."""
from __future__ import annotations

import argparse
import logging

__all__ = ["register", "cmd_explain", "format_explanation", "explanation_json"]

COLD_MARK = "*"  #: after a history item's contribution in the table: the item had no training interactions


def register(sub: argparse._SubParsersAction) -> None:
    from twotower.cli.flags import OneId
    from twotower.cli.main import add_no_verify

    p = sub.add_parser("explain", help="explain one recommendation: history contributions, shared metadata, a sentence")
    p.add_argument("--run", required=True, help="run folder")
    who = p.add_mutually_exclusive_group(required=True)
    who.add_argument("--user", action=OneId, help="a user id of the run")
    who.add_argument("--history", help="comma list of item ids (oldest first), or a JSON array for ids with "
                     'commas (["it,em", "42"]): an ad-hoc user')
    p.add_argument("--item", action=OneId, required=True, help="the item id to explain")
    p.add_argument("--user-features", metavar="JSON",
                   help='with --history: the new user\'s features as a JSON object, e.g. \'{"age": 25, "gender": "F"}\' '
                        "(as `twotower recommend --user-features` and POST /explain take them); "
                        "with --history '' a user with no history yet is served from them alone (a run with user "
                        "features)")
    p.add_argument("--history-from", nargs="+", metavar="FILE",
                   help="with --user: read the user's input history from these interaction files (time order) "
                        "instead of the training history, without refitting, as `recommend --history-from` and "
                        "`serve --history-from` read it")
    p.add_argument("--top", type=int, default=5, help="history items listed (default 5)")
    p.add_argument("--method", default="loo", choices=["loo", "gradxinput"],
                   help="loo: exact leave-one-out (default); gradxinput: a first-order estimate, one backward pass "
                        "(gradient x input of each history item's embedding: for a pooled tower its share of the "
                        "pooled history; it may rank the history differently from loo; a history of one item, "
                        "repeated or not, gets its exact share, the history's total)")
    p.add_argument("--json", action="store_true", help="print the explanation as JSON")
    p.add_argument("--threads", type=int, help="torch threads (default: TWOTOWER_THREADS or torch's)")
    add_no_verify(p)
    p.set_defaults(func=cmd_explain)


def format_explanation(e: dict) -> str:
    """The sentence, the score, then a small table of the history contributions."""
    from twotower.cli.printing import printable  # titles and ids are the catalogue's: no raw line breaks or escapes

    lines = [printable(e["text"]), ""]
    item = e["item"]
    title = f"  {printable(item['title'])}" if item.get("title") else ""  # no title in a run without titles
    # the item's place in the user's unfiltered list, and without the history where the tower reads one
    rank = "" if e.get("rank") is None else f"rank {e['rank']}" + (
        "" if e.get("empty_history_rank") is None else f" ({e['empty_history_rank']} with no history)") + "; "
    lines.append(f"item {printable(e['item_id'])}{title}  score {e['score']:.4f}  "
                 f"({rank}history adds {e['history_total']:+.4f}; basis: {e['basis']}; method: {e['method']})")
    if "heads" in e:
        h = e["heads"]
        lines.append(f"heads: alpha {h['alpha']:.3f}  semantic {h['semantic']:+.4f}  collaborative {h['collaborative']:+.4f}")
    if e["history"]:
        # the run's first multi-valued item column (shared_metadata lists those first, as lists): MovieLens's
        # genres, a shop's tags; a fixed "genres" header stood empty over every other catalogue
        multi = next((k for k, v in e["shared_metadata"].items() if isinstance(v, list)), None)
        # a run without titles has none in its records: no empty "title" column
        titled = any("title" in h for h in e["history"])
        header = ("contribution", "item_id", *(["title"] if titled else []), *([multi] if multi else []))
        rows = [header]
        # a history item without training interactions (the JSON's `cold`) marked: it was listed as any reason. The
        # others get a space there, so the numbers stay aligned
        cold = any(h.get("cold") for h in e["history"])
        rows += [(f"{h['contribution']:+.4f}{COLD_MARK if h.get('cold') else ' ' * cold}", printable(h["item_id"]),
                  *([printable(h.get("title") or "")] if titled else []),
                  *([printable(h.get(multi) or "")] if multi else [])) for h in e["history"]]
        widths = [max(len(r[c]) for r in rows) for c in range(len(header))]
        lines.append("")
        for r in rows:
            lines.append("  ".join(v.rjust(widths[0]) if c == 0 else v.ljust(widths[c]) for c, v in enumerate(r)).rstrip())
        if cold:
            lines.append(f"{COLD_MARK} no training interactions (a cold item): the user tower has not learned it, so "
                         "its contribution carries no learned signal, and the sentence does not name it")
    left = e.get("history_left_out") or []
    if left:  # a new user's items the tower does not read: listed, as the JSON lists them, never as a reason
        named = ", ".join(printable(h["item_id"]) + (f" {printable(h['title'])}" if h.get("title") else "") for h in left)
        lines += ["", f"left out of the history (no training interactions: the user tower has not learned them): {named}"]
    shared = [f"{k}: " + ", ".join(f"{printable(x['value'])} ({x['count']})" for x in v)
              for k, v in e["shared_metadata"].items() if isinstance(v, list) and v]
    if shared:
        n = e["shared_metadata"]["history_items"]
        # a tower that reads no history has no window: "the last N" are then the whole history, which it does not read
        compared = (f"the last {n} history items" if e.get("reads_history", True)
                    else f"your {n} history items (this model does not read them)")
        lines += ["", f"shared with {compared}: " + "; ".join(shared)]
    return "\n".join(lines)


def cmd_explain(args: argparse.Namespace) -> int:
    from twotower.cli.flags import (
        _threads,
        check_history_flag,
        check_history_ids,
        flag_named,
        parse_user_features,
        refuse_empty_history_early,
        refuse_missing_inputs,
        say_feature_notes,
        say_flag_note,
        user_features_named,
        user_features_words,
    )
    from twotower.errors import ConfigError
    from twotower.utils.run_folder import check_run_folder

    from twotower.cli.id_lists import parse_id_list

    if args.user is not None and not args.user.strip():
        # it was "unknown user ''" once the run had loaded; the words of `recommend --user ''` and POST /explain's 422
        from twotower.pipeline.refusals import empty_user_id_refusal

        raise ConfigError(f"--user: {empty_user_id_refusal('--history')}")
    history = None if args.history is None else parse_id_list(args.history, "--history")
    # the rule and words of POST /explain and tt.explain_by_id; a run with user features decides once loaded
    refuse_empty_history_early(history, args.run)
    from twotower.pipeline.refusals import top_refusal

    # named as the flag, before the run loads (was "explain top: ..." after it); the rule of POST /explain and Python
    if (why := top_refusal(args.top)) is not None:
        raise ConfigError(f"--top: {why}")
    if args.history_from and history is not None:  # the rule and words of `recommend`
        raise ConfigError("--history-from reads known users' histories from files; --history describes one new "
                          "user: use one or the other")
    features = parse_user_features(args)  # before the (slow) run load
    refuse_missing_inputs({"--history-from": args.history_from})
    check_run_folder(args.run)  # a wrong folder is one line at once, not after torch is imported
    from twotower.explain.explainer import explain_notes
    from twotower.pipeline.artifacts import TrainedRun
    _threads(args)
    run = TrainedRun.load(args.run)
    # each id checked under its flag first: an unknown item could be the --item or one of --history
    with flag_named("--user"):
        if args.user is not None:
            from twotower.errors import NotFoundError
            from twotower.pipeline.refusals import hint_unknown_user

            try:
                run.user_row(args.user)
            except NotFoundError as e:  # as `recommend --user` and POST /explain point to --history
                raise hint_unknown_user(e, run, "--history") from None
    if history is not None:  # empty: only with --user-features on a run that reads them
        history = check_history_flag(history, run, features)
    check_history_ids(history or [], run)  # every unknown id named, as recommend --history names them
    with flag_named("--item"):
        run.item_vocab.index(args.item)
    warnings: list[str] = []
    from twotower.explain import explain_recommendation

    item_row = run.item_vocab.index(args.item)
    if args.history_from:
        from twotower.pipeline.histories import read_input_histories

        # the input history replaces the stored one, as POST /explain reads it under `serve --history-from` (the
        # user's rows, not their ids: explain_by_id takes a known user or a new user's history, not both)
        user_row = run.user_row(args.user)
        inputs = [int(r) for r in read_input_histories(run, args.history_from).sequences.of(user_row)]
        if not inputs:  # as `recommend --history-from` and POST /explain say it: not their training history
            warnings.append(f"user {args.user} has no rows of known items in the --history-from files: the item is "
                            "explained from an empty input history, not from their training history")
        e = explain_recommendation(run, user_row=user_row, history_rows=inputs, item_row=item_row,
                                   top=args.top, method=args.method, user_features=features)
    else:  # the ids were checked above, as explain_by_id checks them (which logged the notes below in Python's words)
        user_row = None if args.user is None else run.user_row(args.user)
        rows = None if history is None else [run.item_vocab.index(i) for i in history]
        with user_features_named():  # a tower output that is not finite: named by --user-features
            e = explain_recommendation(run, user_row=user_row, history_rows=rows, item_row=item_row, top=args.top,
                                       method=args.method, user_features=features)
    for note in warnings:
        logging.getLogger("twotower").warning("%s", note)
    # the notes of POST /explain's warnings (features, an unplaced item, cold --history or --history-from items), on stderr in the
    # flags' words (--json: also in the answer, in POST /explain's)
    notes = (explain_notes(run, item_row, features, inputs, f"user {args.user}'s history in the --history-from files")
             if args.history_from else explain_notes(run, item_row, features, None if history is None else rows))
    for note in notes:
        if user_features_words(note) is None:
            say_flag_note(note, "history", "--history")
        else:
            say_feature_notes([note])
    warnings += notes
    if args.json:
        from twotower.cli.printing import stdout_json

        print(stdout_json(explanation_json(e, warnings), indent=2))
    else:
        print(format_explanation(e))
    return 0


def explanation_json(explanation: dict, warnings: list[str]) -> dict:
    """What ``explain --json`` prints: the explanation as POST /explain's ``explanation`` holds it (the bare
    object issue 6 spells), with the answer's ``warnings`` when there are any, under the key and on the
    condition POST /explain uses (they reached stderr only, so a JSON reader never saw them)."""
    return {**explanation, "warnings": list(warnings)} if warnings else explanation
