"""`twotower index build` and `tt.build_index` refuse, before the run loads, what the --index string alone tells."""

from __future__ import annotations

import pytest

from twotower.cli.main import main
from twotower.errors import ConfigError


@pytest.mark.parametrize("spec", ["HNSWxx", "IVF8,Flatt", "ivfpq,RFlatt"])
def test_a_factory_string_faiss_cannot_parse_is_refused_before_the_run_loads(spec, tmp_path, capsys):
    # the run does not exist: the string is refused first (it was refused only once the run had loaded)
    assert main(["index", "build", "--run", str(tmp_path / "nope"), "--index", spec]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: FAISS rejected the index") and "could not parse" in err
    assert "Error in" not in err  # FAISS's C++ location is dropped
    import twotower as tt

    with pytest.raises(ConfigError, match="could not parse"):
        tt.build_index(tmp_path / "nope", spec)


IDMAP_WHY = "(twotower maps the ids itself, so FAISS's id map would be given no ids and refuse the vectors)"


@pytest.mark.parametrize("spec, head, bare", [("IDMap,Flat", "IDMap", "Flat"), ("IDMap2,HNSW32", "IDMap2", "HNSW32")])
def test_an_idmap_prefix_is_refused_before_the_run_loads_naming_the_flag(spec, head, bare, tmp_path, capsys):
    # FAISS parses it: the build ended in FAISS's C++ "add does not make sense with IndexIDMap", a traceback
    assert main(["index", "build", "--run", str(tmp_path / "nope"), "--index", spec]) == 2
    said = f"must not start with {head} {IDMAP_WHY}, got {spec!r}; write {bare!r}"
    assert capsys.readouterr().err.strip() == f"error: --index: {said}"
    import twotower as tt

    with pytest.raises(ConfigError) as e:
        tt.build_index(tmp_path / "nope", spec)
    assert str(e.value) == f"index: {said}"


@pytest.mark.parametrize("spec", ["IVF0,Flat", "IVF0,PQ8x8,RFlat"])
def test_an_ivf_index_of_zero_lists_is_refused_before_the_run_loads(spec, tmp_path, capsys):
    # FAISS parses IVF0: the build trained and filled it, and the first search failed with "'cur_nprobe > 0' failed"
    assert main(["index", "build", "--run", str(tmp_path / "nope"), "--index", spec]) == 2
    assert capsys.readouterr().err.startswith(f"error: index {spec} has no IVF lists: ")
    import numpy as np

    import twotower as tt
    from twotower.index.faiss_index import FaissIndex

    with pytest.raises(ConfigError, match=f"^index {spec} has no IVF lists"):
        tt.build_index(tmp_path / "nope", spec)
    with pytest.raises(ConfigError, match=f"^index {spec} has no IVF lists"):  # the library's own build
        FaissIndex(spec).build(np.eye(16, dtype=np.float32), np.arange(16))


def test_a_factory_string_valid_at_some_dimension_is_left_to_the_build(tmp_path, capsys):
    # PQ7 needs 7 to divide the dimension: not known before the run loads, so the run is read first
    assert main(["index", "build", "--run", str(tmp_path / "nope"), "--index", "PQ7"]) == 2
    assert "unknown run" in capsys.readouterr().err


def test_an_nprobe_above_the_lists_a_factory_string_fixes_is_refused_before_the_run_loads(tmp_path, capsys):
    # IVF8 has 8 lists whatever the run: `--nprobe 20` was refused only after the run had loaded
    assert main(["index", "build", "--run", str(tmp_path / "nope"), "--index", "IVF8,Flat", "--nprobe", "20"]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: --nprobe 20 is more than the 8 lists of IVF8,Flat; --nprobe 8 already searches every list"
    )
    # IVF{nlist} and the ivf shortcut size the lists to the run: left to the check after the load
    for spec in ("IVF{nlist},Flat", "ivf"):
        assert main(["index", "build", "--run", str(tmp_path / "nope"), "--index", spec, "--nprobe", "20"]) == 2
        assert "unknown run" in capsys.readouterr().err


@pytest.mark.parametrize("spec, params, said", [
    ("IVF8,Flat", {"nprobe": 20}, r"^params\['nprobe'\] 20 is more than the 8 lists of IVF8,Flat; params\['nprobe'\] 8 "),
    ("HNSW32", {"nprobe": 4}, r"^params\['nprobe'\]: 'HNSW32' \(HNSW32\) has no nprobe to pin"),
    # a shortcut's list count is the build's, sized to the catalogue: IVF1265 (a probe's size) named another index
    ("ivf", {"efSearch": 8}, r"^params\['efSearch'\]: 'ivf' \(IVF\{nlist\},Flat\) has no efSearch to pin"),
    ("hnsw", {"efSearch": 0}, r"^params\['efSearch'\]: must be an integer >= 1, got 0$"),
    ("auto", {"nprobe": 4}, r"^params pins the setting of one index type"),
])
def test_tt_build_index_refuses_a_pin_the_index_string_rules_out_before_the_run_loads(tmp_path, spec, params, said):
    # the CLI refused these before loading the run; the Python call only after loading it and its vectors
    import twotower as tt

    with pytest.raises(ConfigError, match=said):
        tt.build_index(tmp_path / "nope", spec, params=params)


def test_max_train_help_reads_its_torchrun_default_from_the_index_policy(monkeypatch):
    """The help said "100,000 under torchrun" in its own words, apart from the value the build used."""
    import argparse
    import dataclasses
    import importlib

    from twotower.cli import index_cmd

    autotune = importlib.import_module("twotower.index.autotune")  # the module, not the function of that name

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Policy(autotune.IndexPolicy):
        distributed_max_train: int = 54_321

    monkeypatch.setattr(autotune, "IndexPolicy", Policy)
    parser = argparse.ArgumentParser()
    index_cmd.register(parser.add_subparsers())
    build = parser._subparsers._group_actions[0].choices["index"]._subparsers._group_actions[0].choices["build"]
    (action,) = [a for a in build._actions if "--max-train" in a.option_strings]
    assert "54,321 under torchrun" in action.help
