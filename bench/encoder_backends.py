"""Text encoding speed and quality per backend: bare fp32 SentenceTransformer.encode vs TextEncoder backends.

Encodes the same SciFact abstracts with (a) a bare ``SentenceTransformer.encode``
(fp32 torch, the old path), (b) ``TextEncoder`` with ``torch``, ``torch-bf16``,
``onnx`` and ``onnx-int8``, interleaved round by round so the ratios come from one
run on a shared machine; prints docs/s, the speed-up over (a) and the cosine of each
backend's vectors to (a)'s. It also prints docs per CPU-second (process time; one
thread each): on shared cores the wall-clock ratio moves with the neighbours' load,
the CPU-time ratio much less. With ``--ndcg`` it also runs the zero-shot dense
retriever over the whole SciFact test split per backend (slow: the whole
corpus is encoded once per backend), and with ``--model DIR`` the fine-tuned
bi-encoder DIR (``twotower search train`` / ``bench/scifact.py``) the same way.
The corpus embeddings go to a cache folder made for this run only, so the
zero-shot and fine-tuned rows of one backend share one encoding of the corpus
when DIR's document tower is the frozen base model (a verbatim copy, the
default), and nothing encoded by an earlier run is reused.

    .venv/bin/python bench/encoder_backends.py --docs 256 --threads 1
    .venv/bin/python bench/encoder_backends.py --docs 256 --threads 1 --ndcg --backends torch,torch-bf16 \
        --model runs/scifact/full/bi_encoder
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

SCIFACT = Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact" / "beir"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--beir", type=Path, default=SCIFACT, help="BEIR folder (default ../shared/data/scifact/beir)")
    p.add_argument("--docs", type=int, default=256, help="abstracts timed per backend and round")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--backends", default="torch,torch-bf16,onnx,onnx-int8")
    p.add_argument("--ndcg", action="store_true", help="also zero-shot NDCG@10 on the test split per backend")
    p.add_argument("--model", type=Path, default=None,
                   help="with --ndcg: also this fine-tuned bi-encoder's NDCG@10 per backend")
    args = p.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    from twotower.text import EncoderSettings, load_text_encoder

    from twotower.errors import ConfigError

    # checked before the model is loaded: a zero, a wrong folder or a backend typo was a traceback
    from twotower.pipeline.refusals import range_refusal  # the CLI's words: "--docs: must be at least 1, got 0"

    for flag in ("docs", "rounds", "batch_size", "threads"):
        if (why := range_refusal(getattr(args, flag), 1)) is not None:
            raise SystemExit(f"error: --{flag.replace('_', '-')}: {why}")
    if not (args.beir / "corpus.jsonl").is_file():
        raise SystemExit(f"error: --beir {args.beir}: no corpus.jsonl there (a BEIR folder such as "
                         "../shared/data/scifact/beir, see SOURCE.md beside it)")
    if args.model is not None:  # checked at the very end before: after the timing rounds and the zero-shot pass
        if not args.ndcg:
            raise SystemExit("error: --model is read only with --ndcg (its NDCG@10 per backend); add --ndcg, or leave "
                             "--model out")
        from twotower.search.artefacts import check_bi_encoder_dir

        try:
            check_bi_encoder_dir(args.model, "--model")
        except ConfigError as e:
            raise SystemExit(f"error: {e}") from None
    backends = [b for b in args.backends.split(",") if b]
    from twotower.text.encoder import BACKEND_CHOICES

    # refused here in this flag's words: EncoderSettings' own message names the CLI's --encoder-backend, no flag of
    # this script
    unknown = [b for b in backends if b not in BACKEND_CHOICES]
    if unknown:
        raise SystemExit(f"error: --backends: {', '.join(map(repr, unknown))}: not an encoder backend; choose from "
                         f"{', '.join(BACKEND_CHOICES)}")
    try:
        settings = {b: EncoderSettings(backend=b, threads=args.threads) for b in backends}
    except ConfigError as e:
        raise SystemExit(f"error: --backends: {e}") from None
    torch.set_num_threads(args.threads)
    texts = []
    with open(args.beir / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            texts.append(((d.get("title") or "") + " " + d["text"]).strip())
            if len(texts) >= args.docs:
                break
    encs = {b: load_text_encoder(None, settings=settings[b]) for b in backends}
    bare = encs.get("torch") or load_text_encoder(None)
    for e in encs.values():  # export / warm up outside the timing
        e.encode(texts[:8], batch_size=args.batch_size, show_progress=False)
    secs: dict[str, list[float]] = {"bare fp32 ST.encode": []} | {b: [] for b in backends}
    cpu: dict[str, list[float]] = {name: [] for name in secs}  # process CPU seconds of the same passes
    vecs: dict[str, np.ndarray] = {}
    for _ in range(args.rounds):
        t, c = time.perf_counter(), time.process_time()
        vecs["bare fp32 ST.encode"] = bare.model.encode(texts, batch_size=args.batch_size, show_progress_bar=False,
                                                        convert_to_numpy=True, normalize_embeddings=True)
        secs["bare fp32 ST.encode"].append(time.perf_counter() - t)
        cpu["bare fp32 ST.encode"].append(time.process_time() - c)
        for b, e in encs.items():
            t, c = time.perf_counter(), time.process_time()
            vecs[b] = e.encode(texts, batch_size=args.batch_size, show_progress=False)
            secs[b].append(time.perf_counter() - t)
            cpu[b].append(time.process_time() - c)
    ref = vecs["bare fp32 ST.encode"]
    base = len(texts) / min(secs["bare fp32 ST.encode"])
    cpu_base = len(texts) / min(cpu["bare fp32 ST.encode"])
    print(f"{len(texts)} SciFact abstracts, batch {args.batch_size}, threads {args.threads}, best of {args.rounds} "
          "interleaved rounds")
    print(f"{'encoder':<24}{'docs/s':>9}{'x bare':>8}{'docs/cpu-s':>12}{'x bare':>8}{'cos min':>9}{'cos mean':>10}")
    for name, s in secs.items():
        rate, cpu_rate = len(texts) / min(s), len(texts) / min(cpu[name])
        cos = (vecs[name] * ref).sum(1)
        print(f"{name:<24}{rate:>9.1f}{rate / base:>7.2f}x{cpu_rate:>12.1f}{cpu_rate / cpu_base:>7.2f}x"
              f"{cos.min():>9.5f}{cos.mean():>10.5f}")
    if args.ndcg:
        from twotower.search.evaluate import search_evaluate

        models = {"zero-shot": None} | ({"fine-tuned": args.model} if args.model is not None else {})
        with tempfile.TemporaryDirectory(prefix="encoder-backends-") as cache:  # this run's encodings only
            for label, model in models.items():
                print(f"\n{label} dense retriever, SciFact test (whole corpus encoded per backend"
                      + (f"; {model}" if model is not None else "") + "):")
                for b in backends:
                    os.environ["TWOTOWER_ENCODER_BACKEND"] = b
                    t = time.perf_counter()
                    m = search_evaluate(args.beir, split="test", retriever="dense", model=model, cache_dir=cache)
                    print(f"  {b:<12} NDCG@10 {m['NDCG@10']:.4f}  Recall@100 {m['Recall@100']:.4f}  "
                          f"({time.perf_counter() - t:.0f}s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
