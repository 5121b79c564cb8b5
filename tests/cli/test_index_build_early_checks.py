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


def test_a_factory_string_valid_at_some_dimension_is_left_to_the_build(tmp_path, capsys):
    # PQ7 needs 7 to divide the dimension: not known before the run loads, so the run is read first
    assert main(["index", "build", "--run", str(tmp_path / "nope"), "--index", "PQ7"]) == 2
    assert "unknown run" in capsys.readouterr().err
