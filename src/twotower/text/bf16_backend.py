"""bfloat16 forward pass for a sentence-transformers encoder (PyTorch, no export).

Legend: ``B`` texts in a batch, ``T`` word pieces, ``H`` hidden size.

Why: encoding a corpus on a CPU is compute-bound in the transformer's matrix
products. CPUs with native bfloat16 dot products (AVX512-BF16 on Zen 4 and
Cooper Lake and later, AMX on Sapphire Rapids) run those products 2-3x faster
in bfloat16 than in float32, with float32 accumulation. Where bfloat16 is not
native PyTorch emulates it and the pass is *slower* than float32, which is why
the encoder's ``auto`` backend asks :func:`twotower.losses.fused_xent.native_bf16`
before choosing this one.

What runs in bfloat16: only the first module (the transformer) of a copy of
the model. Its token embeddings ``[B, T, H]`` are cast back to float32 by a
forward hook, so pooling (a sum over up to ``T`` tokens), any Dense layer and
the normalisation run in float32 as usual; the vectors carry only the
transformer's bfloat16 rounding (cosine >= 0.9999 to float32 on SciFact).

The source model is never converted: fine-tuning code trains it in float32,
and the copy is rebuilt when its parameters change (parameter versions, as the
ONNX backend checks them), so a bf16 encoder never serves stale weights.
"""
from __future__ import annotations

import copy
import logging
from collections.abc import MutableMapping
from typing import Any

__all__ = ["Bf16Copy", "param_versions"]

logger = logging.getLogger(__name__)


def param_versions(model: Any) -> int:
    """Sum of the parameters' version counters: changes on every in-place update (optimizer step, load)."""
    return sum(int(p._version) for p in model.parameters())


def _float32_outputs(module: Any, inputs: Any, output: Any) -> Any:
    """Forward hook: cast every floating tensor the transformer returns (token embeddings [B, T, H]) to float32."""
    import torch  # noqa: PLC0415

    if isinstance(output, MutableMapping):  # a dict, or transformers' BatchFeature (a UserDict)
        for key, value in output.items():
            if torch.is_tensor(value) and value.is_floating_point():
                output[key] = value.float()
            elif isinstance(value, (list, tuple)) and value and all(torch.is_tensor(v) for v in value):
                output[key] = type(value)(v.float() if v.is_floating_point() else v for v in value)
    return output


class Bf16Copy:
    """A bfloat16 copy of a sentence-transformers model's transformer, kept in step with the float32 source."""

    def __init__(self, source: Any) -> None:
        self.source = source
        self._copy: Any = None
        self._versions: int | None = None

    def model(self) -> Any:
        """The copy (built on first use, rebuilt when the source's weights changed); encode with its ``encode``."""
        versions = param_versions(self.source)
        if self._copy is None or versions != self._versions:
            if self._copy is not None:
                logger.info("the encoder's weights changed; making a new bfloat16 copy")
            self._copy = _make_copy(self.source)
            self._versions = versions
        return self._copy


def _make_copy(source: Any) -> Any:
    import torch  # noqa: PLC0415

    dup = copy.deepcopy(source)
    for p in dup.parameters():
        p.requires_grad_(False)
        p.grad = None
    dup.eval()
    first = dup[0]
    first.to(torch.bfloat16)
    first.register_forward_hook(_float32_outputs)
    return dup
