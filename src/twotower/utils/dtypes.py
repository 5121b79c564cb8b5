"""The float type the towers are built and trained in, whatever the host's torch default."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator


@contextmanager
def float32_default() -> Iterator[None]:
    """torch's default float type at float32 for the block (a function decorated with it: for the call), the
    caller's put back after it.

    The towers are float32, and so are their saved weights and the fingerprint an index is checked against: under
    a host's ``torch.set_default_dtype(torch.float64)`` a loaded run was built in float64 (the saved weights copied
    into it), so it answered with another fingerprint than its index's and was refused as "retrained since the
    index was built", and ``train_run`` trained and saved a float64 model (3.4 times the file).

    The default is one setting for the whole process, so this is for ``train_run`` alone, whose other process-wide
    state (thread counts, the seeded generators) makes it one training at a time: a load casts its towers instead
    (``build_model``), since loads run side by side in a service's threads."""
    import torch

    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float32)
    try:
        yield
    finally:
        torch.set_default_dtype(before)
