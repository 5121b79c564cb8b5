"""`twotower train`: the config from flags and overrides, the run, its summary lines and the closing evaluation.

SIGTERM stops training as Ctrl-C does, and either one ends with a line saying what the run folder holds and
whether ``--resume`` continues it.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import errno
import json
import logging
import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from twotower.cli.evaluate_cmd import print_eval_table
from twotower.cli.paths import check_output_dir
from twotower.cli.printing import say_out
from twotower.cli.stopping import Terminated, terminate_as_interrupt
from twotower.cli.stopping import interrupt_status as _interrupt_status
from twotower.cli.stopping import stopped_by as _stopped_by
from twotower.errors import ConfigError, OutOfMemory, TrainingDiverged
from twotower.utils.shell import shell_arg

if TYPE_CHECKING:  # torch is imported only by the commands that train
    from twotower.training.trainer import TrainResult

__all__ = ["cmd_train", "resolve_train_config", "train_summary", "item_item_summary", "Terminated",
           "terminate_as_interrupt", "interrupted_training", "training_left", "staged_training_left", "TRAIN_TABLE_KS"]

log = logging.getLogger("twotower")


def resolve_train_config(args: argparse.Namespace, *, need_data: bool = True):
    from twotower.config import load_config, refuse_repeated_overrides

    from twotower.cli.flags import check_range

    # TrainConfig's bound, said as `--k 0` is and naming the flag typed: "train.epochs: must be >= 1" named a key
    # the user never typed (a config file's or a train.epochs=0 override's refusal still names it)
    check_range("--epochs", getattr(args, "epochs", None), 1)
    overrides = list(args.overrides or []) + list(getattr(args, "set_overrides", None) or [])
    refuse_repeated_overrides(overrides)
    flags: list[tuple[str, str, Any]] = []  # (flag, setting, value) of the shortcut flags given
    for flag, key in (("train", "data.train"), ("valid", "data.valid"), ("test", "data.test"), ("data", "data.path"),
                      ("dataset", "data.dataset"), ("items", "data.items"), ("users", "data.users"),
                      ("epochs", "train.epochs"), ("threads", "train.threads"),
                      ("encoder-backend", "train.encoder_backend")):
        value = getattr(args, flag.replace("-", "_"), None)
        if value is not None:
            flags.append((f"--{flag}", key, value))
    if args.no_progress:  # `--no-progress train.progress=true` kept the flag's false without a word
        flags.append(("--no-progress", "train.progress", False))
    _refuse_flag_override_clash(flags, overrides)
    line = list(overrides)  # the dotted overrides as typed, before the flags' own
    overrides += [f"{key}={json.dumps(value)}" for _, key, value in flags]
    if getattr(args, "resume", False):  # on top of the run's own settings and data: none need typing again
        from twotower.pipeline.resume import resume_config

        cfg = resume_config(args.out, overrides, args.config, overrides_label="command line")
        if need_data:  # train_run refuses it too, in Python's words: here the command line's
            from twotower.pipeline.resume import check_frame_tables

            check_frame_tables(Path(args.out), cfg.data, command_line=True)
    else:
        cfg = load_config(args.config, overrides, overrides_label="command line")
    from twotower.config import apply_overrides
    from twotower.pipeline.sources import check_split_settings_given

    typed = {f"data.{k}" for k in (apply_overrides({}, overrides, "command line").get("data") or {})}  # data.* the line sets
    replaced = [] if getattr(args, "resume", False) else _sources_a_new_input_replaces(flags, line, typed, cfg, args.config)
    if replaced:
        cfg = load_config(args.config, overrides + [f"data.{k}=null" for k in replaced], overrides_label="command line")
    from twotower.config import note_origins

    # the messages naming a data input say the flag typed (load_config noted the files' and the overrides')
    note_origins(cfg.data, {key: flag for flag, key, _ in flags if key.startswith("data.")})
    # a split setting typed at its default value is refused too when the split method does not read it
    check_split_settings_given(cfg.data, {k.removeprefix("data.") for k in typed}, no_data_yet=not need_data)
    if need_data and cfg.data.train is None and cfg.data.path is None and cfg.data.dataset is None:
        if getattr(args, "resume", False) and not (Path(args.out) / "config.json").is_file():
            # "no training data: pass --train FILE ..." sent a user who meant to continue a run to start another
            raise ConfigError(f"--resume: {args.out} holds no run to continue (no config.json there); check --out, "
                              "or train a new run without --resume")
        raise ConfigError("no training data: pass --train FILE (and --valid FILE), --data FILE, or --dataset movielens-100k")
    return cfg


def _sources_a_new_input_replaces(flags: list[tuple[str, str, Any]], line: list[str], typed: set[str], cfg: Any,
                                  config_file: list[str] | None) -> list[str]:
    """The config file's data inputs that ``--data FILE`` or ``--dataset NAME``, or their overrides ``data.path=FILE``
    and ``data.dataset=NAME``, replace (``train``, ``valid``, ``test``, and ``path`` or ``dataset``), said in one log
    line naming the flag or the override typed.

    A flag overrides the file's value, but data.train outranks data.path and data.dataset: ``--config
    RUN/config.json --data new.csv`` (a run's config holds its split files) trained on the run's old split with
    a warning naming a ``--train`` nobody typed; so did ``data.path=new.csv`` after the flag was fixed. ``--train``
    outranks the others already. ``line``: the dotted overrides typed; ``typed``: the ``data.*`` settings the
    command line sets (the flags' among them)."""
    given = {key for _, key, _ in flags} | typed
    named = [(flag, key) for flag, key, _ in flags] + [(o.strip(), o.split("=", 1)[0].strip()) for o in line if "=" in o]
    source = next((said for said, key in named if key in ("data.path", "data.dataset")
                   and getattr(cfg.data, key.removeprefix("data.")) is not None), None)  # not `data.path=null`
    if source is None or "data.train" in given:
        return []
    replaced = [k for k in ("train", "valid", "test", "path", "dataset")
                if f"data.{k}" not in given and getattr(cfg.data, k) is not None]
    if replaced:
        log.info("%s replaces the data input of --config %s: its %s not read", source, " --config ".join(config_file or []),
                 ", ".join(f"data.{k}" for k in replaced) + (" is" if len(replaced) == 1 else " are"))
    return replaced


def _refuse_flag_override_clash(flags: list[tuple[str, str, Any]], overrides: list[str]) -> None:
    """A shortcut flag and a dotted override of the same setting with another value: which one wins is a guess.

    `--epochs 5 train.epochs=3` trained 5 epochs whatever the order, without a word about the 3."""
    from twotower.config import _coerce, apply_overrides

    given = apply_overrides({}, overrides, "command line")  # parsed as load_config parses them (3, "x.csv", null)
    for flag, key, value in flags:
        node: Any = given
        for part in key.split("."):
            node = node.get(part, _ABSENT) if isinstance(node, dict) else _ABSENT
        if isinstance(value, bool) and node is not _ABSENT:  # train.progress=on / yes / 1 read as load_config reads them
            with contextlib.suppress(ConfigError):
                node = _coerce(node, bool, key)
        if node is not _ABSENT and node != value:
            given_flag = flag if isinstance(value, bool) else f"{flag} {value}"
            raise ConfigError(f"{given_flag} and the override {key}={json.dumps(node)} set the same setting to "
                              f"different values; give one of them")


_ABSENT = object()


def train_summary(result: TrainResult, metric: str, out: Path) -> str:
    """The line that ends `twotower train`: what the best epoch was chosen on.

    Without validation data the trainer selects on the negated training loss (it maximises), so that
    number is printed as the loss it is, not as a validation metric.
    """
    on_valid = any(f"valid_{metric}" in row for row in result.history)
    best = f"valid {metric} {result.best_metric:.4f}" if on_valid else f"train loss {-result.best_metric:.4f}"
    # an early-stopped or time-budgeted fit says so: "4 epochs" alone reads as a finished schedule
    why = f", stopped by {result.stopped}" if result.stopped else ""
    # after --resume the seconds are this command's: "4 epochs, 7.2s" read as 4 epochs in 7.2 s when 2 ran
    done = result.resumed_after
    took = (f"resumed after epoch {done}: {result.epochs_run - done} in {result.seconds:.1f}s" if done
            else f"{result.seconds:.1f}s")
    n = result.epochs_run
    # the curves are drawn where people would rather look than read, yet nothing printed said they were there
    curves = f" (training curves: {out / 'curves.png'})" if (out / "curves.png").is_file() else ""
    return (f"trained: best {best} at epoch {result.best_epoch} ({n} epoch{'' if n == 1 else 's'}{why}, {took})"
            f"{_gate_clause(result)}; run folder {out}{curves}")


def _gate_clause(result: TrainResult) -> str:
    """``", gate alpha 0.487 (semantic head's weight)"`` for a dual-head item tower: the kept epoch's gate, which
    the epoch log showed but the summary, the one line a script keeps, left out; "" for any other tower."""
    row = next((r for r in result.history if r.get("epoch") == result.best_epoch and "alpha" in r), None)
    return "" if row is None else f", gate alpha {row['alpha']:.3f} (semantic head's weight)"


def item_item_summary(result: TrainResult, metric: str) -> str | None:
    """The line after the summary when the item-item term was fitted (model.item_item), else None:
    ``"item-item term: weight 0.3 chosen on valid NDCG@10 (0.2178; the towers alone 0.2033)"``."""
    info = result.item_item
    if not info:
        return None
    alone = next((row[metric] for row in info["valid"] if row["weight"] == 0.0), None)
    if not info["weight"]:
        return f"item-item term: none (the towers alone validate best on {metric})"
    # on a sample (eval.ease_tune_max_users) both figures are the sample's: printed under the early-stopping
    # figure of every user ("best valid NDCG@10 0.1368"), "the towers alone 0.1261" read as a contradiction
    scored, of = info.get("valid_users"), info.get("valid_users_of")
    sample = f"; a sample of {scored:,} of the {of:,} validation users" if scored and of and scored < of else ""
    from twotower.pipeline.item_item import LEARNED_LITTLE, towers_learned_little

    # the towers alone near nothing (3 optimizer steps an epoch): whose figure it is, not a feat of the term
    little = f": {LEARNED_LITTLE}" if towers_learned_little(alone, result.final_metric) else ""
    # a list without 0 (model.item_item.weights) is kept as listed: say so, and whether the towers alone led
    forced = 0.0 not in info.get("weights", [0.0])
    how = f"kept from model.item_item.weights {_weights(info['weights'])}" if forced else "chosen"
    lower = ", higher: the list leaves 0 out" if forced and alone is not None and alone > result.final_metric else ""
    return (f"item-item term: weight {info['weight']:g} {how} on valid {metric} ({result.final_metric:.4f}"
            + (f"; the towers alone {alone:.4f}{little}{lower}" if alone is not None else "") + sample + ")")


def _weights(weights: list[float]) -> str:
    return "[" + ", ".join(f"{w:g}" for w in weights) + "]"


def cmd_train(args: argparse.Namespace) -> int:
    from twotower.pipeline.run import train_run
    from twotower.training import distributed as tdist

    if getattr(args, "print_config", False):  # what a config file and overrides add up to, before a long run
        from twotower.config import config_to_dict

        cfg = resolve_train_config(args, need_data=False)  # checked on every rank: each refuses what it refuses
        if os.environ.get("RANK", "0") in ("", "0"):  # under torchrun the JSON was printed once per rank: not one document
            print(json.dumps(config_to_dict(cfg), indent=2))
        return 0
    out = check_output_dir(args.out)  # before the data is read: a bad --out is one line, not a late traceback
    cfg = resolve_train_config(args)
    from twotower.pipeline.run import run_inputs
    from twotower.pipeline.staging import check_new_run_dir

    check_new_run_dir(out, run_inputs(cfg), resume=args.resume, flag="--out")  # train_run's, named as typed here
    from twotower.cli.search_cmd import _encoder_env

    _encoder_env(args)  # --encoder-backend / --encoder-threads for the item text embeddings, checked before the data
    item = cfg.model.item
    given = [f for f, v in (("--encoder-backend", args.encoder_backend), ("--encoder-threads", args.encoder_threads))
             if v is not None]
    if args.encoder_backend is None and cfg.train.encoder_backend is not None:  # from a config file or an override
        given.insert(0, f"train.encoder_backend={cfg.train.encoder_backend!r}")
    if given and not (item.text_embeddings or item.dual_head):  # the only text encoder training loads
        log.warning("%s has no effect: the item tower reads no text (model.item.text_embeddings=true or "
                    "model.item.dual_head=true embeds the item titles)", " and ".join(given))
    from twotower.utils.runtime import run_threads, set_threads

    # for the whole process: train_run puts the caller's counts back when it returns, and the closing evaluation
    # (EASE's solves, the two-tower's scoring) runs on the training's count, not on the libraries' defaults
    threads = run_threads(cfg.train.threads)
    # resolved once: the training (train_run) and the closing evaluation run on it, and the run's config.json records it
    cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, threads=threads))
    set_threads(threads)
    started = time.time()
    from twotower.pipeline.staging import needs_staging, staging_path

    # a new run into a folder holding an earlier one trains beside it (pipeline/staging.py): what a stopped one
    # left is there, and the earlier run is whole
    rank0 = os.environ.get("RANK", "0") in ("", "0")  # under torchrun rank 0 alone writes (the group is not joined yet)
    staged = staging_path(out) if rank0 and needs_staging(out, resume=args.resume) else None

    def left(out: Path) -> str:
        return training_left(out, staged, resumed=args.resume, since=started, checkpointing=cfg.train.checkpoint)

    with terminate_as_interrupt(), _run_folder_lock_or_release_ranks(out, cfg):
        try:
            run, result, prep = train_run(cfg, out, resume=args.resume)
            main = tdist.is_main()
        except KeyboardInterrupt as e:
            if tdist.is_main():  # under torchrun every rank gets the signal; one line tells what the run holds
                print(f"{_stopped_by(e)}: {left(out)}{_peer_failure_hint(e)}", file=sys.stderr)
            return _interrupt_status(e)
        except TrainingDiverged as e:
            if not tdist.is_main() or not cfg.train.checkpoint:
                raise
            from twotower.config import LossConfig
            from twotower.losses.base import TINY_TEMPERATURE

            # a tiny loss.temperature is named first by the error: the resume it suggests raises it instead
            from twotower.config import TrainConfig
            from twotower.training.schedule import USEFUL_LRS

            # a tenth of the rate, or the default where a tenth is still past the useful range (lr=1e30: 1e+29)
            lower = cfg.train.lr / 10 if cfg.train.lr / 10 <= USEFUL_LRS[1] else TrainConfig.lr
            fix = (f"loss.temperature={LossConfig.temperature:g}" if cfg.loss.temperature < TINY_TEMPERATURE
                   else f"train.lr={lower:g}")
            # a new run staged beside an earlier one diverged there: its checkpoint is the staging folder's
            hint = (_diverged_resume(out, resumed=args.resume, since=started, fix=fix) if staged is None else
                    _diverged_resume(staged, resumed=True, since=started, fix=fix, replaces=out))
            raise TrainingDiverged(f"{e}{hint}") from e
        except RuntimeError as e:
            from twotower.distributed import lost_peer, timed_out

            if timed_out(e):  # a rank hangs: gloo waited train.dist_timeout_s, then raised a traceback naming no rank
                print(_timed_out_line(e, cfg.train.dist_timeout_s, out, left), file=sys.stderr)
                return 1
            if not lost_peer(e):
                raise
            # a rank killed or failed mid-epoch: the others raised gloo's "Connection closed by peer" as a
            # 50-line traceback that hid the cause and said nothing of the checkpoint
            print(_lost_peer_line(e, out, left), file=sys.stderr)
            return 1
        except OutOfMemory as e:
            if not tdist.is_main():
                raise
            # the line named what to lower, not that the epochs checkpointed before it are kept (as disk-full says)
            raise OutOfMemory(f"{e}; then: {left(out)}") from e.__cause__
        except OSError as e:
            from twotower.utils.atomic import storage_error_line

            line = storage_error_line(e)
            if line is None or e.errno == errno.EROFS or not tdist.is_main():
                raise
            # the disk filled mid-run: the epochs checkpointed before it are not lost, and the user should know
            if staged is None:
                print(f"{line}; free space there, then: {left(out)}", file=sys.stderr)
            else:  # beside the earlier run: where it filled, that the earlier run is whole, and why both need room
                from twotower.pipeline.staging import ROOM_FOR_BOTH

                where = "" if str(staged) in line else f" (the new run trains in {staged})"
                print(f"{line}{where}; the new run trains beside the earlier one until it finishes, so the disk needs "
                      f"room for both: {ROOM_FOR_BOTH.format(out=shell_arg(out))}; {left(out)}", file=sys.stderr)
            return 2
        finally:
            tdist.cleanup()  # under torchrun: leave the group; rank 0 alone reports and evaluates
        if not main:
            return 0
        out = Path(run.dir)  # a resumed staging folder's run ends in the folder it was meant for
        print(train_summary(result, cfg.eval.select_metric, out))
        if (line := item_item_summary(result, cfg.eval.select_metric)) is not None:
            print(line)
        try:
            _evaluate_trained(args, cfg, run, prep, out, kept=result.kept_results)
        except KeyboardInterrupt as e:
            print(f"{_stopped_by(e)} during the test evaluation; the trained run in {out} is complete: "
                  f"`twotower evaluate --run {shell_arg(out)}` scores it", file=sys.stderr)
            return _interrupt_status(e)
    return 0


