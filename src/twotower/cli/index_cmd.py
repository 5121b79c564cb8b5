"""`twotower index build|info`: an autotuned vector index over a run's item embeddings (imports are lazy)."""
from __future__ import annotations

import argparse
import os
import json
import sys
from pathlib import Path

from twotower.errors import ConfigError, IntegrityError, NotFoundError
from twotower.utils.wording import plural

__all__ = ["register", "cmd_index_build", "cmd_index_info"]

#: IndexPolicy's fields and the pinned search knobs as the flags of `twotower index build`: its messages name what
#: the user typed
_FLAGS = {"target_recall": "--target-recall", "k": "--k", "tune_queries": "--queries",
          "exact_p99_ms": "--exact-budget-ms", "seed": "--seed", "latency_threads": "--latency-threads", "nprobe": "--nprobe", "efSearch": "--ef-search"}
#: Before the run loads its N and D are unknown: a --index factory string's knobs are read from an empty index over
#: this many vectors of the first of these dims FAISS accepts (a PQ needs its m to divide D). The knobs depend on
#: neither; the IVF list count does (N), so `--nprobe` above it is refused once the run has loaded
_PROBE_N = 100_000
_PROBE_DIMS = (64, 96, 128, 256)


def register(sub: argparse._SubParsersAction) -> None:
    from twotower.cli.main import add_no_verify
    from twotower.index.autotune import IndexPolicy  # every default is declared there, once

    pol = IndexPolicy()
    p = sub.add_parser("index", help="build and inspect the vector index a run is served from")
    isub = p.add_subparsers(dest="index_cmd", required=True)
    b = isub.add_parser("build", help="autotune an index over the run's item embeddings and save it")
    # --run-dir: under torchrun, `--run` is taken as an abbreviation of torchrun's own --run-path
    b.add_argument("--run", "--run-dir", dest="run", required=True, help="run folder (alias --run-dir for torchrun)")
    b.add_argument("--index", default="auto",
                   help="auto (exact search when it fits --exact-budget-ms, else the fastest of flat, ivf, hnsw, ivfpq "
                        "meeting the recall target), flat, ivf, hnsw, ivfpq, exact, or a FAISS factory string; each "
                        "is searched at its cheapest setting (smallest nprobe / efSearch) meeting the target")
    b.add_argument("--exact-budget-ms", type=float, default=None,
                   help="with --index auto: choose exact search when its single-query p99 is at most this many ms "
                        f"(default {pol.exact_p99_ms:g})")
    b.add_argument("--target-recall", type=float, default=pol.target_recall,
                   help="recall@k against exact search (default %(default)s)")
    b.add_argument("--k", type=int, default=pol.k, help="k of the recall target (default %(default)s)")
    b.add_argument("--queries", type=int, default=pol.tune_queries,
                   help="user vectors sampled as tuning queries (default %(default)s)")
    b.add_argument("--max-train", type=int, default=None, help="cap on FAISS training vectors (default: every vector in "
                   f"one process, {pol.distributed_max_train:,} under torchrun), raised to FAISS's 39 per IVF list or "
                   "PQ centroid")
    b.add_argument("--seed", type=int, default=pol.seed,
                   help="seed of the query sample, the training sample and FAISS's k-means / HNSW draws "
                        "(default %(default)s)")
    b.add_argument("--out", help="index folder (default RUN/index, which `twotower serve` picks up)")
    b.add_argument("--force", action="store_true",
                   help="replace the index folder even when it holds files no index build wrote (they are removed)")
    b.add_argument("--threads", type=int, help="torch/FAISS threads (default: TWOTOWER_THREADS or the library's)")
    b.add_argument("--latency-threads", type=int, default=pol.latency_threads,
                   help="threads the single-query latencies (p50/p99, and so --exact-budget-ms) are timed on "
                        "(default %(default)s: serve's --threads default, what one request computes on)")
    b.add_argument("--nprobe", type=int, default=None,
                   help="pin nprobe of an IVF index (--index ivf, ivfpq or an IVF factory string; under torchrun the "
                        "merged one): measured and recorded as given, not swept (default: the smallest nprobe "
                        "reaching --target-recall); not with --ef-search")
    b.add_argument("--ef-search", type=int, default=None,
                   help="pin efSearch of an HNSW index (--index hnsw or an HNSW factory string), measured and recorded "
                        "as given, not swept (default: the smallest efSearch reaching --target-recall); not with --nprobe")
    add_no_verify(b)
    b.set_defaults(func=cmd_index_build)
    i = isub.add_parser("info", help="describe the saved index of a run and check it matches the model")
    i.add_argument("--run", required=True, help="run folder whose index to describe")
    i.add_argument("--index", dest="index_dir", help="index folder (default RUN/index)")
    i.add_argument("--json", action="store_true", help="print meta.json (+ the tuning summary) as JSON")
    add_no_verify(i)
    i.set_defaults(func=cmd_index_info)


