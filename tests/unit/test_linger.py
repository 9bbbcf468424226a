from hypothesis import given
from hypothesis import strategies as st

from schedulerd.core.linger import BUSY_FRACTION, linger_s

QUIET, BUSY = 0.02, 0.05


def test_a_quiet_worker_keeps_the_short_pause() -> None:
    assert linger_s(0, 256, QUIET, BUSY) == QUIET
    assert linger_s(31, 256, QUIET, BUSY) == QUIET


def test_a_well_filled_pop_takes_the_longer_pause() -> None:
    assert linger_s(32, 256, QUIET, BUSY) == BUSY
    assert linger_s(256, 256, QUIET, BUSY) == BUSY


def test_the_busy_pause_is_never_shorter_than_the_quiet_one() -> None:
    assert linger_s(200, 256, 0.05, 0.01) == 0.05


def test_small_batches_judge_by_their_own_size() -> None:
    assert linger_s(1, 4, QUIET, BUSY) == BUSY
    assert linger_s(0, 4, QUIET, BUSY) == QUIET


@given(st.integers(0, 10_000), st.integers(1, 10_000))
def test_busy_exactly_from_an_eighth_of_a_batch(started: int, batch_size: int) -> None:
    started = min(started, batch_size)
    expected = BUSY if started * BUSY_FRACTION >= batch_size else QUIET
    assert linger_s(started, batch_size, QUIET, BUSY) == expected