@contextlib.contextmanager
def _run_folder_lock_or_release_ranks(out: Path, cfg: Any) -> Any:
    """:func:`_run_folder_lock`; refused under torchrun, rank 0 joins the process group before it raises, so the
    other ranks, waiting in the group's rendezvous for it, meet its end at their first collective and stop at
    once (they sat in the rendezvous until torchrun killed them, 30-38 s after rank 0's one-line refusal)."""
    stack = contextlib.ExitStack()
    try:
        stack.enter_context(_run_folder_lock(out))
    except BaseException:
        if int(os.environ.get("WORLD_SIZE", "1") or 1) > 1:
            from twotower.distributed import init_distributed

            with contextlib.suppress(Exception):  # the refusal is what is said, whatever the group does
                init_distributed(cfg.train)
        raise
    with stack:
        yield


def _run_folder_lock(out: Path) -> contextlib.AbstractContextManager[None]:
    """The run folder's writer lock, held over training and the closing evaluation: released in between, a
    second `train --out` could replace the run before this one wrote its metrics.json beside the new run.
    Under torchrun rank 0 alone writes, and the group is not joined yet, so the launcher's RANK says which."""
    from twotower.pipeline.run import RUN_WRITER
    from twotower.utils.folder_lock import exclusive_writer

    from twotower.pipeline.staging import staged_target

    if os.environ.get("RANK", "0") not in ("", "0"):
        return contextlib.nullcontext()
    target = staged_target(out)
    if target is None:
        return exclusive_writer(out, *RUN_WRITER)
    stack = contextlib.ExitStack()  # a resumed staging folder is swapped into its run folder: both are written
    with stack:
        stack.enter_context(exclusive_writer(out, *RUN_WRITER))
        stack.enter_context(exclusive_writer(target, *RUN_WRITER))
        return stack.pop_all()


