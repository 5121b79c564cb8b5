"""Filters read a metadata cell as the model's feature encoding does (data/features.py's ``split_multi``): the
spaces around each value dropped. The encoder read ``"Drama | Comedy"`` as Drama and Comedy (and ``" acme"`` as
acme), ``explain`` too, but the filters compared the raw pieces: ``--filter genres=Comedy`` (Python's
``filters=``, POST /recommend's) never reached such an item, and the "did you mean" hint offered ``' Comedy'``."""
from __future__ import annotations

import json

import pandas as pd
import pytest

import twotower as tt
from twotower.cli.main import main
from twotower.data.features import FeatureEncoder, FeatureSpec
from twotower.errors import ConfigError
from twotower.serving.catalog import ItemCatalog

from tiny_run import N_ITEMS, build_tiny_run  # noqa: I001 - helper next to this file

GENRES = ["Action | Comedy", "Comedy", "Action|Drama", "Drama | Comedy", "Comedy|Action"]
BRANDS = ["acme ", "acme", " acme", "zeta", "zeta"]


def test_the_catalogue_reads_values_as_the_feature_encoder_does() -> None:
    table = pd.DataFrame({"item_id": [str(i) for i in range(5)], "genres": GENRES, "brand": BRANDS})
    enc = FeatureEncoder(FeatureSpec(key="item_id", categorical=("brand",), multi=("genres",))).fit(table)
    catalog = ItemCatalog(list(table["item_id"]), {"genres": GENRES, "brand": BRANDS})
    assert catalog.known_values("genres") == enc.multi_values["genres"] == ["Action", "Comedy", "Drama"]
    assert catalog.known_values("brand") == enc.categories["brand"] == ["acme", "zeta"]
    assert catalog.filter_mask({"genres": ["Comedy"]}).tolist() == [True, True, False, True, True]
    assert catalog.filter_mask({"brand": ["acme"]}).tolist() == [True, True, True, False, False]
    with pytest.raises(ConfigError) as e:  # each value named once, as the model knows it (was 'Comedy', ' Comedy')
        catalog.filter_mask({"genres": ["Comdy"]})
    assert str(e.value) == "filters.genres: no item has the value 'Comdy'; did you mean 'Comedy'?"


@pytest.fixture(scope="module")
def padded_run(tmp_path_factory):
    return build_tiny_run(tmp_path_factory.mktemp("padded"), item_columns={
        "genres": [GENRES[j % 5] for j in range(N_ITEMS)], "brand": [BRANDS[j % 5] for j in range(N_ITEMS)]})


def test_every_surface_reaches_the_padded_items(padded_run, capsys) -> None:
    from fastapi.testclient import TestClient

    from twotower.serving import create_app

    run = tt.TrainedRun.load(padded_run)
    # brand "acme ", "acme" or " acme" (j % 5 in 0, 1, 2) and genres holding Comedy (0, 1, 3, 4)
    want = {f"i{j}" for j in range(N_ITEMS) if j % 5 in (0, 1)}
    filters = {"brand": ["acme"], "genres": ["Comedy"]}
    py = {r["item_id"] for r in tt.recommend(run, history=["i2"], k=N_ITEMS, filters=filters)[0]}
    assert py == want  # was {i1, i6, ...}: "acme", "Comedy" unpadded alone
    with TestClient(create_app(padded_run)) as client:
        http = client.post("/recommend", json={"history": ["i2"], "k": N_ITEMS, "filters": filters}).json()
    assert {r["item_id"] for r in http["items"]} == py
    capsys.readouterr()
    assert main(["recommend", "--run", str(padded_run), "--threads", "1", "--json", "--history", "i2", "--k",
                 str(N_ITEMS), "--filter", "brand=acme", "--filter", "genres=Comedy"]) == 0
    assert {r["item_id"] for r in json.loads(capsys.readouterr().out)["items"]} == py
    similar = {r["item_id"] for r in tt.similar(run, ["i3"], k=N_ITEMS, filters={"genres": ["Comedy"]})[0]}
    assert similar == {f"i{j}" for j in range(N_ITEMS) if j % 5 in (0, 1, 3, 4)} - {"i3"}