def _policy(args: argparse.Namespace):  # noqa: ANN202 - IndexPolicy
    """The flags as an IndexPolicy (validated there), errors naming the flag the user typed."""
    from twotower.index.autotune import IndexPolicy

    # --seed checked here too: a negative one reached numpy after the run had loaded, as a traceback
    over = {"target_recall": args.target_recall, "k": args.k, "tune_queries": args.queries, "seed": args.seed,
            "latency_threads": args.latency_threads}
    from twotower.cli.flags import check_range

    check_range("--max-train", args.max_train, 1)  # was "max_train must be ...", after the run loaded
    _pin(args)
    _applies(args)
    _check_numbers(args)
    if args.exact_budget_ms is not None:
        over["exact_p99_ms"] = args.exact_budget_ms
    try:
        return IndexPolicy(**over)
    except ConfigError as e:
        from twotower.cli.flags import fields_as_flags

        # IndexPolicy names its fields with the class (IndexPolicy.k: must be ...)
        raise ConfigError(fields_as_flags(str(e), "IndexPolicy", _FLAGS.get)) from None


def _check_numbers(args: argparse.Namespace) -> None:
    """The number flags in IndexPolicy's bounds, said as `recommend --k 0` is (``--queries: must be at least 1, got
    0``): IndexPolicy's words, re-named by flag, read "--queries must be a positive integer, got 0"."""
    import math

    from twotower.cli.flags import check_range
    from twotower.config import MAX_THREADS
    from twotower.pipeline.refusals import k_refusal

    if (why := k_refusal(args.k)) is not None:  # the k of the recall target: recommend --k's bounds and words
        raise ConfigError(f"--k: {why}")
    check_range("--queries", args.queries, 1)
    check_range("--seed", args.seed, 0)  # numpy's generators take no negative seed
    check_range("--target-recall", args.target_recall, 0, 1, lo_open=True)
    check_range("--latency-threads", args.latency_threads, 1, MAX_THREADS)
    budget = args.exact_budget_ms
    check_range("--exact-budget-ms", budget, 0, why="0: never exact")
    if budget is not None and math.isinf(budget):
        raise ConfigError(f"--exact-budget-ms: must be a finite number, got {budget}")


def _applies(args: argparse.Namespace) -> None:
    """Refuse, before the run loads, a flag the named --index would ignore (both were dropped without a word)."""
    from twotower.index.faiss_index import refuse_idmap

    refuse_idmap(args.index, "--index")  # named as typed (tt.build_index would name its argument, index)
    spec = args.index.strip().lower()
    if args.exact_budget_ms is not None and spec != "auto":
        raise ConfigError(f"--exact-budget-ms decides between exact search and an approximation under --index auto; "
                          f"--index {spec} is built whatever exact search costs: drop the flag or pass --index auto")
    if args.max_train is not None and not _trained(args.index.strip()):
        raise ConfigError(f"--max-train caps the training sample of an IVF or PQ index; --index {args.index.strip()} "
                          "is not trained: drop the flag or pass --index ivf, ivfpq or auto")


def _trained(spec: str) -> bool:
    """Whether FAISS trains the index ``spec`` names (auto's IVF candidates do). A factory string is read from an
    empty index at the placeholder dims (`--index HNSW32 --max-train 50` was refused only after the run loaded, as
    "max_train 50"); one FAISS takes at none of them is left to the check after the load."""
    from twotower.index.faiss_index import needs_training

    lower = spec.lower()
    if lower in ("exact", "flat", "hnsw"):
        return False
    if lower in ("auto", "ivf", "ivfpq"):
        return True
    for dim in _PROBE_DIMS:
        try:
            return needs_training(spec, _PROBE_N, dim)[1]
        except ConfigError:
            continue
    return True


