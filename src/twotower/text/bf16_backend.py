"""bfloat16 forward pass for a sentence-transformers encoder (PyTorch, no export).

Legend: ``B`` texts in a batch, ``T`` word pieces, ``H`` hidden size.

Why: encoding a corpus on a CPU is compute-bound in the transformer's matrix
products. CPUs with native bfloat16 dot products (AVX512-BF16 on Zen 4 and
Cooper Lake and later, AMX on Sapphire Rapids) run those products faster in
bfloat16 than in float32, with float32 accumulation (2.5-2.7x for MiniLM's
layer shapes on one Zen 4 core). Where bfloat16 is not
native PyTorch emulates it and the pass is *slower* than float32, which is why
the encoder's ``auto`` backend asks :func:`twotower.utils.runtime.native_bf16`
before choosing this one.

What runs in bfloat16: only the first module (the transformer) of a copy of
the model. Its token embeddings ``[B, T, H]`` are cast back to float32 by a
forward hook, so pooling (a sum over up to ``T`` tokens), any Dense layer and
the normalisation run in float32 as usual; the vectors carry only the
transformer's bfloat16 rounding (cosine >= 0.9999 to float32 on SciFact).

The linear layers of the copy call oneDNN's linear with the bias, and for a
BERT-style ``intermediate`` block the exact GELU, fused into the matrix product
(:class:`OneDnnLinear`). Plain ``F.linear`` on bfloat16 first copies the bias
into the output and GELU is one more pass over ``[B, T, 4H]``: together ~10%
of the bfloat16 forward on MiniLM (one 64-abstract batch on a Zen 4 core:
1.96-1.99x float32's speed without the fusion, 2.20x with it). The fused op is
PyTorch's own (what ``torch.compile`` emits for these layers), tried once on a
tiny input; where it is missing or fails, the copy keeps plain ``nn.Linear``.
Attention is left to PyTorch: its CPU flash-attention costs the same in both
dtypes at MiniLM's head size (32), which is what holds the pass near 2.2x.

A cross-encoder (:class:`twotower.search.rerank.CrossEncoderReranker`) gets the
same copy with another part converted: its transformer body (``base_model``),
hooked the same way, so the relevance head reads float32 features and the
logits are float32 (:func:`cross_encoder_body`).

The source model is never converted: fine-tuning code trains it in float32,
and the copy is rebuilt when its parameters change (parameter versions, as the
ONNX backend checks them), so a bf16 encoder never serves stale weights.
"""
from __future__ import annotations

import copy
import functools
import logging
from collections.abc import Callable, MutableMapping
from typing import Any

import torch
from torch import nn

__all__ = ["Bf16Copy", "OneDnnLinear", "onednn_linear_works", "param_versions", "cross_encoder_body"]

logger = logging.getLogger(__name__)


def param_versions(model: Any) -> int:
    """Sum of the parameters' version counters: changes on every in-place update (optimizer step, load)."""
    return sum(int(p._version) for p in model.parameters())


def _float32_outputs(module: Any, inputs: Any, output: Any) -> Any:
    """Forward hook: cast every floating tensor the transformer returns (token embeddings [B, T, H]) to float32."""
    if isinstance(output, MutableMapping):  # a dict, or transformers' BatchFeature (a UserDict)
        for key, value in output.items():
            if torch.is_tensor(value) and value.is_floating_point():
                output[key] = value.float()
            elif isinstance(value, (list, tuple)) and value and all(torch.is_tensor(v) for v in value):
                output[key] = type(value)(v.float() if v.is_floating_point() else v for v in value)
    return output


def _first_module(model: Any) -> nn.Module:
    """A sentence-transformers bi-encoder's transformer: its first module (pooling and Dense follow it)."""
    return model[0]


def cross_encoder_body(model: Any) -> nn.Module:
    """A sentence-transformers ``CrossEncoder``'s transformer body (BertModel in BertForSequenceClassification): all
    but the relevance head, which then runs in float32 on float32 features."""
    return model.model.base_model


