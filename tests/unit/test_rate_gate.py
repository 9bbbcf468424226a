"""The worker's rate gate on a fake bucket store (no sockets): one call per batch and only when a
claim is limited, http claims by their target host, and per-process counting when Redis fails."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
import redis.exceptions

from schedulerd.core.rate import Bucket, limits_from
from schedulerd.models import Claim
from schedulerd.tasks import http  # noqa: F401  registers the http task (its target host)
from schedulerd.worker.rate_gate import RateGate

AT = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def _claim(task: str, params: dict[str, Any] | None = None) -> Claim:
    return Claim(uuid.uuid4(), uuid.uuid4(), "t", AT, 0.0, 1, 1, 0.0, task, params or {}, 5.0, 3, 1.0, 2.0, 60.0,
                 "allow", None)  # fmt: skip


class FakeBuckets:
    def __init__(self, fail: BaseException | None = None) -> None:
        self.calls: list[list[list[str]]] = []
        self.fail = fail

    async def take(self, requests: list[list[Bucket]]) -> tuple[int, list[tuple[bool, int]]]:
        self.calls.append([[b.key for b in r] for r in requests])
        if self.fail is not None:
            raise self.fail
        return 1000, [(i == 0, 1000 if i == 0 else 1000 + 100 * i) for i in range(len(requests))]


async def test_no_limited_claim_no_call() -> None:
    buckets = FakeBuckets()
    gate = RateGate(buckets, limits_from({"send_email": "10/1s"}, {}))  # type: ignore[arg-type]
    claims = [_claim("noop"), _claim("http", {"url": "https://api.vendor.com/x"})]
    assert await gate.sort(claims) == (claims, [])
    assert buckets.calls == []


async def test_one_call_per_batch_with_each_claims_buckets() -> None:
    buckets = FakeBuckets()
    gate = RateGate(buckets, limits_from({"http": "50/1s"}, {"api.vendor.com": "10/1s"}))  # type: ignore[arg-type]
    first, second, free = (_claim("http", {"url": "https://API.vendor.com:8443/a"}), _claim("http", {"url": "https://other.example/b"}),
                           _claim("noop"))  # fmt: skip
    run, parked = await gate.sort([first, free, second])
    assert buckets.calls == [[["task:http", "host:api.vendor.com"], ["task:http"]]]
    assert run == [first, free] and parked == [(second, pytest.approx(0.105))]  # until its instant, plus 5 ms


@pytest.mark.parametrize("redis_up", [True, False])
async def test_without_redis_each_process_counts_alone(redis_up: bool) -> None:
    buckets = FakeBuckets(fail=redis.exceptions.ConnectionError("Connection refused"))
    gate = RateGate(buckets, limits_from({"send_email": "2/1s"}, {}))  # type: ignore[arg-type]
    claims = [_claim("send_email") for _ in range(3)]
    run, parked = await gate.sort(claims, redis_up=redis_up)
    assert run == claims[:2] and [c for c, _ in parked] == claims[2:]  # never dropped, never held
    assert 0.4 < parked[0][1] < 0.6  # the local bucket's next token, in ~500 ms
    assert len(buckets.calls) == (1 if redis_up else 0)  # in the Postgres fallback Redis is not even asked
