"""Defects found walking the config path as a user: overrides, file types and file syntax."""
import pytest

from twotower.config import load_config
from twotower.errors import ConfigError


@pytest.mark.parametrize("raw, want", [("1", True), ("0", False), ("yes", True), ("off", False), ("true", True)])
def test_a_boolean_override_takes_one_and_zero(raw, want):
    # `model.user.use_id=1` arrived as the JSON number 1 and was refused ("expected true/false, got 1")
    # while the string "1" of a file was taken
    assert load_config(None, [f"model.user.use_id={raw}"]).model.user.use_id is want


def test_a_boolean_override_of_another_number_names_the_spellings():
    with pytest.raises(ConfigError, match=r"model.user.use_id: expected true/false \(or yes/no, on/off, 1/0\), got 2"):
        load_config(None, ["model.user.use_id=2"])


def test_an_override_given_twice_with_two_values_is_refused_on_the_command_line(capsys, tmp_path):
    # `train.epochs=3 ... train.epochs=4` trained 4 epochs without a word about the 3 (a file's key written
    # twice is refused); the same value twice is no clash, and load_config's list keeps the later value
    import json

    from twotower.cli.main import main

    assert main(["train", "--print-config", "train.epochs=3", "--set", "train.epochs=4"]) != 0
    assert ("error: command line: train.epochs is given twice with different values (train.epochs=3 and "
            "train.epochs=4); give it once") in capsys.readouterr().err
    assert main(["train", "--print-config", "train.epochs=4", "train.epochs=4.0"]) == 0
    assert json.loads(capsys.readouterr().out)["train"]["epochs"] == 4
    assert load_config(None, ["train.epochs=3", "train.epochs=4"]).train.epochs == 4
    inp = tmp_path / "in.csv"
    inp.write_text("user_id,item_id,timestamp\n1,2,3\n", encoding="utf-8")
    assert main(["data", "split", "--input", str(inp), "--out", str(tmp_path / "o"), "data.user_col=a",
                 "data.user_col=b"]) != 0
    assert "data.user_col is given twice with different values" in capsys.readouterr().err
