"""MovieLens-1M leave-one-out (the SASRec / BERT4Rec / SASRec+ / gSASRec protocol): our towers next to the published rows.

    python bench/ml1m.py [--rows popularity,pooled-recency-inbatch,...] [--seeds 0,1,2] [--epochs N]
                         [--threads 1] [--out runs/bench-ml1m] [--quick] [--set section.key=value ...] [--json FILE]

The protocol, exactly (SOURCE.md next to the data file):
- data: ``ml-1m.txt`` (6,040 users, 3,416 items, 999,611 ``user item`` lines, file order = time order),
  split by the same code as ``twotower data split --method leave_last --n 1``;
- train = each user's sequence minus its last 2 items: the only data fitted on;
- validation = the second-last item with the train history as input: early stopping and choices only;
- test = the last item with train + valid as the input history, read by the trained user tower without
  refitting (``twotower evaluate --history-from train.csv valid.csv``, the same code path);
- the full catalogue is ranked, the input history excluded; HR@10, NDCG@10, Recall@20, NDCG@20 averaged
  over all 6,040 users (one relevant item each, so Recall@k = HR@k).

Every two-tower row is trained through ``twotower.train_run`` (what ``twotower train`` runs) into
``OUT/runs/<row>-<hash of its settings>/seed<s>/``, with checkpoints: rerunning the command reuses finished
runs and resumes unfinished ones, so a long benchmark can run in the background and survive a restart.
The most-popular baseline must reproduce the sanity figures of SOURCE.md (test HR@10 0.0369 / NDCG@10
0.0180, validation 0.0429 / 0.0207); the benchmark stops when it does not, since the evaluator would be wrong.

Fit time is the sum of the epochs' wall time (log.jsonl); throughput is training windows (sequences) per
second and target positions per second (one per example for pooled towers, every valid position of a
window for ``train.examples=sequence``). ``--quick`` is a smoke run: 300 users, 1 epoch, one seed.

Which tower a dataset should use is chosen on validation NDCG@10 (mean over the seeds), never on test: the
table marks that row and a line under it says what it was chosen over and by how much (flagged when the lead
is within the seeds' spread). Run on another file, this is the rule that picks its default tower.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import check_json_out, int_list, refuse_below, write_json_out  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "ml-1m" / "ml-1m.txt"

# What SOURCE.md states about the file and the sanity baseline (checked, not assumed).
EXPECTED = {"users": 6040, "items": 3416, "rows": 999_611, "train_rows": 987_531}
POPULARITY_SANITY = {"test": {"HitRate@10": 0.0369, "NDCG@10": 0.0180}, "valid": {"HitRate@10": 0.0429, "NDCG@10": 0.0207}}

# Published test numbers on this file and protocol (HR@10, NDCG@10, source) — SOURCE.md.
PUBLISHED = [
    ("SASRec+ (full cross-entropy)", 0.3152, 0.1821, "antklen/sasrec-bert4rec-recsys23 README"),
    ("SASRec+ (3,000 sampled negatives)", 0.3159, 0.1857, "antklen/sasrec-bert4rec-recsys23 README"),
    ("gSASRec (256 negatives, t=0.75)", 0.3003, 0.1726, "asash/gSASRec-pytorch README"),
    ("BERT4Rec", 0.2843, 0.1537, "antklen/sasrec-bert4rec-recsys23 README"),
    ("SASRec (BCE, one negative)", 0.2500, 0.1341, "antklen/sasrec-bert4rec-recsys23 README"),
]

# The item tower is a bare ID table (no features in this file); the sequence towers read 200 items like SASRec.
_ITEM = ["model.item.use_features=false", "model.user.use_features=false"]
# SASRec-style sequence towers: 200 items, width 128, 3 blocks, 2 heads, tied item embeddings and, as in SASRec,
# no map after either tower (head=false: the item vector IS the table the encoder reads), positions numbered from
# the oldest item read (SASRec+'s right-padded windows), cosine scores at T=0.08, small batches (the all-positions
# objective gets ~110 targets per window: the number of updates, not of targets, limits progress per epoch).
# Each choice was made on validation NDCG@10, side by side, with the figures in docs/benchmarks.md: head=false + left positions
# 0.1607 -> 0.1773; dropout 0.1 over 0.2 (and over 0.05); width 128 over 64 and 256; 3 blocks over 2 (4: level);
# AdamW weight decay 0.1 over 1e-4 (0.3: level, 1.0: behind); 2 heads over 1. 40 epochs over 30: ahead on validation
# for all three seeds (mean 0.1944 vs 0.1932) for a third more time; the budget ends it at 60 minutes. Validation
# every 2nd epoch (and the last): validating 6,040 users costs ~6 s of a ~30 s epoch, and the cosine's last epochs,
# where the best one lies, move validation by less than its noise.
_SEQ = ["train.examples=sequence", "model.user.history_len=200", "model.user.history_dim=128", "model.item.id_dim=128",
        "model.user.out_dim=128", "model.item.out_dim=128", "train.precision=auto",
        "model.user.hidden=[]", "model.item.hidden=[]", "model.user.head=false", "model.item.head=false",
        "model.user.seq_positions=left", "model.user.seq_dropout=0.1", "model.user.seq_layers=3", "model.user.seq_heads=2",
        "loss.temperature=0.08", "train.batch_size=16",
        "train.lr=2e-3", "train.weight_decay=0.05", "train.lr_schedule=cosine", "train.patience=20", "train.epochs=40",
        "train.eval_every=2", "train.time_budget_min=60",
        # the recipe was chosen without the pooled default's weight average (0.999 was tried: docs/benchmarks.md)
        "train.ema_decay=0", "train.history_dropout=0", *_ITEM]  # windows are read whole: no dropout to apply
_LOSS = {"inbatch": ["loss.kind=inbatch"], "sampled": ["loss.kind=sampled"], "full": ["loss.kind=full"]}


def _seq_settings(arch: str) -> list[str]:
    """_SEQ for ``arch``: the GRU reads no positions, and the config refuses a transformer-only setting beside it
    (every gru-* row stopped with "only the transformer history encoder reads seq_positions"); nor heads, which
    training warns of (models.unread.unread_sequence_sizes)."""
    from twotower.config import SEQUENCE_SIZES, TRANSFORMER_ONLY

    if arch == "transformer":
        return list(_SEQ)
    unread = {*TRANSFORMER_ONLY, *SEQUENCE_SIZES["transformer"]} - set(SEQUENCE_SIZES[arch])
    return [o for o in _SEQ if o.split("=", 1)[0].removeprefix("model.user.") not in unread]

# row name -> dotted overrides on top of the default configuration
ROWS: dict[str, list[str]] = {
    "pooled-recency-inbatch": [*_ITEM],
    "pooled-recency-sampled": [*_ITEM, *_LOSS["sampled"]],
    "pooled-recency-full": [*_ITEM, *_LOSS["full"]],
    "pooled-mean-inbatch": [*_ITEM, "model.user.history=mean"],
    **{f"{arch}-{loss}": [f"model.user.history={arch}", *_seq_settings(arch), *over]
       for arch in ("transformer", "gru") for loss, over in _LOSS.items()},
}
# the headline rows (the transformer: 18-20 minutes a seed on the 2 idle threads of a 2-core Zen 4 in bfloat16, 40-53 on a Zen 3,
# ~60 on one loaded core); every row of ROWS is available through --rows
DEFAULT_ROWS = "popularity,pooled-recency-inbatch,transformer-full"
METRICS = ("HitRate@10", "NDCG@10", "Recall@20", "NDCG@20")
QUICK_USERS = 300  # --quick: the file's first users

log = logging.getLogger("bench.ml1m")


# ---------------------------------------------------------------------------------------------- data
def _source_id(data: Path) -> dict[str, Any]:
    """What the split was made from: a reused split folder must come from the same file (its content too: a file
    rewritten in place can keep its path and size)."""
    from twotower.utils.atomic import sha256_file

    st = data.stat()
    return {"path": str(data.resolve()), "bytes": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": sha256_file(data)}


def prepare_split(data: Path, out: Path, quick_users: int | None) -> tuple[dict[str, Path], dict[str, Any]]:
    """train/valid/test CSVs in ``out``, made as `twotower data split --method leave_last --n 1` makes them,
    and the file's shape (users, items, rows, ``ml1m``: whether it is SOURCE.md's file).

    Another file in the SASRec format gets the same protocol; only the ML-1M checks and rows are left out.
    The default path must be the ML-1M file (a different file there is an error)."""
    from twotower.config import DataConfig
    from twotower.data.readers import read_interactions
    from twotower.pipeline.sources import _split
    from twotower.utils.atomic import atomic_write_json, atomic_write_text

    paths = {name: out / f"{name}.csv" for name in ("train", "valid", "test")}
    report_path = out / "split_report.json"
    source = _source_id(data)
    if report_path.exists() and all(p.exists() for p in paths.values()):
        report = json.loads(report_path.read_text())
        made = report.get("source")
        if made is None and source["path"] == str(DATA.resolve()) and quick_users is None:
            # a split folder from before the source was recorded: only ever made from the ML-1M file
            return paths, {k: EXPECTED[k] for k in ("users", "items", "rows")} | {"ml1m": True}
        if made is None or made["path"] != source["path"] or made["bytes"] != source["bytes"]:
            raise SystemExit(f"{out} holds a split of {(made or {}).get('path', 'another file')}, not of "
                             f"{data}: pass another --out")
        if made.get("sha256", source["sha256"]) != source["sha256"]:  # splits made before it was recorded: path+size
            raise SystemExit(f"{out} holds a split of an earlier content of {data} (changed since): pass another --out")
        return paths, report["shape"]
    df = read_interactions(data)
    rep = df.attrs["report"]
    shape = {"users": rep["users"], "items": rep["items"], "rows": rep["rows"]}
    shape["ml1m"] = quick_users is None and shape == {k: EXPECTED[k] for k in shape}
    if quick_users is None and not shape["ml1m"] and source["path"] == str(DATA.resolve()):
        raise SystemExit(f"{data}: {shape}, expected {EXPECTED} (SOURCE.md); is it the SASRec ml-1m.txt?")
    if quick_users is not None:  # smoke run: the first users of the file
        keep = df["user_id"].drop_duplicates().iloc[:quick_users]
        df = df[df["user_id"].isin(set(keep))].reset_index(drop=True)
    split = _split(df, DataConfig(split="leave_last", leave_n=1), 0)
    if shape["ml1m"] and split.report["train_rows"] != EXPECTED["train_rows"]:
        raise SystemExit(f"train has {split.report['train_rows']} rows, expected {EXPECTED['train_rows']}")
    for name, part in zip(("train", "valid", "test"), split):
        atomic_write_text(paths[name], part.to_csv(index=False))
    # written last: marks the split complete
    atomic_write_json(report_path, {**split.report, "source": source, "shape": shape})
    return paths, shape


# ---------------------------------------------------------------------------------------------- popularity
def popularity_rows(paths: dict[str, Path], check: bool) -> list[dict[str, Any]]:
    """Most popular in train, input history excluded, on valid and test — with the SOURCE.md sanity check."""
    from twotower.config import DataConfig
    from twotower.evaluation.baselines import Popularity
    from twotower.evaluation.protocol import EvalProtocol, evaluate
    from twotower.pipeline.histories import (
        HistoryBaselineScorer,
        exclude_histories,
        read_input_histories,
    )
    from twotower.pipeline.prepare import prepare
    from twotower.pipeline.sources import load_sources

    prep = prepare(load_sources(DataConfig(train=str(paths["train"]), valid=str(paths["valid"]), test=str(paths["test"]))))
    train = prep.matrix("train")
    pop = Popularity().fit(train)
    protocol = EvalProtocol(ks=(10, 20))
    valid = evaluate(pop, prep.matrix("valid"), train, protocol)  # input = train history (what the model reads)
    hist = read_input_histories(prep, [paths["train"], paths["valid"]])  # test input = train + valid
    test = evaluate(HistoryBaselineScorer(pop, hist), prep.matrix("test"), exclude_histories(None, hist), protocol)
    row = {"model": "most popular (train)", **_metrics(test), "valid_NDCG@10": valid["NDCG@10"],
           "valid_HR@10": valid["HitRate@10"], "users": test["users_evaluated"], "fit_min": 0.0}
    msg = (f"most-popular{' sanity' if check else ''}: test HR@10 {test['HitRate@10']:.4f} NDCG@10 {test['NDCG@10']:.4f}"
           f"{' (SOURCE.md 0.0369 / 0.0180)' if check else ''}; valid {valid['HitRate@10']:.4f} / "
           f"{valid['NDCG@10']:.4f}{' (0.0429 / 0.0207)' if check else ''}")
    print(msg, file=sys.stderr, flush=True)
    if check:
        for part, res in (("test", test), ("valid", valid)):
            for key, want in POPULARITY_SANITY[part].items():
                if round(res[key], 4) != want:
                    raise SystemExit(f"SANITY CHECK FAILED: most-popular {part} {key} {res[key]:.5f} != {want} "
                                     "(SOURCE.md); the evaluator or the split is wrong")
            if res["users_evaluated"] != EXPECTED["users"]:
                raise SystemExit(f"SANITY CHECK FAILED: {res['users_evaluated']} users evaluated, expected {EXPECTED['users']}")
    return [row]


def _metrics(res: dict[str, Any]) -> dict[str, float]:
    return {"HR@10": res["HitRate@10"], "NDCG@10": res["NDCG@10"], "Recall@20": res["Recall@20"], "NDCG@20": res["NDCG@20"]}


# ---------------------------------------------------------------------------------------------- two-tower rows
def _throughput(run_dir: Path) -> dict[str, float | None]:
    """Fit seconds and time-weighted training throughput from the run's log.jsonl (all epochs, resumed ones too)."""
    rows = [json.loads(line) for line in (run_dir / "log.jsonl").read_text().splitlines() if line.strip()]
    fit_s = sum(r.get("seconds", 0.0) for r in rows)
    t = sum(r.get("train_seconds", 0.0) for r in rows)
    units = sum(r.get("examples_per_s", 0.0) * r.get("train_seconds", 0.0) for r in rows)
    sequence = any("positions_per_s" in r for r in rows)
    positions = sum(r.get("positions_per_s", 0.0) * r.get("train_seconds", 0.0) for r in rows) if sequence else units
    return {
        "fit_s": fit_s,
        "epochs": len(rows),
        "seq_per_s": units / t if sequence and t else None,  # pooled towers train on single examples, not windows
        "pos_per_s": positions / t if t else None,
    }


