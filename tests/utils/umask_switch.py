"""The process umask set for a block, as the atomic-write tests need it (file modes depend on it)."""
from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator


@contextlib.contextmanager
def umask(mask: int) -> Iterator[None]:
    """Run the block under ``mask``, then put the old umask back."""
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)
