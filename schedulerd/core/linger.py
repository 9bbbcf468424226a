"""How long a worker lingers between partial pops and between outcome writes. Pure: no I/O.

Every claim and finish statement has a fixed cost (a round trip, a commit, ~250 µs of backend
CPU) besides its cost per row. Lingering gathers executions falling due one by one into one
statement: longer lingers mean fewer statements per execution and more start lag. A quiet
worker keeps the short pause (start lag matters, statements are few); a busy one, whose pops
come back well filled, takes the longer one, where the saving is paid for many times a second.
"""

from __future__ import annotations

BUSY_FRACTION = 8  # a pop that took at least 1/8 of a batch marks a busy worker


def linger_s(last_started: int, batch_size: int, quiet_s: float, busy_s: float) -> float:
    """The pause after a pop that started `last_started` of at most `batch_size` executions."""
    if last_started * BUSY_FRACTION >= batch_size:
        return max(quiet_s, busy_s)
    return quiet_s