def _peer_failure_hint(e: KeyboardInterrupt) -> str:
    """Under torchrun, what rank 0's SIGTERM may mean besides a scheduler's: torchrun stops the other ranks this
    way when one fails, and rank 0's line alone ("no epoch was checkpointed ...; run the command again") read as
    the cause and sent the user to repeat the failing command."""
    from twotower.training import distributed as tdist

    if not isinstance(e, Terminated) or tdist.world_size() < 2:
        return ""
    return ("\n(under torchrun a SIGTERM also stops every rank when one of them fails: a `[rank N] error:` line, "
            "printed above or on that rank's node, then says why)")


def _lost_peer_line(e: RuntimeError, out: Path, left: Callable[[Path], str]) -> str:
    """One line for a rank whose collective failed because another rank ended: which rank saw it, gloo's own
    first line, where the cause is printed and (rank 0, the writer) what the run folder holds."""
    from twotower.training import distributed as tdist

    rank = tdist.rank()
    # gloo's text is "[/path/pair.cc:553] Connection closed by peer [addr]. This is typically caused by ...": its
    # first sentence, without the source location
    cause = re.sub(r"^\[[^\]]*\]\s*", "", (str(e).strip().splitlines() or [""])[0]).split(". ")[0]
    line = (f"{f'[rank {rank}] ' if rank else ''}error: another rank ended mid-training ({cause or type(e).__name__}); "
            "torchrun's summary names it (its `Root Cause`), and its `[rank N] error:` line, if it printed one, says why")
    return f"{line}\n{left(out)}" if rank == 0 else line


