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
