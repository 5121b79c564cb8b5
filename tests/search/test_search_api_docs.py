"""help() on the search API a notebook reaches through ``twotower.search`` says what each public name does."""
from __future__ import annotations

import inspect

import twotower.search as ts


def _bare() -> list[str]:
    bare = []
    for name in ts.__all__:
        obj = getattr(ts, name)
        if (inspect.isfunction(obj) or inspect.isclass(obj)) and not inspect.getdoc(obj):
            bare.append(name)
        if inspect.isclass(obj):
            for member_name, member in vars(obj).items():
                target = member.fget if isinstance(member, property) else getattr(obj, member_name)
                if not member_name.startswith("_") and (callable(target) or isinstance(member, property)) \
                        and not inspect.getdoc(target):
                    bare.append(f"{name}.{member_name}")
    return bare


def test_every_public_search_function_class_and_member_has_a_docstring():
    # load_corpus, load_queries, BM25Retriever.fit/save/load/n_docs, DenseRetriever.search/encode_queries/
    # search_embeddings, FusionChoice.apply/describe, SearchIndex.save/load/hits and CrossEncoderReranker.backend
    # showed nothing in help()
    assert _bare() == []
