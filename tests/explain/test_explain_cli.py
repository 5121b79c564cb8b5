"""`twotower explain`: the sentence and table, --json, ad-hoc --history, unknown ids."""
from __future__ import annotations

import json

import pytest

from twotower.cli.main import main


def test_json_has_history_shared_metadata_and_text(mean_run, capsys) -> None:
    user, item = mean_run.user_vocab.ids[0], mean_run.item_vocab.ids[5]
    assert main(["explain", "--run", str(mean_run.dir), "--user", user, "--item", item, "--json", "--top", "2"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"history", "shared_metadata", "text"} <= set(out)
    assert len(out["history"]) == 2 and {"item_id", "contribution"} <= set(out["history"][0])


def test_plain_output_prints_sentence_then_table(mean_run, capsys) -> None:
    hist = ",".join(mean_run.item_vocab.ids[r] for r in mean_run.history.of(1))
    assert main(["explain", "--run", str(mean_run.dir), "--history", hist, "--item", "i3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith(".") and "contribution" in "\n".join(lines)


def test_unknown_user_exits_2_naming_it(mean_run, capsys) -> None:
    assert main(["explain", "--run", str(mean_run.dir), "--user", "ghost", "--item", "i3"]) == 2
    assert "--user: unknown user 'ghost'" in capsys.readouterr().err


def test_an_unknown_item_names_the_flag_it_came_from(mean_run, capsys) -> None:
    # "unknown item 'x'" alone could be the --item or one of the --history ids
    run = str(mean_run.dir)
    assert main(["explain", "--run", run, "--history", "i1,ghost", "--item", "i3"]) == 2
    assert "--history: item 2 of 2: unknown item 'ghost'" in capsys.readouterr().err
    assert main(["explain", "--run", run, "--history", "i1,i2", "--item", "ghost"]) == 2
    assert "--item: unknown item 'ghost'" in capsys.readouterr().err


def test_the_sentence_uses_the_runs_verb(mean_run, monkeypatch, capsys) -> None:
    # "Because you watched ..." was written into every explanation, for shop and book data too
    import weakref
    from dataclasses import replace

    from twotower.explain import explainer

    cfg = mean_run.config
    monkeypatch.setattr(mean_run, "config", replace(cfg, data=replace(cfg.data, history_verb="bought")))
    monkeypatch.setattr(explainer, "_COLUMNS", weakref.WeakKeyDictionary())  # column roles are cached per run
    user = mean_run.user_vocab.ids[1]
    seen = mean_run.item_vocab.ids[int(mean_run.history.of(1)[0])]
    e = explainer.explain_by_id(mean_run, user_id=user, item_id=seen)
    assert e["text"].startswith("You already bought ")
    hist = [mean_run.item_vocab.ids[r] for r in mean_run.history.of(1)]
    texts = [explainer.explain_by_id(mean_run, history_ids=hist, item_id=i)["text"]
             for i in mean_run.item_vocab.ids if i not in hist]
    because = [t for t in texts if t.startswith("Because you ")]
    assert because and all(t.startswith("Because you bought ") for t in because)


def _explanation(shared: dict, history: list[dict]) -> dict:
    return {"text": "Because you bought A.", "item_id": "x", "item": {"title": "X"}, "score": 0.5,
            "history_total": 0.1, "basis": "history", "method": "loo", "history": history,
            "shared_metadata": {"history_items": len(history), **shared}}


def test_the_table_shows_the_runs_own_multi_valued_column() -> None:
    """The history table's last column was headed "genres" for every catalogue: a shop's tags never showed, an
    empty "genres" column did."""
    from twotower.cli.explain_cmd import format_explanation

    hist = [{"item_id": "a", "title": "A", "tags": "red|blue", "contribution": 0.2}]
    table = format_explanation(_explanation({"tags": [{"value": "red", "count": 1}]}, hist)).splitlines()
    assert table[4].split() == ["contribution", "item_id", "title", "tags"]
    assert table[5].split() == ["+0.2000", "a", "A", "red|blue"]
    # no multi-valued column: no such column in the table
    plain = format_explanation(_explanation({}, [{"item_id": "a", "title": "A", "contribution": 0.2}])).splitlines()
    assert plain[4].split() == ["contribution", "item_id", "title"]


def test_a_new_user_with_features_is_explained_as_recommend_ranks_them(feature_run, capsys) -> None:
    from twotower.explain import explain_by_id

    run = str(feature_run.dir)
    hist = [feature_run.item_vocab.ids[r] for r in feature_run.history.of(2)]
    args = ["explain", "--run", run, "--history", ",".join(hist), "--item", "i0", "--json"]
    assert main([*args, "--user-features", '{"age": 52}']) == 0
    got = json.loads(capsys.readouterr().out)
    assert got == json.loads(json.dumps(explain_by_id(feature_run, history_ids=hist, item_id="i0",
                                                      user_features={"age": 52})))
    assert got["user_features"] == ["age"]
    assert main([*args, "--user-features", "{age: 3}"]) == 2
    assert "--user-features: not JSON" in capsys.readouterr().err
    assert main([*args, "--user-features", '{"agee": 3}']) != 0
    assert "error: --user-features agee: not a user feature" in capsys.readouterr().err
    assert main(["explain", "--run", run, "--user", "u1", "--item", "i0", "--user-features", "{}"]) == 2
    assert ("error: --user-features: the features of a user unseen in training go with --history, not with --user "
            "(a known user is read with the features it was trained with)") in capsys.readouterr().err


@pytest.mark.parametrize("age", ["1e30", "3e38"])
def test_features_that_overflow_the_tower_are_refused_naming_user_features(feature_run, capsys, age) -> None:
    """A finite age of 1e30 overflows float32 inside the user tower: `explain` printed "score nan" (and
    `--json` a NaN, which is not JSON) and `recommend` failed with "queries contain NaN or inf; check the
    encoder output", naming no field. Both now refuse it naming --user-features, as POST /explain names user_features (422)."""
    from twotower.errors import DataError
    from twotower.explain import explain_by_id

    run = str(feature_run.dir)
    hist = [feature_run.item_vocab.ids[r] for r in feature_run.history.of(2)]
    said = "user_features: the user tower's output is not finite"
    for cmd in (["explain", "--item", "i0"], ["explain", "--item", "i0", "--json"], ["recommend", "--exact"]):
        assert main([cmd[0], "--run", run, "--history", ",".join(hist), *cmd[1:],
                     "--user-features", f'{{"age": {age}}}']) == 2, cmd
        out = capsys.readouterr()
        assert f"error: --{said.replace('_', '-', 1)}" in out.err and "Traceback" not in out.err, cmd
        assert "nan" not in out.out.lower(), cmd
    with pytest.raises(DataError, match=said):  # the Python explain refuses it too
        explain_by_id(feature_run, history_ids=hist, item_id="i0", user_features={"age": float(age)})


def test_titles_with_line_breaks_stay_in_their_row() -> None:
    """A title holding a newline split the explanation's sentence, header and table rows; written as ``\\n`` now."""
    from twotower.cli.explain_cmd import format_explanation

    hist = [{"item_id": "a", "title": "A\nB", "contribution": 0.2}]
    e = {**_explanation({}, hist), "text": "Because you bought A\nB \x1b[2J.", "item": {"title": "X\tY"}}
    lines = format_explanation(e).splitlines()
    assert lines[0] == "Because you bought A\\nB \\x1b[2J." and lines[2].startswith("item x  X\\tY  score")
    assert lines[5].split() == ["+0.2000", "a", "A\\nB"] and len(lines) == 6


def test_explain_by_id_refuses_a_history_given_as_one_string(mean_run) -> None:
    # the string was read letter by letter: "i1" as the items 'i' and '1' (unknown item 'i'), "12" as [1, 2]
    from twotower.errors import ConfigError
    from twotower.explain import explain_by_id

    with pytest.raises(ConfigError, match=r'^history_ids: must be a list of item ids, oldest first, e.g. \["i1"\], got a string'):
        explain_by_id(mean_run, history_ids="i1", item_id="i3")
    assert explain_by_id(mean_run, history_ids=("i1",), item_id="i3")["text"]


def test_a_tower_that_reads_no_history_is_not_said_to_have_a_history_window(tmp_path, capsys) -> None:
    """model.user.history=none: the footer said "shared with the last 147 history items" and a cold item's sentence
    "... with the 147 items of your history window" of a tower that reads no history, so has no window: the items
    compared are the user's whole history."""
    from explain_tiny_run import train_tiny_run

    from twotower.explain.metadata import MetadataColumns
    from twotower.explain.text import explanation_text

    run = train_tiny_run(tmp_path / "none", history="none", user_features=True, epochs=1)
    assert main(["explain", "--run", str(run), "--user", "u1", "--item", "i7", "--json"]) == 0
    e = json.loads(capsys.readouterr().out)
    assert e["reads_history"] is False and e["shared_metadata"]["history_items"] > 0
    assert main(["explain", "--run", str(run), "--user", "u1", "--item", "i7"]) == 0
    out = capsys.readouterr().out
    n = e["shared_metadata"]["history_items"]
    assert f"\nshared with your {n} history items (this model does not read them): genres: " in out, out
    assert "the last" not in out
    cold = {**e, "cold": True, "already_seen": False,
            "shared_metadata": {"history_items": n, "genres": [{"value": "Drama", "count": 2}]}}
    said = explanation_text(cold, MetadataColumns(multi=("genres",)), [])
    assert said.endswith(f"; it shares Drama (2 items) with the {n} items of your history, which this model does not "
                         "read."), said
    assert explanation_text({**cold, "reads_history": True}, MetadataColumns(multi=("genres",)), []).endswith(
        f"with the {n} items of your history window.")