def _timed_out_line(e: RuntimeError, timeout_s: float, out: Path, left: Callable[[Path], str]) -> str:
    """One line for a rank whose collective waited ``train.dist_timeout_s`` in vain: the ranks that did not answer
    (those that did not time out too, read from the launcher's store), gloo's words and the setting; rank 0 adds
    what the run folder holds, as for a rank that ended. A rank the heartbeat already named frozen is not waited
    for; the line names its pid and host, and how to end torchrun's wait for it."""
    from twotower.distributed import silent_ranks, torchrun_kill_grace_s
    from twotower.heartbeat import frozen_ranks
    from twotower.training import distributed as tdist

    rank = tdist.rank()
    known = frozen_ranks()
    silent = silent_ranks(min(timeout_s, 10.0), frozen=known)
    if silent is None and known:  # the store went away: the heartbeat still saw who froze
        silent = sorted(known)
    frozen = [r for r in silent or [] if r in known]
    where = {r: f"pid {ph[0]} on {ph[1]}" for r, ph in known.items() if ph}
    kills = " and ".join(f"`kill -9 {ph[0]}` on {ph[1]}" for r, ph in known.items() if ph and r in frozen)
    s = "s" if len(silent or []) > 1 else ""
    who = f"rank{s} {', '.join(f'{r} ({where[r]})' if r in where else str(r) for r in silent)}" if silent else "another rank"
    cause = re.sub(r"^\[[^\]]*\]\s*", "", (str(e).strip().splitlines() or [""])[0]).split(". ")[0]
    line = f"{f'[rank {rank}] ' if rank else ''}error: {who} did not answer within train.dist_timeout_s={timeout_s:g} " \
        f"({cause or type(e).__name__})"
    if frozen:  # not busy: stopped; torchrun's SIGTERM cannot end it (docs/distributed.md)
        grace = torchrun_kill_grace_s()
        line += (f": rank{'s' if len(frozen) > 1 else ''} {', '.join(map(str, frozen))} sent no heartbeat for "
                 "train.heartbeat_warn_s, a frozen process (stopped with SIGSTOP, or its node stuck or swapping); "
                 f"torchrun waits {f'{grace:g} s' if grace is not None else 'a while'} for a frozen rank before it "
                 "sends SIGKILL: "
                 f"{kills or 'killing its process with SIGKILL'} ends it at once")
    rest = [r for r in silent or [] if r not in frozen]
    if rest or not silent:
        who_else = "it hangs" if not frozen else f"rank {rest[0]} hangs" if len(rest) == 1 else "the others hang"
        line += (f"{'; ' if frozen else ': '}{who_else}, or worked alone longer than that (rank 0 validates and saves "
                 "after each epoch while the others wait); raise train.dist_timeout_s if that is expected")
    return f"{line}\n{left(out)}" if rank == 0 else line


