"""End-to-end pipeline: sources -> prepared data -> training -> saved run -> evaluation."""
from twotower.pipeline.artifacts import TrainedRun, model_fingerprint
from twotower.pipeline.evaluate_run import evaluate_run
from twotower.pipeline.experiment import PROTOCOL_TEXT, baseline_scorers, evaluate_scorers, train_model
from twotower.pipeline.prepare import Prepared, prepare
from twotower.pipeline.resume import resume_config
from twotower.pipeline.run import prepare_data, train_run
from twotower.pipeline.sources import Sources, load_sources

__all__ = [
    "PROTOCOL_TEXT",
    "Prepared",
    "Sources",
    "TrainedRun",
    "baseline_scorers",
    "evaluate_run",
    "evaluate_scorers",
    "load_sources",
    "model_fingerprint",
    "prepare",
    "prepare_data",
    "resume_config",
    "train_model",
    "train_run",
]
