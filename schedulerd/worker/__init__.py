"""The worker: its loop (loop.py: pop, claim, admit, run, record), one attempt run to its outcome
(attempt.py), who starts now (admission.py), the breakers' gate (breaker_gate.py) and the claims
handed back unrun (parking.py)."""

from schedulerd.worker.attempt import Result, Stop, describe_detail, describe_error
from schedulerd.worker.loop import Worker, WorkerStats

__all__ = ["Result", "Stop", "Worker", "WorkerStats", "describe_detail", "describe_error"]
