"""Take a trained run elsewhere: ONNX user and item towers, item embeddings as .npy with the id map."""
from twotower.export.onnx import ExportReport, check_export_dir, check_onnx, export_onnx

__all__ = ["ExportReport", "export_onnx", "check_onnx", "check_export_dir"]
