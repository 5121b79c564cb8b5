"""The service's 404 for an id that differs from a known one only in case or leading zeros names the known one."""
from __future__ import annotations

import pytest

from twotower.errors import NotFoundError
from twotower.serving.catalog import ItemCatalog


def test_recommend_404_names_the_known_spelling(client):
    r = client.post("/recommend", json={"user_id": "U1", "k": 3})
    assert r.status_code == 404
    assert "'u1' is known" in r.json()["error"]["message"]
    r = client.post("/recommend", json={"history": ["I3"], "k": 3})
    assert r.status_code == 404
    assert "'i3' is known" in r.json()["error"]["message"]
    assert client.post("/recommend", json={"user_id": "u1", "k": 3}).status_code == 200


def test_a_catalogue_with_its_own_lookup_names_the_same_spelling(service):
    own = ItemCatalog(service.catalog.ids, service.catalog.columns)  # not the run's vocabulary
    with pytest.raises(NotFoundError) as e:
        own.row("I3")
    assert str(e.value) == ("unknown item 'I3' (not among the 60 known items; 'i3' is known: ids are text, so "
                            "leading zeros and case count)")
