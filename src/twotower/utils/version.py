"""The installed package's version, as the records an artefact carries name it (``twotower_version``)."""
from __future__ import annotations

__all__ = ["VERSION_KEY", "installed_version"]

#: the key every record (recommend/similar/evaluate ``--out`` records, export.json, an index's meta.json and
#: tune.json) holds the version under; a record written before it was added has none, and readers use ``.get``
VERSION_KEY = "twotower_version"


def installed_version(fallback: str = "unknown") -> str:
    """What ``twotower --version`` prints: the installed distribution's version; ``fallback`` without metadata."""
    try:
        from importlib.metadata import version

        return version("twotower")
    except Exception:  # noqa: BLE001 - metadata missing in odd installs
        return fallback
