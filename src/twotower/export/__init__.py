"""Take a trained run elsewhere: ONNX user and item towers, item embeddings as .npy with the id map.

Imported on first use (:mod:`twotower.utils.lazy`): the exporter loads torch, and `twotower export` checks its
folders (:mod:`twotower.export.folder`) before it.
"""
from twotower.utils.lazy import lazy_exports

_LAZY: dict[str, str] = {
    "ExportReport": "twotower.export.onnx",
    "export_onnx": "twotower.export.onnx",
    "check_onnx": "twotower.export.onnx",
    "check_export_dir": "twotower.export.folder",
}

__all__ = ["ExportReport", "export_onnx", "check_onnx", "check_export_dir"]

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