def _pin(args: argparse.Namespace) -> dict[str, int] | None:
    """The setting --nprobe / --ef-search pins (None: swept), refused before the run loads where it cannot apply."""
    nprobe, ef_search = getattr(args, "nprobe", None), getattr(args, "ef_search", None)
    from twotower.cli.flags import check_range

    for flag, value in (("--nprobe", nprobe), ("--ef-search", ef_search)):
        check_range(flag, value, 1)
    if nprobe is not None and ef_search is not None:
        raise ConfigError("--nprobe pins an IVF index and --ef-search an HNSW one: pass the one of the --index built")
    if nprobe is None and ef_search is None:
        return None
    flag, kinds = ("--nprobe", "ivf, ivfpq or an IVF factory string") if nprobe is not None else \
        ("--ef-search", "hnsw or an HNSW factory string")
    spec = args.index.strip().lower()
    if spec in ("auto", "exact", "flat") or (spec == "hnsw" and nprobe is not None) \
            or (spec in ("ivf", "ivfpq") and ef_search is not None):
        # auto compares several index types, each at its own cheapest setting: one knob value cannot fit them all
        raise ConfigError(f"{flag} pins a setting of one index type: --index {kinds}, not --index {spec}")
    if ef_search is not None and int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise ConfigError("--ef-search: an HNSW index cannot be built across ranks; run `twotower index build` in "
                          "one process")
    pin = {"nprobe": nprobe} if nprobe is not None else {"efSearch": ef_search}
    if spec not in ("ivf", "ivfpq", "hnsw"):  # a factory string: `--index HNSW32 --nprobe 4` failed after the load
        _has_knob(args.index.strip(), next(iter(pin)), nprobe)
    return pin


def _has_knob(spec: str, knob: str, nprobe: int | None = None) -> None:
    """Refuse a pin of ``knob`` that the factory string ``spec`` has no knob for, before the run loads; and an
    ``nprobe`` above the IVF list count the string fixes (`IVF8,Flat`, not `IVF{nlist},Flat`, whose count is the
    run's), which was refused only after the load.

    Left to the check after the load where FAISS takes ``spec`` at none of the placeholder dims (a typo, an unusual
    PQ split): that check reads the run's own N and D, and its error also names the flag."""
    from twotower.index.faiss_index import factory_knobs

    for dim in _PROBE_DIMS:
        try:
            factory, knobs, nlist = factory_knobs(spec, _PROBE_N, dim)
        except ConfigError:
            continue
        if knob not in knobs:
            named = ", ".join(f"{k} ({_FLAGS[k]})" if k in _FLAGS else k for k in knobs)
            raise ConfigError(f"{_FLAGS[knob]}: --index {spec} has no {knob} to pin; its search knobs: "
                              f"{named or 'none (it has a single setting)'}")
        # the count is the string's own when another catalogue size gives the same (it is not sized to N)
        if nprobe is not None and nlist is not None and nprobe > nlist \
                and factory_knobs(spec, 10 * _PROBE_N, dim)[2] == nlist:
            raise ConfigError(f"--nprobe {nprobe} is more than the {plural(nlist, 'list')} of {factory}; "
                              f"--nprobe {nlist} already searches every list")
        return


def _flag_named(msg: str, pin: dict[str, int] | None) -> str:
    """A library error about the pinned knob, naming its flag: `nprobe 100 is more than the 43 lists ...` (the
    list count needs the run's N, so it is checked after the load) said nothing of --nprobe."""
    knob = next(iter(pin or {}), None)
    if knob is None:
        return msg
    key = f"params[{knob!r}]"  # the library's name for the entry (check_pin)
    return msg.replace(key, _FLAGS[knob]) if msg.startswith(key) else msg


def cmd_index_build(args: argparse.Namespace) -> int:
    from twotower.cli.printing import say_out  # the build's opening line: not under -q
    from twotower.cli.stopping import interrupt_status, path_identity, stopped_by, terminate_as_interrupt
    from twotower.index.storage import is_index_dir
    from twotower.pipeline.index_build import build_index, missed_target_advice
    from twotower.utils.runtime import threads_from_env

    policy = _policy(args)  # the flags checked before the run loads, errors naming them
    pin = _pin(args)
    out = Path(args.out) if args.out else Path(args.run) / "index"
    before, earlier = path_identity(str(out)), is_index_dir(out)
    # the core is tt.build_index's, so the command and the Python call save the same index and tuning record;
    # SIGTERM unwinds as Ctrl-C does (the new index's temporary folder removed), as in `twotower train`
    try:
        with terminate_as_interrupt():
            build_index(args.run, args.index, out=args.out, policy=policy, threads=args.threads or threads_from_env(),
                        max_train=args.max_train, params=pin, force=args.force, echo=print, echo_progress=say_out, flag="--out", what="twotower index build",
                        advice=missed_target_advice(lambda v: f"--index {v}", _FLAGS["target_recall"]))
    except KeyboardInterrupt as e:
        # it ended without a word (SIGTERM: Python's default, on the spot), though the earlier index was intact
        if os.environ.get("RANK", "0") in ("", "0"):  # under torchrun rank 0 writes the index and speaks for all
            print(f"{stopped_by(e)}: {_build_left(out, before, earlier)}", file=sys.stderr)
        return interrupt_status(e)
    except ConfigError as e:
        msg = _flag_named(str(e), pin)
        if msg == str(e):
            raise
        raise ConfigError(msg) from None
    return 0