def _diverged_resume(out: Path, *, resumed: bool, since: float, fix: str, replaces: Path | None = None) -> str:
    """What a run that diverged after checkpointing epochs keeps, and the resume at a lower rate: the error said
    "Lower the learning rate ... and train again" alone, as if the epochs before the divergence were lost."""
    from twotower.utils.atomic import read_json

    path = out / "checkpoint" / "state.json"
    try:
        state = read_json(path) if path.is_file() else None
        ours = resumed or path.stat().st_mtime >= since - 2.0  # not an earlier run's checkpoint, as below
    except (OSError, ValueError):
        return ""
    if not (ours and isinstance(state, dict) and isinstance(state.get("epoch"), int)):
        return ""
    best = state.get("best_epoch")
    return (f"; or continue from {path.parent}, which holds epoch {state['epoch']} from before it"
            + (f" (best so far: epoch {best})" if best else "")
            + f": `twotower train --out {shell_arg(out)} --resume {fix}`"
            + ("" if replaces is None else f" (once it finishes it replaces the earlier run that {replaces} still holds)"))


def staged_training_left(out: Path, stage: Path, *, checkpointing: bool = True) -> str:
    """What a stopped new run into ``out`` (which holds an earlier run) left: it trained in ``stage`` beside it,
    and ``out`` still holds the earlier run; how to continue the new one from its checkpoint there."""
    from twotower.utils.atomic import read_json

    kept = f"{out} still holds the earlier run, untouched"
    path = stage / "checkpoint" / "state.json"
    try:
        state = read_json(path) if path.is_file() else None
    except (OSError, ValueError):
        state = None
    anew = f"a new `twotower train --out {shell_arg(out)}` without --resume starts over and removes {stage}"
    if checkpointing and isinstance(state, dict) and isinstance(state.get("epoch"), int):
        best = state.get("best_epoch")
        return (f"{kept}; the new run's {path.parent} holds epoch {state['epoch']}"
                + (f" (best so far: epoch {best})" if best else "")
                + f": `twotower train --out {shell_arg(stage)} --resume` continues it there and, once it finishes, puts it in "
                f"{out} in place of the earlier run (`--out {shell_arg(out)} --resume` would continue the earlier run instead; "
                f"{anew})")
    if stage.is_dir() and (stage / "model.safetensors").is_file():
        return (f"{kept}; {stage / 'model.safetensors'} holds the new run's best weights validated so far, and "
                f"train.checkpoint=false, so there is no checkpoint to --resume from ({anew})")
    return f"{kept}; the new run saved no epoch, so there is nothing to resume; run the command again"


