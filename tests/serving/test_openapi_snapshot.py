"""The OpenAPI schema is part of the API: changes must be deliberate.

Regenerate after an intended change with ``UPDATE_SNAPSHOTS=1 pytest tests/serving/test_openapi_snapshot.py``.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

SNAPSHOT = Path(__file__).with_name("openapi_snapshot.json")


def test_openapi_matches_snapshot(service):
    from twotower.serving import ServiceSettings, create_app

    schema = create_app(service=service, settings=ServiceSettings()).openapi()
    schema["info"].pop("version", None)  # the package version is not part of the contract
    text = json.dumps(schema, indent=2, sort_keys=True) + "\n"
    if os.environ.get("UPDATE_SNAPSHOTS") == "1" or not SNAPSHOT.exists():
        SNAPSHOT.write_text(text)
    assert json.loads(text) == json.loads(SNAPSHOT.read_text()), (
        "the OpenAPI schema changed; if intended, rerun with UPDATE_SNAPSHOTS=1 and commit the snapshot"
    )
    paths = schema["paths"]
    for p in ("/recommend", "/recommend/batch", "/similar-items", "/explain", "/items/{item_id}", "/healthz",
              "/readyz", "/metrics"):
        assert p in paths