def _build_left(out: Path, before: tuple[int, int] | None, earlier: bool) -> str:
    """What a stopped `twotower index build` left at ``out``: the index folder is swapped in whole, so a new identity
    of the folder says the new index is in place; otherwise the earlier one (if any) is there as it was."""
    from twotower.cli.stopping import path_identity

    if path_identity(str(out)) not in (None, before):
        return f"{out} was written before it stopped: it holds the new index" + (
            " (the previous one was replaced)" if earlier else "")
    if earlier:
        return (f"the build stopped before {out} was written; the previous index there is kept, intact, as it was; "
                "run the command again to replace it")
    return f"the build stopped before {out} was written, so no index was saved; run the command again to build one"


def cmd_index_info(args: argparse.Namespace) -> int:
    from twotower.utils.run_folder import check_run_folder

    check_run_folder(args.run)  # a wrong folder is one line at once, not after torch is imported
    from twotower.index.autotune import params_text, queries_note
    from twotower.index.storage import read_meta, read_tuning
    from twotower.pipeline.artifacts import TrainedRun
    from twotower.pipeline.recommend import EXACT_HINT, open_run_index, with_build_command

    run = TrainedRun.load(args.run)
    directory = Path(args.index_dir) if args.index_dir else Path(args.run) / "index"
    try:  # as recommend and serve: checksums, the run's model and its item rows as ids (and their rebuild command)
        open_run_index(run, directory)
    except (ConfigError, IntegrityError) as e:
        # their way around a stale index, --exact, is no flag of `index info`: only the rebuild applies here
        raise type(e)(str(e).replace(EXACT_HINT, "")) from None
    try:
        meta = read_meta(directory)
    except NotFoundError as e:  # no index (RUN/index is then no error to open_run_index: it ranks exactly)
        raise with_build_command(e, run, directory) from None
    tune = read_tuning(directory)  # checked against meta.json like the index files
    if args.json:
        print(json.dumps({"meta": meta, "tune": tune, "fingerprint_match": True}, indent=2))
        return 0
    knobs = params_text(meta.get("params") or {})  # as `index build` writes a setting: efSearch=16, not a dict
    print(f"index {directory}: {meta['backend']} {meta.get('factory') or ''}" + (f" ({knobs})" if knobs else ""))
    print(f"  {meta['count']:,} vectors of dim {meta['dim']}, metric {meta['metric']}, exact={meta.get('is_exact')}, "
          f"created {meta.get('created')}")
    print(f"  built for model {meta.get('model_fingerprint')} = this run's model (checksums verified)")
    if tune and tune.get("chosen"):
        c = tune["chosen"]
        on = f"; {queries_note(tune['n_queries'], tune.get('n_distinct_queries'))}" if "n_queries" in tune else ""
        print(f"  tuned: recall@{tune['k']} {c['recall']:.4f} (target {tune['target_recall']:g}{on}), "
              f"{c['qps_batch']:,.0f} QPS batched, p50 {c['p50_ms']:.3f} ms, p99 {c['p99_ms']:.3f} ms single")
    similar = (tune or {}).get("similar_recall") or {}
    if similar.get("recall") is not None:  # an index built before item queries were measured says nothing here
        print(f"  similar (item queries): recall@{similar['k']} {similar['recall']:.4f} on {similar['queries']:,} items "
              f"({'meets' if similar.get('met_target', True) else 'below'} target {similar['target']:g})")
        from twotower.pipeline.similar_recall import similar_recall_shortfall

        note = similar_recall_shortfall(directory, tune, run.dir)
        if note:
            print(f"  warning: {note}")
    if tune and tune.get("requested"):  # an index built before tune.json recorded the request says nothing here
        budget = tune.get("exact_budget_ms")
        print(f"  requested: --index {tune['requested']}" + (
            f" (exact search if its single-query p99 fits {budget:g} ms: --exact-budget-ms)" if budget is not None
            else ""))
    if tune and tune.get("reason"):
        print(f"  why: {tune['reason']}")
    return 0
