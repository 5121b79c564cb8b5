"""`twotower demo`: MovieLens-100K end to end in a few minutes on a laptop CPU."""
from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

log = logging.getLogger("twotower.demo")


def cmd_demo(args: argparse.Namespace) -> int:
    """The demo with SIGTERM stopping it as Ctrl-C does, and one line saying what its run folder holds, as
    `twotower train` says: killed mid-training it ended on the spot, silent (status -15), its half-written run
    folder (or, beside an earlier run, its staging folder) left without a word on what to run next."""
    from twotower.cli.stopping import interrupt_status, stopped_by, terminate_as_interrupt

    left: list[Callable[[], str]] = [lambda: ""]  # what to say of --out if stopped: the last one the demo set
    try:
        with terminate_as_interrupt():
            return _demo(args, left)
    except KeyboardInterrupt as e:
        line = left[-1]()
        print(stopped_by(e) + (f": {line}" if line else ""), file=sys.stderr)
        return interrupt_status(e)


def _demo(args: argparse.Namespace, left: list[Callable[[], str]]) -> int:
    from twotower.cli.evaluate_cmd import print_eval_table
    from twotower.cli.train_cmd import item_item_summary
    from twotower.config import load_config
    from twotower.data.movielens import fetch_movielens_100k, load_movielens_100k
    from twotower.errors import ConfigError
    from twotower.utils.shell import shell_arg
    from twotower.evaluation.plots import plot_recall_at_k
    from twotower.pipeline.evaluate_run import evaluate_run
    from twotower.pipeline.recommend import exclusions_from_files, recommend_users, results_to_items
    from twotower.pipeline.run import train_run
    from twotower.utils.runtime import run_threads, set_threads

    from twotower.cli.flags import check_range

    check_range("--epochs", args.epochs, 1)  # 0 read as "not given" and ran the config's 30 epochs
    t0 = time.perf_counter()
    out = Path(args.out)
    from twotower.pipeline.staging import check_new_run_dir

    check_new_run_dir(out, (), resume=False, flag="--out")  # train_run's refusal, before the download and as typed
    # one rule for every run: --threads, else TWOTOWER_THREADS, else half the idle cores (utils.runtime.run_threads)
    threads = run_threads(args.threads)
    set_threads(threads)  # for the whole demo: train_run gives its caller's counts back, the evaluation runs on these
    print("== 1/4 MovieLens-100K: fetching (GroupLens, falling back to the RecBole 1.2.1 wheel) ...", flush=True)
    path = fetch_movielens_100k()
    print(f"   data in {path}")
    # --user is shown only after training (a minute): a typo is said now, against the data's user ids
    users = set(load_movielens_100k(path).interactions["user_id"])
    if args.user not in users:
        raise ConfigError(f"--user: unknown user {args.user!r}; MovieLens-100K's {len(users)} users are "
                          f"{min(users, key=int)} to {max(users, key=int)}")
    overrides = ["data.dataset=movielens-100k", f"train.threads={threads}"]
    if args.epochs is not None:
        overrides.append(f"train.epochs={args.epochs}")
    cfg = load_config(overrides=overrides, overrides_label="command line")
    print(f"== 2/4 training the default two-tower model ({cfg.train.epochs} epochs max, early stopping on valid "
          f"NDCG@10 with patience {cfg.train.patience}) ...", flush=True)
    from twotower.cli.train_cmd import training_left
    from twotower.pipeline.staging import needs_staging, staging_path

    staged = staging_path(out) if needs_staging(out, resume=False) else None  # beside an earlier run, as train_run
    started = time.time()
    left.append(lambda: training_left(out, staged, resumed=False, since=started, checkpointing=cfg.train.checkpoint,
                                      takes_resume=False))
    run, result, prep = train_run(cfg, out)
    left.append(lambda: f"the trained run in {out} is complete: `twotower evaluate --run {shell_arg(out)}` scores it")
    print(f"   best valid NDCG@10 {result.best_metric:.4f} at epoch {result.best_epoch} ({result.seconds:.0f}s)")
    if (line := item_item_summary(result, "NDCG@10")) is not None:
        print(f"   {line}")
    print("== 3/4 test metrics against baselines (same split, same protocol) ...", flush=True)
    rows = evaluate_run(run, baselines=cfg.eval.baselines, ks=cfg.eval.ks)
    from twotower.utils.atomic import atomic_write_json

    atomic_write_json(out / "metrics.json", {"test": rows})
    print_eval_table(rows, (10, 20), "MovieLens-100K test, temporal 80/10/10")
    # titled as `evaluate --plot` titles it: "Recall@k" alone did not say which split or run it is of
    from twotower.utils.extras import plotting_missing

    if (no_plot := plotting_missing()) is None:
        plot_recall_at_k({r["model"]: r for r in rows}, out / "recall_at_k.png",
                         title=f"Recall@k, MovieLens-100K test (full catalogue), run {out}")
    else:  # the table above is the demo's result: the plot beside it is not worth a traceback
        print(f"   no {out / 'recall_at_k.png'}: {no_plot}")
    print(f"== 4/4 recommendations for user {args.user} (training items excluded)", flush=True)
    from twotower.explain.explainer import run_item_names

    # a title two items share (MovieLens-100K has 18) is printed apart, by year or id, as explanations name it
    names = run_item_names(run)

    def shown(r: int) -> str:
        return names.get(run.item_vocab.id_at(r), run.title(r))

    row = run.user_row(args.user)
    seen = run.seen_rows(row)
    last = [shown(int(i)) for i in seen[-5:]]
    print(f"   recently watched: {'; '.join(last)}")
    ex = exclusions_from_files(run, [], include_seen=True)
    res = recommend_users(run, np.array([row]), 10, ex)
    items = results_to_items(run, res)
    for it in items:
        print(f"   {it['rank']:>2}. {names.get(it['item_id'], it.get('title', it['item_id']))}  [{it.get('genres', '')}]  score {it['score']:.3f}")
    from twotower.explain import explain_recommendation

    why = explain_recommendation(run, user_row=row, item_row=run.item_vocab.index(items[0]["item_id"]))
    print(f"   why #1? {why['text']}")
    star_wars = next((i for i in range(run.n_items) if run.title(i).startswith("Star Wars")), 0)
    from twotower.pipeline.similar import cold_item_mask, similar_query

    emb = run.item_embeddings()
    sims = emb @ similar_query(run, emb, star_wars, cold_item_mask(run))[0][0]  # as /similar-items queries it
    sims[star_wars] = -np.inf
    top = np.argsort(-sims)[:5]
    print(f"   items most similar to {shown(star_wars)}: " + "; ".join(shown(int(i)) for i in top))
    print(f"\nrun folder: {out}  (curves.png, recall_at_k.png, log.jsonl, metrics.json, config.json)")
    print(f"next: twotower recommend --run {shell_arg(out)} --user {shell_arg(args.user)}   |   twotower evaluate --run {shell_arg(out)}")
    print(f"      twotower serve --run {shell_arg(out)}   (then open http://127.0.0.1:8000/ for the explorer)   |   "
          f"twotower export --run {shell_arg(out)} --format onnx --out {shell_arg(Path(out) / 'onnx')}")
    print(f"demo finished in {time.perf_counter() - t0:.0f}s")
    return 0