class Bf16Copy:
    """A bfloat16 copy of a sentence-transformers model's transformer, kept in step with the float32 source.

    ``part`` picks the module of the copy that runs in bfloat16 (default: a bi-encoder's first module; for a
    cross-encoder :func:`cross_encoder_body`)."""

    def __init__(self, source: Any, part: Callable[[Any], nn.Module] = _first_module) -> None:
        self.source = source
        self.part = part
        self._copy: Any = None
        self._versions: int | None = None

    def model(self) -> Any:
        """The copy (built on first use, rebuilt when the source's weights changed); encode with its ``encode``."""
        versions = param_versions(self.source)
        if self._copy is None or versions != self._versions:
            if self._copy is not None:
                logger.info("the encoder's weights changed; making a new bfloat16 copy")
            self._copy = _make_copy(self.source, self.part)
            self._versions = versions
        return self._copy


class OneDnnLinear(nn.Module):
    """``y = x W^T + b`` (then ``gelu`` when ``gelu``) as one oneDNN call: ``x[..., I] -> y[..., O]``."""

    def __init__(self, linear: nn.Linear, *, gelu: bool = False) -> None:
        super().__init__()
        self.weight = linear.weight  # [O, I]
        self.bias = linear.bias  # [O] or None
        self.attr, self.algorithm = ("gelu", "none") if gelu else ("none", "")  # "none": the exact (erf) GELU

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.mkldnn._linear_pointwise(x, self.weight, self.bias, self.attr, [], self.algorithm)


@functools.lru_cache(maxsize=1)
def onednn_linear_works() -> bool:
    """True when PyTorch's fused oneDNN linear runs bfloat16 here and matches ``F.linear`` (+ GELU) on a tiny input."""
    try:
        gen = torch.Generator().manual_seed(0)
        x = torch.randn(3, 5, 16, generator=gen).bfloat16()  # [B, T, I]
        lin = nn.Linear(16, 8).bfloat16()
        with torch.no_grad():
            ok = all(
                torch.allclose(OneDnnLinear(lin, gelu=g)(x).float(), ref.float(), atol=0.05)
                for g, ref in ((False, lin(x)), (True, nn.functional.gelu(lin(x))))
            )
    except (AttributeError, RuntimeError, NotImplementedError):  # op not built in, or no bfloat16 kernel here
        return False
    return ok


def _is_exact_gelu(act: Any) -> bool:
    """``act`` is the exact (erf) GELU: ``nn.GELU()`` or transformers' ``GELUActivation`` (BERT's "gelu")."""
    if isinstance(act, nn.GELU):
        return act.approximate == "none"
    return type(act).__name__ == "GELUActivation" and getattr(act, "act", None) is nn.functional.gelu


def _fuse_linears(module: nn.Module) -> int:
    """Swap every ``nn.Linear`` under ``module`` for :class:`OneDnnLinear`, folding BERT-style
    ``intermediate.dense`` + ``intermediate_act_fn`` (exact GELU) into one; returns how many were swapped."""
    n = 0
    for parent in list(module.modules()):
        act = getattr(parent, "intermediate_act_fn", None)
        dense = getattr(parent, "dense", None)
        if isinstance(dense, nn.Linear) and _is_exact_gelu(act):
            parent.dense = OneDnnLinear(dense, gelu=True)
            parent.intermediate_act_fn = nn.Identity()
            n += 1
        for name, child in list(parent.named_children()):
            if type(child) is nn.Linear:
                setattr(parent, name, OneDnnLinear(child))
                n += 1
    return n


def _make_copy(source: Any, part: Callable[[Any], nn.Module]) -> Any:
    dup = copy.deepcopy(source)
    for p in dup.parameters():
        p.requires_grad_(False)
        p.grad = None
    dup.eval()
    body = part(dup)
    body.to(torch.bfloat16)
    if onednn_linear_works():
        logger.debug("bfloat16 copy: %d linear layers on fused oneDNN calls", _fuse_linears(body))
    body.register_forward_hook(_float32_outputs)
    return dup