def training_left(out: Path, staged: Path | None, *, resumed: bool, since: float, checkpointing: bool,
                  takes_resume: bool = True) -> str:
    """What a stopped training left for ``out``: in its staging folder ``staged`` beside an earlier run (None when
    it trained in ``out`` itself), else in ``out``; for `twotower train` and `twotower demo` (``takes_resume``
    False: a command without --resume, whose own line is not the one to run again with it)."""
    if staged is not None:
        return staged_training_left(out, staged, checkpointing=checkpointing)
    return interrupted_training(out, resumed=resumed, since=since, checkpointing=checkpointing,
                                takes_resume=takes_resume)


def interrupted_training(out: Path, *, resumed: bool, since: float, checkpointing: bool = True,
                         takes_resume: bool = True) -> str:
    """What an interrupted `twotower train` left in ``out`` and what to run next (Ctrl-C should not leave
    the user guessing whether an hour of epochs is lost). ``checkpointing``: ``train.checkpoint``."""
    from twotower.utils.atomic import read_json

    if not checkpointing:
        # it said "no epoch was checkpointed ... run the command again", as if every epoch were lost: the best
        # weights validated so far are written as they come (model.safetensors), and evaluate/recommend read them
        weights = out / "model.safetensors"
        try:
            kept = weights.is_file() and weights.stat().st_mtime >= since - 2.0
        except OSError:
            kept = False
        saved = (f"{weights} holds the best weights validated so far (log.jsonl lists the epochs), which "
                 f"`twotower evaluate --run {shell_arg(out)}` and `recommend` read" if kept else "no epoch was saved")
        return (f"{saved}; train.checkpoint=false, so there is no checkpoint to --resume from (leave "
                "train.checkpoint at true, the default, to continue an interrupted run)")

    path = out / "checkpoint" / "state.json"
    try:
        state = read_json(path) if path.is_file() else None
        # else an earlier run's checkpoint, not yet replaced (2 s: filesystems that keep whole-second mtimes)
        ours = resumed or path.stat().st_mtime >= since - 2.0
    except (OSError, ValueError):  # IntegrityError is a ValueError: a damaged state says nothing to resume
        state, ours = None, False
    if isinstance(state, dict) and not ours:
        return f"training had not started; {out} still holds the earlier run"
    if isinstance(state, dict) and isinstance(state.get("epoch"), int):
        best = state.get("best_epoch")
        return (f"{path.parent} holds epoch {state['epoch']}" + (f" (best so far: epoch {best})" if best else "")
                + ("; run the same command with --resume to continue from there, or just" if takes_resume else
                   "; continue from there with") + f" `twotower train --out {shell_arg(out)} "
                "--resume` (it reads the run's settings and data; without --resume it starts over)"
                # the demo's own steps (its test table, plot and recommendations) come after its training: resumed
                # training alone left them out, where the line read as the way to finish the demo
                + ("" if takes_resume else f", then `twotower evaluate --run {shell_arg(out)}` for the test table; or "
                   f"run `twotower demo --out {shell_arg(out)}` again for every step of the demo"))
    return "no epoch was checkpointed, so there is nothing to resume; run the command again"