def run_row(name: str, overrides: list[str], seed: int, paths: dict[str, Path], out: Path,
            threads: int) -> dict[str, Any]:
    """Train (or reuse / resume) one row for one seed and evaluate it on valid and on test (--history-from)."""
    import twotower as tt
    from twotower.config import load_config
    from twotower.pipeline.evaluate_run import evaluate_run
    from twotower.utils.atomic import atomic_write_text

    over = [f"data.train={json.dumps(str(paths['train']))}", f"data.valid={json.dumps(str(paths['valid']))}",
            f"data.test={json.dumps(str(paths['test']))}", "train.progress=false", f"train.threads={threads}",
            f"train.seed={seed}", *overrides]
    cfg = load_config(overrides=over)
    tag = hashlib.sha256(json.dumps(overrides).encode()).hexdigest()[:8]
    run_dir = out / "runs" / f"{name}-{tag}" / f"seed{seed}"
    result_path = run_dir / "bench.json"
    if (run_dir / "manifest.json").exists() and result_path.exists():
        return json.loads(result_path.read_text())
    if (run_dir / "manifest.json").exists():
        run = tt.TrainedRun.load(run_dir)
    else:
        resume = (run_dir / "checkpoint" / "state.json").exists()
        print(f"{name} seed {seed}: {'resuming' if resume else 'training'} in {run_dir}", file=sys.stderr, flush=True)
        run, _, _ = tt.train_run(cfg, run_dir, resume=resume)
    valid = evaluate_run(run, split="valid", baselines=(), ks=(10, 20))[0]
    test = evaluate_run(run, split="test", baselines=(), ks=(10, 20),
                        history_from=[run.dir / "data" / "train.csv", run.dir / "data" / "valid.csv"])[0]
    row = {"row": name, "seed": seed, "run": str(run_dir), **_metrics(test), "valid_NDCG@10": valid["NDCG@10"],
           "valid_HR@10": valid["HitRate@10"], "users": test["users_evaluated"], **_throughput(run_dir),
           **_item_item(run.info.get("item_item"))}
    # atomically: a run with a bench.json is taken as finished, so a half-written one would break every rerun
    atomic_write_text(result_path, json.dumps(row, indent=2, default=float))
    print(f"{name} seed {seed}: test HR@10 {row['HR@10']:.4f} NDCG@10 {row['NDCG@10']:.4f} "
          f"(valid NDCG@10 {row['valid_NDCG@10']:.4f}) in {row['fit_s'] / 60:.1f} min", file=sys.stderr, flush=True)
    return row


