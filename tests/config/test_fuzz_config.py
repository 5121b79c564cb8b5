"""Fuzzing config files (TOML / YAML / JSON) and dotted overrides (issue 7).

``load_config`` either returns a valid RunConfig or raises ConfigError whose
message names the setting or the file; never another exception. Non-finite
numbers (nan, inf) are refused for every float setting.
"""
from __future__ import annotations

import dataclasses
import json
import math
import tempfile
import typing
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from twotower.config import RunConfig, load_config
from twotower.errors import ConfigError

SLOW_EXAMPLES = 1000


def _setting_names() -> list[str]:
    out = []

    def walk(cls, prefix):
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            tp = hints[f.name]
            name = f"{prefix}{f.name}"
            if dataclasses.is_dataclass(tp):
                walk(tp, name + ".")
            else:
                out.append(name)

    walk(RunConfig, "")
    out += ["model.user.out_dim", "model.item.hidden", "model.user.history"]
    return out


NAMES = _setting_names()
SECTIONS = ["data", "model", "loss", "train", "eval", "model.user", "model.item"]
scalars = (
    st.none() | st.booleans() | st.integers() | st.integers(-(10**30), 10**30)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=10)
    | st.sampled_from(["temporal", "recency", "inbatch", "adamw", "NDCG@10", "popularity", "1e400", "nan", "inf",
                       "-inf", "Infinity", "true", "null", "[1,2]", "0.8,0.1,0.1", "\ud800"])
)
values = st.recursive(scalars, lambda i: st.lists(i, max_size=4) | st.dictionaries(st.text(max_size=6), i, max_size=3),
                      max_leaves=10)


@st.composite
def nested_configs(draw) -> dict:
    data: dict = {}
    for name in draw(st.lists(st.sampled_from(NAMES + SECTIONS + ["bogus", "train.epochz"]), max_size=5)):
        node = data
        parts = name.split(".")
        for p in parts[:-1]:
            nxt = node.setdefault(p, {})
            if not isinstance(nxt, dict):
                break
            node = nxt
        else:
            node[parts[-1]] = draw(values)
    return data


def _check(call) -> None:
    try:
        cfg = call()
    except ConfigError as e:
        assert str(e)
        return
    assert isinstance(cfg, RunConfig)
    for section in (cfg.loss, cfg.train, cfg.data, cfg.model.user, cfg.model.item):
        for f in dataclasses.fields(section):
            v = getattr(section, f.name)
            if isinstance(v, float):
                assert math.isfinite(v), (f.name, v)


def _dump(data: dict, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(data, allow_nan=True)
    if fmt == "yaml":
        return yaml.safe_dump(data, allow_unicode=True)
    return _toml(data)


def _toml(data: dict, prefix: str = "") -> str:
    """A tiny TOML writer (values as JSON where TOML agrees; None dropped)."""
    lines, tables = [], []
    for k, v in data.items():
        key = json.dumps(str(k), ensure_ascii=True)
        if isinstance(v, dict):
            tables.append((f"{prefix}{key}", v))
        elif v is None:
            continue
        elif isinstance(v, bool):
            lines.append(f"{key} = {'true' if v else 'false'}")
        elif isinstance(v, float) and not math.isfinite(v):
            lines.append(f"{key} = {'nan' if math.isnan(v) else ('inf' if v > 0 else '-inf')}")
        elif isinstance(v, (int, float, str)):
            lines.append(f"{key} = {json.dumps(v, ensure_ascii=True)}")
        else:
            lines.append(f"{key} = {json.dumps(str(v), ensure_ascii=True)}")
    out = "\n".join(lines) + "\n"
    for name, sub in tables:
        out += f"[{name}]\n" + _toml(sub, prefix=name + ".")
    return out


def _files_test(n: int | None):
    @settings(max_examples=n) if n else (lambda f: f)
    @given(data=nested_configs(), fmt=st.sampled_from(["toml", "yaml", "json"]))
    def test(data, fmt):
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / f"c.{fmt}"
            try:
                path.write_text(_dump(data, fmt), encoding="utf-8", errors="surrogatepass")
            except (ValueError, TypeError, yaml.YAMLError):
                return
            _check(lambda: load_config(path))

    return test


def _raw_test(n: int | None):
    @settings(max_examples=n) if n else (lambda f: f)
    @given(raw=st.binary(max_size=200) | st.text(max_size=200).map(lambda t: t.encode("utf-8", "surrogatepass"))
           | st.sampled_from([b"[" * 3000, b"a: &a [*a]", b"!!python/object/apply:os.system ['echo hi']",
                              b"- 1\n- 2", b"x = 1\nx = 2", b"\xef\xbb\xbf{}", b"null", b"[]"]),
           suffix=st.sampled_from([".toml", ".yaml", ".yml", ".json", ".ini", ""]))
    def test(raw, suffix):
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / f"c{suffix}"
            path.write_bytes(raw)
            _check(lambda: load_config(path))

    return test


overrides = st.one_of(
    st.builds(lambda n, v: f"{n}={v}", st.sampled_from(NAMES + SECTIONS + ["", ".", "a..b", "train.epochs.x"]),
              st.text(max_size=12) | scalars.map(lambda v: json.dumps(v, allow_nan=True))),
    st.text(max_size=20),
)


def _overrides_test(n: int | None):
    @settings(max_examples=n) if n else (lambda f: f)
    @given(items=st.lists(overrides, max_size=5))
    def test(items):
        _check(lambda: load_config(overrides=items))

    return test


test_fuzz_config_files = _files_test(None)
test_fuzz_config_raw_bytes = _raw_test(None)
test_fuzz_config_overrides = _overrides_test(None)
test_fuzz_config_files_slow = pytest.mark.slow(_files_test(SLOW_EXAMPLES))
test_fuzz_config_raw_bytes_slow = pytest.mark.slow(_raw_test(SLOW_EXAMPLES))
test_fuzz_config_overrides_slow = pytest.mark.slow(_overrides_test(SLOW_EXAMPLES))
