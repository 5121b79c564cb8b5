"""The sentence names a categorical column's value (an e-commerce category) that the recommended item and every
named history item share, beside the first multi-valued column's; never one that a named item lacks."""
from __future__ import annotations

from twotower.explain.metadata import MetadataColumns
from twotower.explain.text import explanation_text, sentence_facts

COLS = MetadataColumns(multi=("tags",), categorical=("category",), verb="bought")


def _expl(item: dict) -> dict:
    return {"item_id": "0077", "item": {"title": "Velo Premium Cat Toys 38", **item}, "already_seen": False,
            "basis": "history", "reads_history": True, "profile": "popularity", "history": [],
            "shared_metadata": {}}


def test_a_shared_category_is_said_before_the_shared_tags():
    table = [
        {"item_id": "000480", "title": "Acme Urban Cat Toys 95", "category": "cat toys", "tags": "bundle|eco",
         "contribution": 0.03},
        {"item_id": "002162", "title": "Brio Pro Cat Toys 38", "category": "cat toys", "tags": "bundle",
         "contribution": 0.02},
        {"item_id": "100001", "title": "Nordi Urban Cookbooks 64", "category": "cookbooks", "tags": "bundle",
         "contribution": -0.01},
    ]
    expl = _expl({"category": "cat toys", "tags": "bundle|gift"})
    assert explanation_text(expl, COLS, table) == (
        "Because you bought Acme Urban Cat Toys 95 and Brio Pro Cat Toys 38 (both cat toys, bundle).")
    assert sentence_facts(expl, COLS, table)["categorical"] == ["cat toys"]


def test_a_category_one_named_item_lacks_is_not_claimed():
    table = [
        {"item_id": "000480", "title": "Acme Urban Cat Toys 95", "category": "cat toys", "tags": "eco",
         "contribution": 0.03},
        {"item_id": "100001", "title": "Nordi Urban Cookbooks 64", "category": "cookbooks", "tags": "new",
         "contribution": 0.02},
    ]
    text = explanation_text(_expl({"category": "cat toys", "tags": "gift"}), COLS, table)
    assert text == "Because you bought Acme Urban Cat Toys 95 and Nordi Urban Cookbooks 64."
    # a missing category is no shared fact, even when every item misses it
    table = [{"item_id": "a", "title": "A", "category": None, "tags": "", "contribution": 0.1}]
    assert explanation_text(_expl({"category": None, "tags": ""}), COLS, table) == "Because you bought A."


def test_other_contributors_are_counted_as_items_not_film_titles_when_bought():
    """"and 2 other bundle titles that also raise its score" after "Because you bought": film wording on a shop."""
    table = [
        {"item_id": f"i{j}", "title": f"Toy {j}", "category": "cat toys", "tags": "bundle", "contribution": 0.1 - j / 100}
        for j in range(4)
    ]
    text = explanation_text(_expl({"category": "cat toys", "tags": "bundle"}), COLS, table)
    assert text.endswith(" and 2 other bundle items that also raise its score."), text
    one = explanation_text(_expl({"category": "cat toys", "tags": "bundle"}), COLS, table[:3])
    assert one.endswith(" and 1 other bundle item that also raises its score."), one
    films = MetadataColumns(multi=("tags",), categorical=("category",))  # data.history_verb's default, "watched"
    assert explanation_text(_expl({"category": "cat toys", "tags": "bundle"}), films, table).endswith(
        " and 2 other bundle titles that also raise its score.")


def test_price_range_is_over_the_history_items_sharing_the_category_the_sentence_names():
    """price_range was taken among history items sharing a tags value only: empty when the shared fact was the
    category ("(both cat toys)"), though the history held cat toys with prices."""
    from twotower.explain.metadata import shared_metadata

    cols = MetadataColumns(multi=("tags",), categorical=("category",), numeric=("price",), verb="bought")
    item = {"category": "cat toys", "tags": "gift", "price": 12.5}
    history = [
        {"category": "cat toys", "tags": "eco", "price": 9.99},
        {"category": "cat toys", "tags": "bundle", "price": 19.0},
        {"category": "cookbooks", "tags": "new", "price": 30.0},
    ]
    assert shared_metadata(item, history, cols)["price_range"] == {
        "min": 9.99, "max": 19, "count": 2, "item": 12.5, "among": "history items with category cat toys"}