#: The cut-offs of eval.ks that train's closing table shows (all of eval.ks when it has none of them), to keep
#: it short; metrics.json and `twotower evaluate` hold every k.
TRAIN_TABLE_KS = (10, 20)


def _evaluate_trained(args: argparse.Namespace, cfg, run, prep, out: Path,  # noqa: ANN001
                      kept: tuple[str, ...] = ()) -> None:
    """`twotower train`'s closing test evaluation against the baselines (metrics.json, eval.txt); ``kept``: the
    files of it a resume kept that score the run as it is (TrainResult.kept_results), shown instead."""
    if not args.no_eval and prep.test is not None:
        if {"metrics.json", "eval.txt"} <= set(kept):
            _show_kept_evaluation(cfg, run, out)
        else:
            _write_evaluation(cfg, run, out)
        print()
        train_file, valid_file = getattr(args, "train", None), getattr(args, "valid", None)
        data = _data_as_given(args, cfg, out)
        if train_file is None and not isinstance(data.train, (list, tuple)):
            # files named by a config file (data.train = "split/train.csv") or by a resumed run's config.json:
            # the hint was printed for --train/--valid flags alone
            train_file, valid_file = data.train, data.valid
        loo = bool(train_file and valid_file and _leave_last_split(train_file))
        if not loo and data.train is None and (data.path or data.dataset) is not None and data.split == "leave_last":
            # `train --data FILE` or `--dataset NAME` with data.split=leave_last split here: its files are the run's
            # copy of the split (the hint was only printed for `data split`'s files, so this run's reader was not told)
            train_file, valid_file, loo = out / "data" / "train.csv", out / "data" / "valid.csv", True
        from twotower.pipeline.run import same_file

        # valid = test (warned about at the start): the hint would read each test user's test item as input
        if cfg.model.user.history != "none" and loo and not same_file(valid_file, data.test):
            # the table above read each test user's train history only; the leave-one-out protocol's test input
            # is train + valid, and a reader of this table was not told how to get it
            say_out(f"test users read their train history only (the protocol line); for the leave-one-out test input "
                    f"(train + valid): `twotower evaluate --run {shell_arg(out)} --history-from {shell_arg(train_file)} {shell_arg(valid_file)}`")


