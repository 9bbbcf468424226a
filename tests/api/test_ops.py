"""/metrics, /healthz, /readyz and /forecast over real HTTP, on the [ops] listener only."""

from __future__ import annotations

import httpx

from schedulerd import health


async def test_the_tenant_listener_serves_no_operator_endpoint(api, client) -> None:  # type: ignore[no-untyped-def]
    async with httpx.AsyncClient(base_url=api.url) as anonymous:
        for path in ("/metrics", "/forecast", "/readyz", "/healthz"):
            for http in (client, anonymous):  # with a tenant's token and without
                response = await http.get(path)
                assert response.status_code == 404, (path, response.text)
                assert "schedulerd_" not in response.text and client.tenant not in response.text
    async with httpx.AsyncClient(base_url=api.ops_url) as ops:  # and the operator listener has no tenant API
        assert (await ops.get("/v1/me")).status_code == 404
        page = await ops.get("/")  # the operator page: fleet charts, no tenant login
        assert page.status_code == 200 and "schedulerd operator" in page.text and "token" not in page.text
        assert (await ops.get("/forecast")).status_code == 200


async def test_metrics_health_and_readiness(api) -> None:  # type: ignore[no-untyped-def]
    async with httpx.AsyncClient(base_url=api.ops_url) as http:
        metrics = await http.get("/metrics")
        assert metrics.status_code == 200 and metrics.headers["content-type"].startswith("text/plain")
        assert "schedulerd_start_lag_seconds_bucket" in metrics.text or "schedulerd_start_lag_seconds" in metrics.text
        assert (await http.get("/healthz")).json() == {"status": "ok"}

        health.forget()
        health.expect({"worker": 10.0})
        not_ready = await http.get("/readyz")
        assert not_ready.status_code == 503
        checks = not_ready.json()["checks"]
        assert checks["postgres"] == checks["redis"] == checks["migrations"] == "ok"
        assert checks["loops"] == {"worker": "never ticked"}

        health.tick("worker")
        ready = await http.get("/readyz")
        assert ready.status_code == 200 and ready.json()["status"] == "ready"
        health.expect({})


async def test_readiness_is_false_while_only_a_standby_answers(api, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """After a failover a pooled connection may reach the demoted primary, now a standby: it
    answers reads, so only asking the server which it is tells that nothing can be written."""
    from schedulerd.store import Store

    async def standby(self: Store) -> bool:
        return False

    health.forget()
    health.expect({})
    monkeypatch.setattr(Store, "server_is_primary", standby)
    async with httpx.AsyncClient(base_url=api.ops_url) as http:
        answer = await http.get("/readyz")
    assert answer.status_code == 503 and answer.json()["checks"]["postgres"].startswith("a standby answers")
