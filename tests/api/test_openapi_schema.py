"""The server's responses match its own /openapi.json: schemathesis generates valid and invalid
requests for every operation against the live server (a bounded number each) and checks status
codes, content types and bodies against the document, and that no input causes a 500."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import negative_data_rejection, positive_data_acceptance, use_after_free

from schedulerd.config import Config
from tests.api.conftest import ApiServer

EXAMPLES_PER_OPERATION = 25


@pytest.fixture(scope="module")
def live_api(database_url: str, redis_url: str) -> Iterator[tuple[ApiServer, str]]:
    """One server for the module, with a tenant and token of its own and no rate limit in reach."""
    from dataclasses import replace
    from uuid import uuid4

    from schedulerd.tasks import loader
    from schedulerd.config import ApiConfig, RedisConfig
    from schedulerd.store import Store
    from schedulerd.tenants import Tenants

    loader.load_modules([])
    config = Config(redis=RedisConfig(prefix=f"schedulerd-test-{uuid4().hex[:12]}"), api=ApiConfig(rate_limit=1_000_000))
    server = ApiServer(replace(config), database_url, redis_url).start()

    async def issue() -> str:
        store = await Store.connect(database_url, min_size=1, max_size=1)
        try:
            return (await Tenants(store).create(f"schema-{uuid4().hex[:10]}")).token
        finally:
            await store.close()

    token = asyncio.run(issue())
    yield server, token
    server.stop()


@pytest.mark.timeout(240)
@pytest.mark.parametrize("mode", [schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE])
def test_responses_match_the_openapi_document(live_api: tuple[ApiServer, str], mode: Any) -> None:
    # schemathesis's pytest plugin (from_fixture/parametrize) does not run under this pytest, so
    # drive its per-operation Hypothesis strategies directly.
    server, token = live_api
    document = schemathesis.openapi.from_url(f"{server.url}/openapi.json")
    operations = [result.ok() for result in document.get_all_operations()]
    assert len(operations) >= 12
    assert any(o.path == "/v1/jobs/batch" for o in operations)
    for operation in operations:
        if operation.path == "/v1/jobs/batch":
            check_batch(operation, mode, server, token)
            continue

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, suppress_health_check=list(HealthCheck),
                  derandomize=True, database=None)  # fmt: skip
        def check(case: Any) -> None:
            case.call_and_validate(
                base_url=server.url,
                headers={"Authorization": f"Bearer {token}"},
                # Schema-valid input can still be refused on meaning (an unknown task, a cron
                # expression that never fires): a 422 by design. Deleted jobs stay readable.
                excluded_checks=[positive_data_acceptance, use_after_free],
            )

        check()


def check_batch(operation: Any, mode: Any, server: ApiServer, token: str) -> None:
    """POST /v1/jobs/batch answers items one by one: a batch with a schema-invalid item is a 200
    that refuses that item (tests/api/test_batch_api.py), not a 4xx for the whole request."""

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, suppress_health_check=list(HealthCheck),
              derandomize=True, database=None)  # fmt: skip
    def check(case: Any) -> None:
        case.call_and_validate(
            base_url=server.url, headers={"Authorization": f"Bearer {token}"},
            excluded_checks=[positive_data_acceptance, use_after_free, negative_data_rejection],
        )

    check()
