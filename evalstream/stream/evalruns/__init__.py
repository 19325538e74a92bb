"""Dataset and matrix runs: the runner (asyncio, timeouts, retries, progress, Ctrl-C)."""

from evalstream.stream.evalruns.matrix import MatrixRunner, run_matrix
from evalstream.stream.evalruns.runner import DatasetRunner, RunSettings, run_dataset

__all__ = ["DatasetRunner", "MatrixRunner", "RunSettings", "run_dataset", "run_matrix"]
