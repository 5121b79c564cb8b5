"""An empty item in a comma-list flag (`--ks 10,,20`, a trailing comma) is refused naming the flag and its position,
the same way for every such flag; it was dropped without a word, so `evaluate --ks 10,,20` ran as `--ks 10,20`.
A blank value keeps its meaning (`--history ''`: no history yet; `--baselines ''`: none)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from twotower.cli.id_lists import parse_id_list, split_comma_list
from twotower.cli.main import main
from twotower.errors import ConfigError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "serving"))
from tiny_run import build_tiny_run  # noqa: E402


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return build_tiny_run(tmp_path_factory.mktemp("emptyitems"))


@pytest.mark.parametrize("text, position", [("10,,20", 2), ("10,20,", 3), (",10", 1), ("10, ,20", 2)])
def test_an_empty_item_is_refused_with_its_position(text, position) -> None:
    with pytest.raises(ConfigError, match=rf"^--ks: item {position} of .* is empty"):
        split_comma_list(text, "--ks")
    with pytest.raises(ConfigError, match=rf"^--history: item {position} of .* is empty"):
        parse_id_list(text, "--history")


def test_blank_values_and_json_arrays() -> None:
    assert split_comma_list(" 10, 20 ", "--ks") == ["10", "20"]
    assert split_comma_list("", "--baselines") == [] == parse_id_list("", "--history")
    with pytest.raises(ConfigError, match=r"^--users: item 2 of the JSON array is empty"):
        parse_id_list('["u1", " ", "u2"]', "--users")


@pytest.mark.parametrize("argv, flag", [
    (["evaluate", "--run", "RUN", "--ks", "10,,20"], "--ks"),
    (["evaluate", "--run", "RUN", "--baselines", "popularity,,ease"], "--baselines"),
    (["data", "split", "--input", "nowhere.csv", "--ratios", "0.8,,0.1,0.1", "--out", "nowhere"], "--ratios"),
    (["recommend", "--run", "RUN", "--history", "50,,181"], "--history"),
    (["recommend", "--run", "RUN", "--users", "1,2,"], "--users"),
    (["similar", "--run", "RUN", "--items", "50,,181"], "--items"),
    (["explain", "--run", "RUN", "--history", "50,,181", "--item", "7"], "--history"),
])
def test_every_comma_list_flag_refuses_it(run_dir, argv, flag, capsys) -> None:
    assert main([str(run_dir) if a == "RUN" else a for a in argv]) == 2
    err = capsys.readouterr().err
    assert f"{flag}: item " in err and " is empty" in err, err