def _write_evaluation(cfg, run, out: Path) -> None:  # noqa: ANN001
    """Evaluate the run on its test split, write metrics.json and eval.txt, and print the table."""
    from twotower.pipeline.evaluate_run import evaluate_run
    from twotower.utils.atomic import atomic_write_json, atomic_write_text

    rows = evaluate_run(run, baselines=cfg.eval.baselines, ks=cfg.eval.ks, select_metric=cfg.eval.select_metric)
    atomic_write_json(out / "metrics.json", {"test": rows})
    table, where = _evaluation_table(cfg, run, rows, out)
    atomic_write_text(out / "eval.txt", table + (f"{where}\n" if where else ""))
    _print_evaluation(table, where)


def _evaluation_table(cfg, run, rows: list[dict], out: Path) -> tuple[str, str | None]:  # noqa: ANN001
    """The closing table of ``rows`` (metrics.json's ``test``), and the line pointing to the k it leaves out (None
    when it shows every k), naming ``out`` as the run folder is named now."""
    import contextlib
    import io

    from twotower.pipeline.artifacts import run_part_file
    from twotower.pipeline.experiment import protocol_text

    ks = cfg.eval.ks
    shown = tuple(k for k in ks if k in TRAIN_TABLE_KS) or ks
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        print_eval_table(rows, shown, "test (full catalogue)",
                         protocol_text(has_valid=run_part_file(run.dir, "valid") is not None))
    left = [k for k in ks if k not in shown]
    # said, not silently dropped: eval.ks=[10, 50] printed k=10 alone
    where = (f"k={','.join(map(str, left))} (eval.ks) {'is' if len(left) == 1 else 'are'} in {out / 'metrics.json'}; "
             f"`twotower evaluate --run {shell_arg(out)}` prints every k") if left else None
    return buf.getvalue(), where


def _print_evaluation(table: str, where: str | None) -> None:
    print(table, end="")
    if where:  # a pointer, so not under -q
        say_out(where)


def _show_kept_evaluation(cfg, run, out: Path) -> None:  # noqa: ANN001
    """A resume's kept evaluation, which an evaluation now would write again but for its timings: its table, and
    where it comes from. Drawn from metrics.json as eval.txt was, the lines naming the run name it as it is now:
    eval.txt's own named the folder, and the working directory, of the command that wrote it (a copied run's
    resume pointed to the original's metrics.json and `twotower evaluate --run` it)."""
    from twotower.utils.atomic import read_json

    try:
        rows = read_json(out / "metrics.json")["test"]
    except (OSError, ValueError, KeyError, TypeError):  # IntegrityError is a ValueError: eval.txt as written
        print((out / "eval.txt").read_text(encoding="utf-8"), end="")
    else:
        _print_evaluation(*_evaluation_table(cfg, run, rows, out))
    say_out(f"the test evaluation kept in eval.txt: this resume changed neither the weights nor the split nor the "
            f"eval settings it was scored with; `twotower evaluate --run {shell_arg(out)}` scores the run again")


def _data_as_given(args: argparse.Namespace, cfg, out: Path):  # noqa: ANN001, ANN202
    """How the run was first given its interactions: ``cfg.data``, except after a resume that read the run's own
    copies of its split (``RUN/data/*.csv``), whose ``config.json`` keeps the data section it was trained from
    (the leave-one-out hint below was lost on such a bare ``train --out RUN --resume``)."""
    if not getattr(args, "resume", False) or cfg.data.train is None or isinstance(cfg.data.train, (list, tuple)):
        return cfg.data
    if Path(str(cfg.data.train)).resolve().parent != (out / "data").resolve():
        return cfg.data
    from twotower.pipeline.artifacts import read_saved_config

    try:
        return read_saved_config(out / "config.json")[0].data
    except (ConfigError, OSError, ValueError):
        return cfg.data


def _leave_last_split(train_file: str) -> bool:
    """Was ``train_file`` written by `twotower data split --method leave_last` (its split_report.json says so)?"""
    report = Path(train_file).parent / "split_report.json"
    try:
        return json.loads(report.read_text(encoding="utf-8")).get("method") in ("leave_last", "leave_last_n_out")  # the latter: older reports
    except (OSError, ValueError, AttributeError):
        return False
