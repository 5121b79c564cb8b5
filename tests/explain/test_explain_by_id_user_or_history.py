"""tt.explain_by_id takes a known user or a new user's history, not both, as `twotower explain` and POST /explain."""
from __future__ import annotations

import pytest

from twotower.errors import ConfigError
from twotower.explain import explain_by_id


@pytest.mark.parametrize("keyword", ["history", "history_ids"])
def test_a_user_and_a_history_together_are_refused_as_post_explain_refuses_them(mean_run, keyword):
    # the history silently replaced user u1's own, explaining another user than the one named
    with pytest.raises(ConfigError, match=rf"^give exactly one of user_id \(a known user\) or {keyword} \(item ids, "
                                          r"oldest first\)$"):
        explain_by_id(mean_run, user_id="u1", item_id="i4", **{keyword: ["i1", "i2"]})


def test_neither_names_the_arguments_of_explain_by_id(mean_run):
    # was "explain needs a user: pass user_row (a known user) or history_rows (an ad-hoc history)": explain_by_id
    # has neither argument
    with pytest.raises(ConfigError, match=r"^give exactly one of user_id \(a known user\) or history \(item ids"):
        explain_by_id(mean_run, item_id="i4")


def test_either_alone_is_still_explained(mean_run):
    assert explain_by_id(mean_run, user_id="u1", item_id="i4")["user_id"] == "u1"
    assert explain_by_id(mean_run, history=["i1", "i2"], item_id="i4")["user_id"] is None
