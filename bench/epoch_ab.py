"""One training epoch of two or more versions of twotower, in turns: the issue-11 speed comparison.

Each round runs the same command once per version, one after the other, each in its own process with that
version's sources first on ``PYTHONPATH`` (a checkout or ``git worktree`` of it):

    twotower train --train TRAIN --out TMP train.epochs=1 train.seed=0 train.threads=THREADS [the version's settings]

and reads the epoch's ``train_seconds`` and loss from ``TMP/log.jsonl``. On a shared or virtual machine the speed
drifts by 10% within minutes, so versions are compared round by round (same minute, same machine state) and the
table gives each version's mean and its ratio to the first version's mean. The losses show whether the versions
computed the same thing.

    git worktree add --detach /tmp/tt-35be1a0 35be1a0           # the code issue 11 was filed on
    python bench/epoch_ab.py --train SPLIT/train.csv --rounds 4 \\
        --version old=/tmp/tt-35be1a0 --version new=.:model.item_item.enabled=false

``--default-threads`` leaves ``train.threads`` out: each version at its own default thread count (default against
default). ``--version LABEL=PATH[:KEY=VALUE,...]``: PATH is the version's checkout (its ``src`` folder is imported), the
settings after ``:`` are added to its command (a setting an older version does not know would stop it).
``SPLIT`` comes from ``twotower data split --input ../shared/data/ml-1m/ml-1m.txt --method leave_last --n 1``
(MovieLens-1M in SASRec's format, ``../shared/data/ml-1m/SOURCE.md``).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import refuse_below  # noqa: E402


@dataclass(frozen=True)
class Version:
    label: str
    root: Path
    settings: tuple[str, ...]


def parse_version(text: str) -> Version:
    """``LABEL=PATH[:KEY=VALUE,...]`` -> Version; SystemExit naming the flag when it is malformed."""
    label, sep, rest = text.partition("=")
    path, _, settings = rest.partition(":")
    if not sep or not label or not path:
        raise SystemExit(f"error: --version: expected LABEL=PATH[:KEY=VALUE,...], got {text!r}")
    pairs = tuple(s for s in settings.split(",") if s)
    for pair in pairs:
        if "=" not in pair:
            raise SystemExit(f"error: --version {label}: settings are KEY=VALUE, got {pair!r}")
    return Version(label, Path(path).resolve(), pairs)


def one_epoch(version: Version, train: Path, threads: int | None, scratch: Path) -> tuple[float, float]:
    """``(train_seconds, loss)`` of one epoch of ``version`` (its own process); ``threads`` None: the version's
    default thread count (no ``train.threads`` on its command)."""
    out = scratch / version.label
    shutil.rmtree(out, ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(version.root / "src")}
    env.pop("TWOTOWER_THREADS", None)  # the command's train.threads decides
    cmd = [sys.executable, "-m", "twotower", "train", "--train", str(train), "--out", str(out), "train.epochs=1",
           "train.seed=0", *([f"train.threads={threads}"] if threads is not None else []), *version.settings]
    done = subprocess.run(cmd, cwd=scratch, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-5:])
        raise SystemExit(f"error: version {version.label} failed (status {done.returncode}):\n{tail}")
    row = json.loads((out / "log.jsonl").read_text().splitlines()[0])
    return float(row["train_seconds"]), float(row["loss"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", required=True, help="the interactions to train on (a split's train.csv)")
    ap.add_argument("--version", action="append", required=True, type=parse_version,
                    help="LABEL=PATH[:KEY=VALUE,...], twice or more; the first is the baseline")
    ap.add_argument("--rounds", type=int, default=3, help="rounds; each runs every version once, in order")
    ap.add_argument("--threads", type=int, default=1, help="train.threads of every run")
    ap.add_argument("--default-threads", action="store_true",
                    help="no train.threads: each version at its own default (default against default)")
    args = ap.parse_args(argv)
    refuse_below(args, ("rounds", "threads"))
    if len(args.version) < 2:
        raise SystemExit("error: --version: give two versions or more to compare")
    for v in args.version:
        if not (v.root / "src" / "twotower").is_dir():
            raise SystemExit(f"error: --version {v.label}: {v.root} has no src/twotower (give a checkout of twotower)")
    if len({v.label for v in args.version}) < len(args.version):
        raise SystemExit("error: --version: each version needs a label of its own")
    train = Path(args.train).resolve()
    if not train.is_file():
        raise SystemExit(f"error: --train: no file {train}")
    seconds: dict[str, list[float]] = {v.label: [] for v in args.version}
    losses: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="twotower-epoch-ab-") as tmp:
        for r in range(1, args.rounds + 1):
            for v in args.version:
                s, loss = one_epoch(v, train, None if args.default_threads else args.threads, Path(tmp))
                seconds[v.label].append(s)
                losses[v.label] = loss
            print(f"round {r}: " + "  ".join(f"{v.label} {seconds[v.label][-1]:.2f} s" for v in args.version),
                  file=sys.stderr, flush=True)
    base = sum(seconds[args.version[0].label]) / args.rounds
    print(f"| version | {' | '.join(f'round {r}' for r in range(1, args.rounds + 1))} | mean | vs "
          f"{args.version[0].label} | first-epoch loss |")
    print("|---|" + "---:|" * (args.rounds + 3))
    for v in args.version:
        mean = sum(seconds[v.label]) / args.rounds
        cells = " | ".join(f"{s:.2f} s" for s in seconds[v.label])
        print(f"| {v.label} | {cells} | {mean:.2f} s | {base / mean:.2f}x | {losses[v.label]:.6f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
