"""GET /metrics names the served model and index and counts the items and users, as GET /readyz does: a scrape
alone tells a retrained server, or one fallen back to exact search, from the one it replaced."""
from __future__ import annotations


def test_metrics_name_the_model_index_and_counts(service, client) -> None:
    text = client.get("/metrics").text
    ready = client.get("/readyz").json()
    fp, index = ready["model_fingerprint"], ready["index"]
    assert (f'twotower_model_info{{model_fingerprint="{fp}",index_backend="{index["backend"]}",index_factory="",'
            f'index_params="{{}}",index_model_fingerprint="{fp}"}} 1') in text
    lines = text.splitlines()
    assert "twotower_ready 1" in lines
    assert f"twotower_items {len(service.catalog)}" in lines
    assert f"twotower_indexed_items {len(service.index)}" in lines
    assert f"twotower_users {len(service.run.user_vocab)}" in lines


def test_label_values_are_escaped() -> None:
    from twotower.serving.middleware import service_metric_lines

    ready = {"ready": False, "model_fingerprint": "a", "n_items": 2, "n_users": 1,
             "index": {"backend": "faiss", "factory": 'IVF2,"x"\\', "params": {"nprobe": 1}, "count": 2,
                       "model_fingerprint": "b"}}
    info = service_metric_lines(ready)[2]
    assert 'index_factory="IVF2,\\"x\\"\\\\"' in info and 'index_params="{\\"nprobe\\": 1}"' in info
    assert "twotower_ready 0" in service_metric_lines(ready)
