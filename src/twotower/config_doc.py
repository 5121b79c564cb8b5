"""docs/config.md, the reference of every setting, generated from the config dataclasses.

A setting's meaning is its ``#:`` comment in twotower/config.py (the convention Sphinx reads for attributes): the
``#:`` lines right above the field, or one at the end of its line. Plain ``#`` comments stay the code's own notes
(why a default, what was measured). Defaults are read from the dataclasses, never written here, so the page cannot
drift from the code: tests/config/test_config_doc.py regenerates it and compares, and refuses a field without a
meaning. Regenerate with::

    python -m twotower.config_doc > docs/config.md
"""
from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import json
from typing import Any

from twotower import config as C

__all__ = ["field_meanings", "missing_meanings", "reference", "DOCUMENTED"]

#: The configs a user sets, with the heading of their part of the page; RunConfig's sections are listed from it.
DOCUMENTED: tuple[tuple[type, str], ...] = (
    (C.SearchConfig, "`SearchConfig`: `twotower search evaluate | index | query`, `POST /search`"),
    (C.PrepareConfig, "`PrepareConfig`: `twotower search prepare`"),
    (C.FinetuneConfig, "`FinetuneConfig`: `twotower search train`, `twotower.search.finetune_bi_encoder`"),
    (C.RerankTrainConfig, "`RerankTrainConfig`: `twotower rerank train`, `twotower.search.train_cross_encoder`"),
)


@functools.cache
def _classes() -> dict[str, ast.ClassDef]:
    tree = ast.parse(inspect.getsource(C))
    return {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}


def field_meanings(cls: type) -> dict[str, str]:
    """Each setting of ``cls`` (sections left out) with its ``#:`` comment text ("" where it has none)."""
    lines = inspect.getsource(C).splitlines()
    out: dict[str, str] = {}
    for stmt in _classes()[cls.__name__].body:
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        if dataclasses.is_dataclass(C._hints(cls)[stmt.target.id]):
            continue
        above, i = [], stmt.lineno - 2  # 0-based: the line above the field
        while i >= 0 and lines[i].strip().startswith("#"):
            if lines[i].strip().startswith("#:"):
                above.append(lines[i].strip()[2:].strip())
            i -= 1
        tail = lines[stmt.end_lineno - 1][stmt.end_col_offset:].strip()  # type: ignore[index]
        parts = [*reversed(above), tail[2:].strip() if tail.startswith("#:") else ""]
        out[stmt.target.id] = " ".join(p for p in parts if p)
    return out


def _sections(cls: type, prefix: str = "") -> list[tuple[str, type]]:
    """(dotted name, class) of RunConfig's sections that hold settings, in declaration order."""
    found = []
    for name, hint in C._hints(cls).items():
        if dataclasses.is_dataclass(hint):
            found += [(f"{prefix}{name}", hint), *_sections(hint, f"{prefix}{name}.")]
    return found


def missing_meanings() -> list[str]:
    """The settings with no ``#:`` meaning, as ``Class.field``."""
    classes = {cls for _, cls in _sections(C.RunConfig)} | {cls for cls, _ in DOCUMENTED}
    return sorted(f"{cls.__name__}.{name}" for cls in classes for name, text in field_meanings(cls).items() if not text)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _value(value: Any) -> str:
    return _cell(f"`{json.dumps(value)}`")


def _intro(cls: type) -> list[str]:
    doc = cls.__doc__ or ""
    if not doc or doc.startswith(f"{cls.__name__}("):  # the dataclass's generated signature: no docstring
        return []
    return [" ".join(inspect.cleandoc(doc).split("\n\n")[0].split()), ""]


def _table(cls: type, keys: list[str], defaults: list[dict[str, Any]], heads: list[str]) -> list[str]:
    meanings = field_meanings(cls)
    out = [f"| key | {' | '.join(heads)} | meaning |", "|---|" + "---|" * len(heads) + "---|"]
    for name, key in zip(meanings, keys):
        values = " | ".join(_value(d[name]) for d in defaults)
        out.append(f"| `{key}` | {values} | {_cell(meanings[name])} |")
    return out + [""]


def reference() -> str:
    """The text of docs/config.md."""
    run = C.config_to_dict(C.RunConfig())
    out = [
        "# Settings reference",
        "",
        "<!-- generated from src/twotower/config.py by `python -m twotower.config_doc > docs/config.md`; "
        "do not edit by hand -->",
        "",
        "## Run settings (`twotower train`, `twotower.train_run`)",
        "",
        "Every key of a `--config` file (TOML, YAML or JSON: `[train]` then `epochs = 5`) and of a dotted override "
        "on the command line (`train.epochs=5`), with its default. `twotower train ... --print-config` prints what a "
        "file, the flags and the overrides resolve to; a run writes the same into `OUT/config.json`. `null` "
        "(`\"none\"` in a TOML file, which has no null) leaves an optional setting unset; on the command line write "
        "`=null` (`data.rating_col=none` names a column called \"none\"). In Python the same keys are the "
        "fields of `RunConfig`'s sections (`TrainConfig(epochs=5)`), or `load_config(base={...})`.",
        "",
    ]
    sections = _sections(C.RunConfig)
    towers = [name for name, cls in sections if cls is C.TowerConfig]
    for name, cls in sections:
        if not field_meanings(cls) or (cls is C.TowerConfig and name != towers[0]):
            continue
        node: Any = run
        for part in name.split("."):
            node = node[part]
        if cls is C.TowerConfig:  # the two towers: one table, a default column each
            both = " and ".join(f"`{t}`" for t in towers)
            out += [f"### {both}", "", *_intro(cls),
                    "The same keys for both towers (`model.user.hidden`, `model.item.hidden`), each with its own "
                    "default.", ""]
            defaults = [run["model"][t.split(".")[1]] for t in towers]
            out += _table(cls, list(field_meanings(cls)), defaults, [f"`{t}` default" for t in towers])
            continue
        out += [f"### `{name}`", "", *_intro(cls)]
        out += _table(cls, [f"{name}.{k}" for k in field_meanings(cls)], [node], ["default"])
    out += ["## Text search (`twotower search`, `twotower rerank`)", "",
            "These are set by the commands' flags (named beside a setting that has one) or, in Python, as the "
            "dataclasses' fields (`FinetuneConfig(epochs=3)`); the defaults below are the flags' too.", ""]
    for cls, title in DOCUMENTED:
        out += [f"### {title}", ""]
        out += _table(cls, list(field_meanings(cls)), [C.config_to_dict(cls())], ["default"])
    return "\n".join(out).rstrip("\n") + "\n"


if __name__ == "__main__":  # pragma: no cover - the command that writes docs/config.md
    print(reference(), end="")