def _item_item(term: Any) -> dict[str, Any]:
    """The item-item term fitted after training (models/item_item.py): its weight chosen on validation (0: the
    towers alone), the towers' own valid figure, its solver and seconds; None where it was not fitted."""
    if not isinstance(term, dict):
        return {"item_item_w": None, "valid_towers": None, "item_item_solver": None, "item_item_s": None}
    towers = next((row[term["metric"]] for row in term["valid"] if row["weight"] == 0.0), None)
    return {"item_item_w": term["weight"], "valid_towers": towers, "item_item_solver": term.get("solver", "dense"),
            "item_item_s": term.get("seconds")}


def aggregate(name: str, per_seed: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean over seeds (± sample std in the ``*_sd`` keys when there are several)."""
    out: dict[str, Any] = {"model": f"two-tower {name}", "seeds": len(per_seed), "users": per_seed[0]["users"]}
    for key in ("HR@10", "NDCG@10", "Recall@20", "NDCG@20", "valid_NDCG@10", "valid_HR@10", "fit_s", "epochs",
                "seq_per_s", "pos_per_s", "item_item_w", "valid_towers", "item_item_s"):
        values = [r[key] for r in per_seed if r.get(key) is not None]
        out[key] = float(np.mean(values)) if values else None
        if len(values) > 1 and key in ("HR@10", "NDCG@10"):
            out[f"{key}_sd"] = float(np.std(values, ddof=1))
    out["fit_min"] = out["fit_s"] / 60 if out["fit_s"] is not None else None
    return out


# ---------------------------------------------------------------------------------------------- table
def print_table(rows: list[dict[str, Any]], title: str) -> None:
    from twotower.evaluation.table import format_table

    table = []
    for r in rows:
        t = dict(r)
        for key in ("HR@10", "NDCG@10"):
            if r.get(f"{key}_sd") is not None:
                t[key] = f"{r[key]:.4f}±{r[f'{key}_sd']:.4f}"
        for key in ("seq_per_s", "pos_per_s"):
            if isinstance(r.get(key), float):
                t[key] = f"{r[key]:,.0f}"
        if isinstance(r.get("fit_min"), float):
            t["fit_min"] = f"{r['fit_min']:.1f}"
        if isinstance(r.get("epochs"), float):
            t["epochs"] = f"{r['epochs']:g}"
        table.append(t)
    cols = ["model", "HR@10", "NDCG@10", "Recall@20", "NDCG@20", "valid_NDCG@10", "item_item_w", "valid_towers",
            "seeds", "epochs", "fit_min", "seq_per_s", "pos_per_s", "source"]
    print(format_table(table, cols, title=title))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(DATA),
                    help="the SASRec ml-1m.txt (default: ../shared/data/ml-1m/ml-1m.txt), or another file in that "
                         "format: the same protocol and rows, without ML-1M's sanity check and published rows")
    ap.add_argument("--rows", default=DEFAULT_ROWS,
                    help=f"comma list from: {', '.join(ROWS)} (the most-popular row and its check always run)")
    ap.add_argument("--seeds", default="0,1,2", help="comma list of train.seed values (mean ± sd over them)")
    ap.add_argument("--epochs", type=int, default=None, help="train.epochs for every row (early stopping on valid still applies)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default="runs/bench-ml1m", help="split, run folders (reused / resumed) and results")
    ap.add_argument("--quick", action="store_true",
                    help=f"smoke run: {QUICK_USERS} users, 1 epoch, the first seed; no sanity check")
    ap.add_argument("--set", nargs="*", default=[], help="extra section.key=value overrides for every row")
    ap.add_argument("--json", help="also write the table rows (and per-seed rows) to this JSON file")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # a line per fit (its size) and per epoch (loss, valid NDCG@10, seconds): runs train with train.progress=false,
    # and on a large catalogue (Book-Crossing's 38k items: ~16 minutes a transformer epoch) a row was silent for an hour
    logging.getLogger("twotower.training.trainer").setLevel(logging.INFO)
    # and the item-item term fitted after training: its solver, λ, weight grid (or why it was not fitted)
    logging.getLogger("twotower.pipeline.item_item").setLevel(logging.INFO)
    # and a sequence tower's empty-history state, fitted after training (pipeline/empty_history.py)
    logging.getLogger("twotower.pipeline.empty_history").setLevel(logging.INFO)
    from twotower.utils.runtime import set_threads

    refuse_below(args, ("threads",))
    set_threads(args.threads)
    names = [r for r in args.rows.split(",") if r]
    for r in names:
        if r != "popularity" and r not in ROWS:
            raise SystemExit(f"unknown row {r!r}; choose from popularity, {', '.join(ROWS)}")
    seeds = int_list("--seeds", args.seeds, 0, what="seed")  # numpy's generators take no negative seed
    twice = sorted({s for s in seeds if seeds.count(s) > 1})
    if twice:  # the mean ± sd over the seeds would count one run twice
        raise SystemExit(f"error: --seeds: {', '.join(map(str, twice))} given twice; each seed is one run of the mean")
    if args.epochs is not None:
        refuse_below(args, ("epochs",))
    extra = list(args.set)
    set_epochs = any(o.split("=", 1)[0].strip() == "train.epochs" for o in extra)
    if set_epochs and args.epochs is not None:  # which one wins was the order of the overrides, silently
        raise SystemExit("error: --epochs and --set train.epochs=... set the same setting; give one of them")
    out = Path(args.out) / ("quick" if args.quick else "full")
    if args.quick:
        seeds = seeds[:1]
        if not set_epochs:
            extra.append(f"train.epochs={args.epochs or 1}")
    elif args.epochs:
        extra.append(f"train.epochs={args.epochs}")
    t0 = time.perf_counter()
    json_out = check_json_out(args.json)
    from twotower.cli.paths import check_output_dir
    from twotower.config import load_config
    from twotower.errors import ConfigError

    try:  # before the split is made: a bad --out or --set was a traceback, the latter after the baseline
        check_output_dir(out, "--out")
        for name in names:
            if name != "popularity":
                load_config(overrides=ROWS[name] + extra)
    except ConfigError as e:
        raise SystemExit(f"error: {e}") from None
    if not Path(args.data).is_file():
        raise SystemExit(f"error: --data {args.data}: no such file (the default is ../shared/data/ml-1m/ml-1m.txt, "
                         "see its SOURCE.md; any file in the SASRec format works)")
    paths, shape = prepare_split(Path(args.data), out / "split", QUICK_USERS if args.quick else None)
    if not shape["ml1m"] and not args.quick:
        print(f"{args.data}: {shape['users']:,} users, {shape['items']:,} items, {shape['rows']:,} rows -- not SOURCE.md's "
              "ML-1M file: the same protocol, without its sanity check and published rows", file=sys.stderr)
    rows = popularity_rows(paths, check=shape["ml1m"])  # always: every row rests on this evaluator
    per_seed: list[dict[str, Any]] = []
    for name in names:
        if name == "popularity":
            continue
        seed_rows = [run_row(name, ROWS[name] + extra, s, paths, out, args.threads) for s in seeds]
        per_seed += seed_rows
        rows.append(aggregate(name, seed_rows))
    choice = None
    if per_seed:  # the dataset's tower, chosen on validation NDCG@10 (never on test): the same rule on any file
        from twotower.evaluation import choose_on_validation

        choice = choose_on_validation({n: [r["valid_NDCG@10"] for r in per_seed if r["row"] == n]
                                       for n in names if n != "popularity"}, metric="NDCG@10")
        for r in rows:
            if r["model"] == f"two-tower {choice.name}":
                r["model"] += " (chosen on valid)"
    if shape["ml1m"]:  # published figures belong to that file only
        for label, hr, ndcg, source in PUBLISHED:
            rows.append({"model": f"published: {label}", "HR@10": hr, "NDCG@10": ndcg, "source": source})
    users = next((r["users"] for r in rows if r.get("users")), None)
    held = min(QUICK_USERS, shape["users"]) if args.quick else shape["users"]  # the users the split holds out
    if users is not None and users < held:
        print(f"NOTE: {held - users:,} of {held:,} users are not evaluated: their test item never "
              "occurs in train (an ID table cannot rank it); papers that keep them count them as misses, which "
              f"would scale every figure by {users / held:.4f}", file=sys.stderr)
    name = "MovieLens-1M" if shape["ml1m"] else Path(args.data).name
    # the model ranks the items it was trained on: train's, which a sparse file's valid/test items may not all be
    catalogue = pd.read_csv(paths["train"], usecols=["item_id"], dtype=str)["item_id"].nunique()
    in_file = f", of {shape['items']:,} in the file" if catalogue != shape["items"] and not args.quick else ""
    print_table(rows, f"{name} leave-one-out, test (last item; input = all earlier items, no refit), full "
                      f"catalogue of {catalogue:,} items (train's{in_file}), input history excluded, "
                      f"{users} users; seeds {','.join(map(str, seeds))}; threads={args.threads}"
                      + (" [QUICK SMOKE RUN: not comparable]" if args.quick else ""))
    print("protocol: train = all but the last 2 items; valid (second-last) for early stopping only; test input = "
          "train+valid history read by the trained user tower; HR@10 = Recall@10 with one relevant item; "
          "fit_min = sum of epoch wall times (the item-item term's fit after them is item_item_s in --json); "
          "item_item_w = that term's weight chosen on validation (0: the towers alone), valid_towers = the towers' "
          "valid NDCG@10 without it; seq/s and pos/s = training windows and target positions per second")
    if choice is not None:
        print(choice.text())
    if args.json:
        chosen = None if choice is None else {"row": choice.name, "valid_NDCG@10": choice.value, "runner_up": choice.runner_up,
                                              "runner_up_valid_NDCG@10": choice.runner_up_value,
                                              "within_noise": choice.within_noise}
        write_json_out(json_out, json.dumps({"rows": rows, "per_seed": per_seed, "chosen": chosen}, indent=2,
                                            default=float))
    print(f"total {(time.perf_counter() - t0) / 60:.1f} min", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
