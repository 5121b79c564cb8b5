"""Export a run's towers to ONNX (dynamic batch and history length) and check them with onnxruntime.

Written to ``DIR``::

    user_tower.onnx    inputs user_rows[B] int64 (when the tower reads user IDs or features; a feature tower
                       without IDs takes export.json's ``new_user_row`` for a user not in training, read with
                       missing features as the CLI and the service read one without user features: its
                       feature values go to new_user_tower.onnx),
                       history[B, L] int64
                       (when it reads a history: right-aligned item rows, padded on the left with ``pad_item``)
                       -> user_vectors[B, D]; a window longer than ``history_len`` is cut to its newest
                       ``history_len`` items
    new_user_tower.onnx  a feature tower without user IDs: a new user's encoded feature values (and history) ->
                       user_vectors[B, D]; export.json's new_user_tower says how to encode them
                       (:mod:`twotower.export.new_user`)
    item_tower.onnx    item_rows[B] int64 -> item_vectors[B, D]
                       (in both towers a negative row is refused, not wrapped to the last row: :data:`NO_ROW`)
    item_embeddings.npy  [I, D] float32, row r is item ``item_ids[r]``
    item_ids.json, user_ids.json   external id of each row
    cold_similar_queries.npy  dual-head runs with cold items: their similar-items queries (export.json's cold_similar)
    (export.json's ``unplaced``: the item rows the model cannot place, whose vectors mean nothing: see
    :func:`twotower.pipeline.similar.unplaced_item_mask`)
    export.json        dims, pad_item, history_len (both null for a tower without a history input), inputs,
                       opset, twotower_version (absent from an older export), the check's max abs differences

``DIR`` is the export's own folder, replaced as a whole (:func:`check_export_dir`): an earlier export there is
removed (a warning lists its files), any other non-empty folder is refused unless ``force=True``.

The export goes through :meth:`UserTower.forward(user_rows, history)` and
:meth:`ItemTower.forward(rows)`, so any user tower (pooled or sequence) exports
the same way. Shapes: B batch, L history length, D dim, I items.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from twotower.errors import ConfigError, IntegrityError
from twotower.utils.arguments import check_flag
from twotower.export.folder import CLI_LABELS, PY_LABELS, check_export_dir  # noqa: F401 (re-exported)
from twotower.export.new_user import new_user_tower_meta
from twotower.pipeline.artifacts import TrainedRun, check_loaded_run
from twotower.utils.atomic import atomic_dir, atomic_path, atomic_write_json, check_output_dir
from twotower.utils.extras import require
from twotower.utils.version import VERSION_KEY, installed_version

__all__ = ["ExportReport", "export_onnx", "check_onnx", "check_export_dir", "OPSET"]

log = logging.getLogger(__name__)

OPSET = 17
TOLERANCE = 1e-5


@dataclass(frozen=True)
class ExportReport:
    """Where the files went and how closely onnxruntime reproduced the PyTorch towers."""

    out: Path
    user_inputs: tuple[str, ...]
    n_users_checked: int
    n_items_checked: int
    max_abs_diff_user: float
    max_abs_diff_item: float
    new_user_row: int | None = None  # the user_rows value of a user not in training (export.json says the same)
    n_cold_similar: int = 0  # items whose similar-items query is in cold_similar_queries.npy (export.json's cold_similar)
    new_user_inputs: tuple[str, ...] = ()  # new_user_tower.onnx's inputs (export.json's new_user_tower); () without it


#: What a negative row becomes in the exported graphs: a row past every table, so onnxruntime refuses it ("indices
#: element out of data bounds") as PyTorch does. ONNX's Gather wraps negative indices, so a row of -1 (an unknown
#: id looked up as ``row.get(id, -1)``) silently gave the last item's vector (the padding row's in a history).
#: 2**40, not int64's max: a tower that offsets its rows must not overflow them back into range.
NO_ROW = 2**40


#: export.json's words for each input: the export folder alone says what to feed (names and pad_item alone left a
#: reader guessing whether history held ids or rows, which end the padding goes on and what an unknown id becomes)
INPUT_MEANING = {
    "history": "int64 [batch, length]: item rows (the index into item_ids.json, not item ids), oldest first, "
               "right-aligned: shorter histories padded on the left with pad_item; length is free (0 columns: the "
               "empty history; over history_len, its newest history_len are read); an item id not in item_ids.json "
               "has no row: leave it out; so too a row export.json's untrained_history lists (no training "
               "interactions: the graph reads it through a row training never updated, and `recommend --history` and "
               "the service leave it out); a negative row is refused; pad_item belongs on the left only: one between "
               "items is left out, but recency weights and a transformer's positions still count its column, so the "
               "items before it read as older than they are",
    "user_rows": "int64 [batch]: user rows (the index into user_ids.json); new_user_row for a user not in training "
                 "(null: this tower cannot embed one); a negative row is refused",
    "item_rows": "int64 [batch]: item rows (the index into item_ids.json), 0 .. n_items-1; a negative row is refused",
}


def _new_user_features(columns: tuple[str, ...], new_user_row: int | None) -> str | None:
    """export.json's ``user_tower.new_user_features``: what a new user's features can do with this export (None when
    the tower reads no user features). The graph reads the feature values from its own table by ``user_rows``:
    there is no input for a new user's values, and export.json said nothing, so a deployer fed ``new_user_row``
    for a user with features and got other scores than ``recommend --history H --user-features ...``."""
    if not columns:
        return None
    if new_user_row is None:
        return (f"not an input: the graph reads the user features ({', '.join(columns)}) of the users in "
                "user_ids.json from its own table by user_rows; this tower reads user IDs, so it embeds no new user")
    return (f"not an input of user_tower.onnx: it reads the user features ({', '.join(columns)}) of the users in "
            "user_ids.json from its own table by user_rows, and new_user_row reads every one of them as missing "
            "(history and new_user_row give the vector of `recommend --history H` without --user-features); a new "
            "user's feature values (recommend --user-features, POST /recommend's user_features) go to "
            "new_user_tower.onnx, encoded as export.json's new_user_tower.encoding says")


def _refuse_negative(rows: Tensor) -> Tensor:
    return torch.where(rows < 0, torch.full_like(rows, NO_ROW), rows)


class _UserExport(nn.Module):
    """``UserTower.forward(user_rows, history)`` with the inputs the tower reads (no rows for a history-only tower,
    no history for an ID / feature tower: the exporter drops an input the graph never reads, so it is not offered).

    A window longer than the tower's ``history_len`` is cut to its newest ``history_len`` columns, as the
    CLI and the service cut a long history (a transformer has no positions beyond them). A zero-width window
    (a user with no items yet, ``history[B, 0]``) is the empty history, as the CLI and the service read it.
    """

    def __init__(self, tower: nn.Module, with_rows: bool, max_len: int) -> None:
        super().__init__()
        self.tower = tower
        self.with_rows = with_rows
        self.max_len = max_len

    def forward(self, *inputs: Tensor) -> Tensor:
        inputs = tuple(_refuse_negative(x) for x in inputs)
        if not self.tower.uses_history:
            return self.tower(inputs[0], None)
        # one padding column in front, so that a zero-width window reaches the encoder as one padding column
        # (a sequence encoder's ArgMax fails on zero columns); padding changes no state, and the cut below keeps
        # the newest max_len columns, so any other window reads as before
        history = nn.functional.pad(inputs[-1], (1, 0), value=int(self.tower.n_items))
        history = history[:, -self.max_len :]  # an ONNX Slice: shorter windows pass whole
        if self.with_rows:
            return self.tower(inputs[0], history)
        return self.tower(None, history)


class _ItemExport(nn.Module):
    def __init__(self, tower: nn.Module) -> None:
        super().__init__()
        self.tower = tower

    def forward(self, item_rows: Tensor) -> Tensor:
        return self.tower(_refuse_negative(item_rows))


class _MaskedBag(nn.Module):
    """``nn.EmbeddingBag(mode="mean"|"sum", padding_idx=p)`` on [B, M] bags as plain ops ONNX exports
    (the ONNX exporter refuses EmbeddingBag with a padding_idx). Same numbers: padding is left out, an
    all-padding bag gives zeros."""

    def __init__(self, bag: nn.EmbeddingBag) -> None:
        super().__init__()
        self.weight = bag.weight
        self.mode = bag.mode
        self.padding_idx = -1 if bag.padding_idx is None else int(bag.padding_idx)

    def forward(self, values: Tensor) -> Tensor:
        keep = (values != self.padding_idx).to(self.weight.dtype).unsqueeze(-1)  # [B, M, 1]
        total = (nn.functional.embedding(values, self.weight) * keep).sum(dim=1)  # [B, F]
        if self.mode == "sum":
            return total
        return total / keep.sum(dim=1).clamp_min(1.0)


def _exportable(tower: nn.Module) -> nn.Module:
    """A copy of ``tower`` with every EmbeddingBag swapped for :class:`_MaskedBag` (weights shared, not copied)."""
    import copy

    bags = {name for name, m in tower.named_modules() if isinstance(m, nn.EmbeddingBag)}
    if not bags:
        return tower
    memo = {id(p): p for p in tower.parameters()} | {id(b): b for b in tower.buffers()}
    clone = copy.deepcopy(tower, memo)
    for name in bags:
        if not name:
            continue
        parent_name, _, leaf = name.rpartition(".")
        parent = clone.get_submodule(parent_name) if parent_name else clone
        parent._modules[leaf] = _MaskedBag(getattr(parent, leaf))
    return clone


def _new_user_row(tower: nn.Module) -> int | None:
    """The ``user_rows`` value that stands for a user with no row (a new user), or None where there is none.

    A tower reading user features (and no user ID) looks them up by row, so without such a row the exported
    graph could embed only the users of training, while the CLI and the service embed a new user from a history
    with missing features. The row is one past the table; a tower with a user-ID embedding has none, since it
    cannot embed a new user at all (``TrainedRun.history_vectors`` refuses the same).
    """
    if getattr(tower, "id_emb", None) is not None or not getattr(tower.features, "out_dim", 0):
        return None
    return int(tower.features.numeric.shape[0])


def _with_new_user_row(tower: nn.Module, model: nn.Module) -> nn.Module:
    """A copy of ``tower`` (weights shared) whose feature table has one more row, :func:`_new_user_row`, holding
    the features the PyTorch tower gives a user passed as ``user_rows=None`` (FeatureBlock.missing_rows)."""
    import copy

    # every weight of the model, not only the tower's: a sequence tower reads the item tower's ID table, which a
    # copy would turn into a second table (traced as a constant that requires grad, which the exporter refuses)
    memo = {id(p): p for p in model.parameters()}
    clone = copy.deepcopy(tower, memo)  # buffers copied: the run's own feature table stays as it is
    block = clone.features
    cat, multi, num = block.missing_rows(1)
    block.categorical = torch.cat([block.categorical, cat])
    for j, m in enumerate(multi):
        table = getattr(block, f"multi_{j}")
        padded = nn.functional.pad(m, (0, table.shape[1] - m.shape[1]))  # 0 is the bag's padding value
        setattr(block, f"multi_{j}", torch.cat([table, padded]))
    block.numeric = torch.cat([block.numeric, num])
    return clone


def _bool_eyelike_to_float(path: Path) -> None:
    """onnxruntime has no boolean EyeLike (``torch.eye(L, dtype=torch.bool)`` in a causal mask exports to one):
    compute it in float and cast back to bool; the numbers are the same."""
    import onnx
    from onnx import TensorProto, helper

    m = onnx.load(str(path))
    if not any(n.op_type == "EyeLike" for n in m.graph.node):
        return
    inferred = onnx.shape_inference.infer_shapes(m)
    types = {v.name: v.type.tensor_type.elem_type for v in [*inferred.graph.value_info, *inferred.graph.input]}
    nodes = list(m.graph.node)
    changed = False
    out_nodes = []
    for n in nodes:
        dtype = next((a.i for a in n.attribute if a.name == "dtype"), types.get(n.input[0]) if n.input else None)
        if n.op_type == "EyeLike" and dtype == TensorProto.BOOL:
            x_f, y_f = n.input[0] + "__float", n.output[0] + "__float"
            out_nodes.append(helper.make_node("Cast", [n.input[0]], [x_f], to=TensorProto.FLOAT))
            out_nodes.append(helper.make_node("EyeLike", [x_f], [y_f], dtype=TensorProto.FLOAT))
            out_nodes.append(helper.make_node("Cast", [y_f], [n.output[0]], to=TensorProto.BOOL))
            changed = True
        else:
            out_nodes.append(n)
    if changed:
        del m.graph.node[:]
        m.graph.node.extend(out_nodes)
        onnx.checker.check_model(m)
        with atomic_path(path) as tmp:
            onnx.save(m, str(tmp))


def _export_towers(out: Path, user_tower: nn.Module, item_tower: nn.Module, with_rows: bool, rows: Tensor,
                   hist: Tensor, user_inputs: list[str], dyn_user: dict, max_len: int) -> None:
    with torch.no_grad():
        args = tuple(x for x, name in ((rows, "user_rows"), (hist, "history")) if name in user_inputs)
        _onnx_export(_UserExport(user_tower, with_rows, max_len), args, out / "user_tower.onnx", user_inputs, dyn_user)
        _bool_eyelike_to_float(out / "user_tower.onnx")
        _onnx_export(_ItemExport(item_tower), (rows,), out / "item_tower.onnx", ["item_rows"],
                     {"item_rows": {0: "batch"}, "_out": "item_vectors", "item_vectors": {0: "batch"}})


def _needs_rows(tower: Any) -> bool:
    return getattr(tower, "id_emb", None) is not None or bool(getattr(tower.features, "out_dim", 0))


def _onnx_export(module: nn.Module, args: tuple[Tensor, ...], path: Path, names: list[str], dynamic: dict) -> None:
    import warnings

    with atomic_path(path) as tmp, warnings.catch_warnings():
        # the tracer's notes on shape-dependent Python (checked below by running the graph) are not for users
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, str(tmp), input_names=names, output_names=[dynamic["_out"]],
                          dynamic_axes={k: v for k, v in dynamic.items() if k != "_out"}, opset_version=OPSET,
                          dynamo=False, do_constant_folding=True)


#: how a Python export names itself in the writer lock (a second writer's refusal names it); the CLI passes its own
PY_WRITER = "tt.export_onnx"


def export_onnx(run: Any, out: str | Path, *, check_users: int = 1000, force: bool = False,
                labels: tuple[str, str] = PY_LABELS, what: str = PY_WRITER) -> ExportReport:
    """Write the ONNX towers and item embeddings of ``run`` to ``out``, then check them (see the module doc).

    ``run``: a loaded run (:class:`~twotower.pipeline.artifacts.TrainedRun`) or its folder, loaded under the lock
    below, as `twotower export --run` loads it. ``out`` is replaced as a whole: an earlier export there is removed (logged as a warning, file by file), a
    non-empty folder holding anything else is refused with ConfigError unless ``force`` (:func:`check_export_dir`).
    The export holds the writer lock `twotower export` holds (:func:`twotower.utils.output_folders.run_writer`): the
    run's when ``out`` lies inside a run folder, else ``out``'s own; a second writer is refused at once, naming it.
    ``labels``: how refusals name ``out`` and ``force`` (the CLI passes :data:`CLI_LABELS`, its flags); ``what``:
    how the lock names this writer to another one.
    """
    from twotower.utils.output_folders import run_writer

    for module in ("onnx", "onnxruntime"):  # both before any work: onnxruntime checks what was written
        require(module, "ONNX export")
    if isinstance(check_users, bool) or not isinstance(check_users, (int, np.integer)) or check_users < 1:
        # 0 exported with no user vector checked (export.json "users": 0), -5 failed in numpy
        raise ConfigError(f"check_users must be a whole number >= 1, got {check_users!r}")
    force = check_flag(force, "force")
    out = check_output_dir(out, labels[0], swapped=True)  # as the CLI checks --out: written beside it, swapped in
    given_dir = isinstance(run, (str, os.PathLike))
    run_dir = Path(run) if given_dir else getattr(run, "dir", None)
    check_export_dir(out, run_dir=run_dir, force=force, labels=labels)  # refused before the lock creates anything
    if not given_dir:  # anything else (train_run's tuple) failed deep inside with an AttributeError
        check_loaded_run(run, "export_onnx")
    # one writer at a time, as the CLI: two exports into one folder, or one into RUN/onnx beside a `train --out RUN`
    with run_writer(run_dir if run_dir is not None else out, out, what):
        removed = check_export_dir(out, run_dir=run_dir, force=force, labels=labels)  # as it stands under the lock
        earlier = _exported_run(out) if removed else None
        if given_dir:
            run = TrainedRun.load(run_dir)
        # written and checked in a sibling folder, then swapped in whole: an interrupted or failed export leaves the
        # previous one as it was, and a new export never sits beside files of an older one (another run's towers)
        with atomic_dir(out) as stage:
            report = _export_into(run, stage, check_users)
    if removed:
        replaced = f"the earlier export of {earlier}" if earlier else "what was there"
        log.warning("%s: replaced %s; removed: %s", out, replaced, ", ".join(removed))
    return replace(report, out=out)


def _exported_run(out: Path) -> str | None:
    """The run an earlier export in ``out`` was made from (its export.json), None when there is none to read."""
    import json

    try:
        meta = json.loads((out / "export.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return str(meta["run"]) if isinstance(meta, dict) and isinstance(meta.get("run"), str) else None


def _export_into(run: Any, out: Path, check_users: int) -> ExportReport:
    """Write and check every file of the export in ``out`` (a staging folder; export.json last)."""
    model = run.model.eval()
    new_user_row = _new_user_row(model.user_tower)
    user_tower = model.user_tower if new_user_row is None else _with_new_user_row(model.user_tower, model)
    user_tower, item_tower = _exportable(user_tower), _exportable(model.item_tower)
    with_rows = _needs_rows(user_tower)
    L = int(model.history_len)
    rows = torch.zeros(2, dtype=torch.long)
    hist = torch.as_tensor(run.history.last_windows(np.arange(min(2, len(run.user_vocab))), L, model.pad_item))
    if hist.shape[0] < 2:
        hist = hist.repeat(2, 1)
    user_inputs = [*(["user_rows"] if with_rows else []), *(["history"] if user_tower.uses_history else [])]
    dyn_user: dict[str, Any] = {"_out": "user_vectors", "user_vectors": {0: "batch"}}
    if user_tower.uses_history:
        dyn_user["history"] = {0: "batch", 1: "history_len"}
    if with_rows:
        dyn_user["user_rows"] = {0: "batch"}
    # weights the tower reaches without owning them (a sequence tower tied to the item ID table) are traced as
    # constants, which the exporter refuses while they require grad; switch grad off for the export only
    grads = [(p, p.requires_grad) for p in model.parameters()]
    for p, _ in grads:
        p.requires_grad_(False)
    try:
        _export_towers(out, user_tower, item_tower, with_rows, rows, hist, user_inputs, dyn_user, L)
        new_user_inputs = _export_new_user(run, out, model, hist, L) if new_user_row is not None else []
    except torch.onnx.errors.OnnxExporterError as e:  # an operator the exporter lacks (e.g. packed GRU sequences)
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ConfigError(f"this run's towers (model.user.history={run.config.model.user.history}) cannot be "
                          f"exported to ONNX by torch's exporter: {first}") from None
    finally:
        for p, g in grads:
            p.requires_grad_(g)
    items = run.item_embeddings()
    with atomic_path(out / "item_embeddings.npy") as tmp:
        with open(tmp, "wb") as fh:
            np.save(fh, np.ascontiguousarray(items, np.float32), allow_pickle=False)
    atomic_write_json(out / "item_ids.json", list(run.item_vocab.ids))
    atomic_write_json(out / "user_ids.json", list(run.user_vocab.ids))
    cold_similar = _export_cold_queries(run, items, out)
    unplaced = _unplaced_items(run)
    untrained = _untrained_history(run) if "history" in user_inputs else None
    report = check_onnx(run, out, n_users=check_users, new_user_row=new_user_row)
    worst_new = _check_new_user(run, out, report.n_users_checked) if new_user_inputs else None
    atomic_write_json(out / "export.json", {
        "format": 1,
        "run": str(Path(run.dir).resolve()),  # absolute: read from anywhere, it names the same run
        "model_fingerprint": run.fingerprint(),
        VERSION_KEY: installed_version(),  # an export written before it was recorded has none
        "dim": int(items.shape[1]),
        "n_items": int(run.n_items),
        "n_users": int(len(run.user_vocab)),
        # a tower that reads no history (model.user.history=none) has no history input: null, not the model's
        # unused window and padding row, which read as if the graph took a history
        "history_len": L if "history" in user_inputs else None,
        "pad_item": int(model.pad_item) if "history" in user_inputs else None,
        "user_tower": {"file": "user_tower.onnx", "inputs": user_inputs, "output": "user_vectors",
                       "history": run.config.model.user.history, "new_user_row": new_user_row,
                       "user_features": list(run.user_feature_columns),
                       "new_user_features": _new_user_features(run.user_feature_columns, new_user_row),
                       "input_meaning": {k: v for k, v in INPUT_MEANING.items() if k in user_inputs}},
        "item_tower": {"file": "item_tower.onnx", "inputs": ["item_rows"], "output": "item_vectors",
                       "input_meaning": {"item_rows": INPUT_MEANING["item_rows"]}},
        "opset": OPSET,
        **({"new_user_tower": new_user_tower_meta(run, new_user_inputs)} if new_user_inputs else {}),
        **({"cold_similar": cold_similar} if cold_similar else {}),
        **({"unplaced": unplaced} if unplaced else {}),
        **({"untrained_history": untrained} if untrained else {}),
        "check": {"users": report.n_users_checked, "items": report.n_items_checked,
                  "max_abs_diff_user": report.max_abs_diff_user, "max_abs_diff_item": report.max_abs_diff_item,
                  **({"max_abs_diff_new_user": worst_new} if worst_new is not None else {}),
                  "tolerance": TOLERANCE},
    })
    return replace(report, new_user_row=new_user_row, new_user_inputs=tuple(new_user_inputs),
                   n_cold_similar=len(cold_similar["item_rows"]) if cold_similar else 0)


def _export_new_user(run: Any, out: Path, model: nn.Module, hist: Tensor, max_len: int) -> list[str]:
    """``new_user_tower.onnx`` (a feature tower without user IDs: a new user's feature values as inputs); its input
    names, [] where the run has no user feature encoder to write into export.json."""
    from twotower.export.new_user import export_new_user_tower

    if getattr(run, "user_encoder", None) is None:
        return []
    return export_new_user_tower(out, _exportable(model.user_tower), max_len, hist)


def _check_new_user(run: Any, out: Path, n_users: int) -> float:
    """onnxruntime's new_user_tower.onnx against PyTorch on ``n_users`` users' feature rows (and none); IntegrityError
    beyond the tolerance, as :func:`check_onnx`."""
    from twotower.export.new_user import check_new_user_tower

    U = len(run.user_vocab)
    users = np.sort(np.random.default_rng(1).choice(U, size=min(n_users, U), replace=False))
    worst = max(check_new_user_tower(run, out, users[s : s + 256]) for s in range(0, len(users), 256))
    if worst > TOLERANCE:
        raise IntegrityError(f"{out}: new_user_tower.onnx differs from PyTorch by up to {worst:.2e} (tolerance "
                             f"{TOLERANCE:g})")
    return worst


def _export_cold_queries(run: Any, items: np.ndarray, out: Path) -> dict[str, Any] | None:
    """A dual-head run's cold items (no training interactions) are queried for similar items by their semantic
    head (``POST /similar-items``, ``twotower similar``), not by the row of item_embeddings.npy, whose collaborative
    half read the zero ID vector every cold item shares: those queries go in ``cold_similar_queries.npy`` so an export's
    consumer can give the service's lists. None for any other run (nothing written)."""
    from twotower.pipeline.similar import cold_item_mask, similar_queries

    cold = cold_item_mask(run)
    if cold is None or not cold.any():
        return None
    rows = np.flatnonzero(cold)
    queries, _ = similar_queries(run, items, rows, cold, "semantic")  # [C, D]
    with atomic_path(out / "cold_similar_queries.npy") as tmp:
        with open(tmp, "wb") as fh:
            np.save(fh, np.ascontiguousarray(queries, np.float32), allow_pickle=False)
    return {"file": "cold_similar_queries.npy", "item_rows": [int(r) for r in rows],
            "meaning": "float32 [C, D]: row j is the similar-items query of item row item_rows[j] (no training "
                       "interactions: its semantic head, zero-padded to D), to search item_embeddings.npy by inner "
                       "product as POST /similar-items does; every other item is queried by its own row"}


def _untrained_history(run: Any) -> dict[str, Any] | None:
    """The item rows a new user's history must leave out before it is fed to the user tower: no training
    interactions, so the exported graph reads them through rows training never updated (a pooled tower's random
    initial rows, a sequence tower's zero ID rows), which moved the list. `recommend --history`, the service and
    tt.recommend leave them out (pipeline/similar.history_as_read); the graph cannot, since it takes rows as given.
    None when every item had training interactions."""
    from twotower.pipeline.similar import untrained_items

    rows = np.flatnonzero(untrained_items(run))
    if not rows.size:
        return None
    return {"item_rows": [int(r) for r in rows],
            "meaning": "item rows with no training interactions: the user tower has not learned them, and the graph "
                       "reads them through rows training never updated, so leave them out of a new user's history "
                       "before feeding it, as `twotower recommend --history` and POST /recommend leave them out (a "
                       "history of only such items is the empty history); they are still items the user has seen"}


def _unplaced_items(run: Any) -> dict[str, Any] | None:
    """The items the model cannot place (no training interactions, an item tower that reads only the item ID):
    their rows of item_embeddings.npy were learnt from nothing, so an export's consumer searching by them got the
    lists POST /similar-items refuses to give (it answers none, with a warning). None when there are none."""
    from twotower.pipeline.similar import unplaced_item_mask

    rows = np.flatnonzero(unplaced_item_mask(run))
    if not rows.size:
        return None
    log.warning("%d of %d items had no training interactions and the item tower reads only the item ID, so the "
                "model cannot place them: their vectors are learnt from no interaction (export.json's unplaced lists "
                "their rows, e.g. item %s)", rows.size, run.n_items, run.item_vocab.id_at(int(rows[0])))
    return {"item_rows": [int(r) for r in rows],
            "meaning": "item rows with no training interactions, and the item tower reads only the item ID (no "
                       "features or text): the model cannot place them, so their rows of item_embeddings.npy (and "
                       "item_tower.onnx's vectors) come from the zeroed ID embedding, not from any interaction; "
                       "POST /similar-items returns no items for them (query_space \"none\"), and /recommend and "
                       "/similar-items warn when a list holds them"}


def check_onnx(run: Any, out: str | Path, *, n_users: int = 1000, batch: int = 256,
               new_user_row: int | None = None) -> ExportReport:
    """Run the exported towers with onnxruntime on ``n_users`` users (their real histories, each as a full, a
    shorter, a longer and a zero-width window) and every item; IntegrityError when any vector differs from
    PyTorch's by more than 1e-5. With ``new_user_row``, those histories are also read as new users' (that row
    against PyTorch's ``user_rows=None``)."""
    ort = require("onnxruntime", "checking the export")
    out = Path(out)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    user_sess = ort.InferenceSession(str(out / "user_tower.onnx"), opts, providers=["CPUExecutionProvider"])
    item_sess = ort.InferenceSession(str(out / "item_tower.onnx"), opts, providers=["CPUExecutionProvider"])
    names = tuple(i.name for i in user_sess.get_inputs())
    model = run.model.eval()
    U = len(run.user_vocab)
    users = np.random.default_rng(0).choice(U, size=min(n_users, U), replace=False)
    L, pad = int(model.history_len), int(model.pad_item)
    worst_u = 0.0
    for s in range(0, len(users), batch):
        rows = np.asarray(users[s : s + batch], np.int64)
        # every batch at every kind of window, since the history axis is dynamic (a check of 50 users saw only full
        # ones): full, shorter (not padded to L: the graph must read it as the CLI reads it padded), longer (cut to
        # the newest L) and zero-width (the empty history); each against PyTorch on the window padded or cut to L
        for length in (L, max(1, L // 2), L + 7, 0):
            hist = run.history.last_windows(rows, length, pad).astype(np.int64) if length else \
                np.zeros((len(rows), 0), np.int64)  # [B, length]
            window = np.pad(hist, ((0, 0), (max(0, L - length), 0)), constant_values=pad)[:, -L:]  # [B, L]
            feed = {k: v for k, v in (("user_rows", rows), ("history", hist)) if k in names}
            with torch.no_grad():
                ref = model.user_tower(torch.as_tensor(rows), torch.as_tensor(window)).numpy()
            worst_u = max(worst_u, float(np.abs(user_sess.run(None, feed)[0] - ref).max()))
            if new_user_row is not None:  # the same histories from users the run has never seen
                with torch.no_grad():
                    ref = model.user_tower(None, torch.as_tensor(window)).numpy()
                feed["user_rows"] = np.full(len(rows), new_user_row, np.int64)
                worst_u = max(worst_u, float(np.abs(user_sess.run(None, feed)[0] - ref).max()))
    worst_i = 0.0
    ref_items = run.item_embeddings()
    for s in range(0, run.n_items, 4096):
        rows = np.arange(s, min(s + 4096, run.n_items), dtype=np.int64)
        got = item_sess.run(None, {"item_rows": rows})[0]
        worst_i = max(worst_i, float(np.abs(got - ref_items[rows]).max()))
    if worst_u > TOLERANCE or worst_i > TOLERANCE:
        raise IntegrityError(f"{out}: the ONNX towers differ from PyTorch by up to {max(worst_u, worst_i):.2e} "
                             f"(user {worst_u:.2e}, item {worst_i:.2e}; tolerance {TOLERANCE:g})")
    log.info("onnxruntime reproduces the towers: %d users max |diff| %.2e, %d items max |diff| %.2e",
             len(users), worst_u, run.n_items, worst_i)
    return ExportReport(out, names, len(users), run.n_items, worst_u, worst_i)
