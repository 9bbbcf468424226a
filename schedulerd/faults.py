"""Fault points for the fault suite: SIGKILL this process at a named point with a probability.

SCHEDULERD_FAULTS="after_pop:0.02,after_claim:0.05" makes `hit("after_pop")` kill the process
2% of the times it is reached. Unset (production), `hit` is one dict lookup that finds nothing.
"""

from __future__ import annotations

import os
import random
import signal

ENV = "SCHEDULERD_FAULTS"


def _parse(text: str) -> dict[str, float]:
    points: dict[str, float] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, probability = item.partition(":")
        points[name.strip()] = float(probability or 1.0)
    return points


_POINTS = _parse(os.environ.get(ENV, ""))


def hit(point: str) -> None:
    """Die here (SIGKILL: no cleanup, no finally blocks) with the configured probability."""
    probability = _POINTS.get(point)
    if probability and random.random() < probability:
        os.kill(os.getpid(), signal.SIGKILL)
