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


async def test_the_fleet_page_shows_what_status_shows_and_counts_what_is_parked(api, store, queue, config, make_job) -> None:  # type: ignore[no-untyped-def]
    """/fleet is `schedulerd status --json`'s report plus the tenant quotas; parked executions are
    counted by reason; a future occurrence a pause cancelled is not late yet, in either."""
    from schedulerd import overview
    from schedulerd.jobs import Jobs

    _, parked = await make_job("noop", tenant="fleet-a")
    _, waiting = await make_job("noop", tenant="fleet-a")
    claims = await store.execution_claim_many([parked.id], 15.0, "fleet-test")
    await store.execution_park_many([(c.id, c.fence) for c in claims], [600.0], "rate_limited", late_grace_s=60.0)
    await store.db.execute("UPDATE executions SET status = 'pending', reason = 'concurrency_limit', "
                           "due_at = '9999-12-31 00:00:00+00' WHERE id = $1", waiting.id)  # as execution_wait_slot leaves it
    cron, _ = await make_job("noop", tenant="fleet-a", cron="*/5 * * * *")
    await Jobs(store, queue, config).pause(cron.id, note="maintenance")  # its future occurrences: late reason paused
    await store.tenant_quota_set("fleet-a", 7)
    try:
        async with httpx.AsyncClient(base_url=api.ops_url) as ops:
            answer = await ops.get("/fleet")
        assert answer.status_code == 200
        fleet = answer.json()
        status = (await overview.fleet(store, queue, config)).report  # what `schedulerd status --json` prints
        for key in ("queue_depth", "oldest_queued_due_at", "oldest_pending_due_at", "last_hour_by_status",
                    "late_last_hour_by_reason", "parked_by_reason", "due_next"):  # fmt: skip
            assert fleet[key] == status[key], key
        assert fleet["parked_by_reason"] == {"task_limit": 0, "rate_limited": 1, "breaker_open": 0, "admit_error": 0,
                                             "concurrency_limit": 1}  # fmt: skip
        assert "paused" not in fleet["late_last_hour_by_reason"]  # not due yet: not late
        assert fleet["tenant_quotas"]["runtime"] == {"fleet-a": 7}
    finally:
        await store.tenant_quota_clear("fleet-a")


async def test_every_metric_the_grafana_dashboard_names_is_served(api) -> None:  # type: ignore[no-untyped-def]
    """docs/grafana-dashboard.json charts only what /metrics serves (a histogram's _bucket, _sum and
    _count, a counter's _total), and charts the figures docs/operations.md says to alert on."""
    import json
    import re
    from pathlib import Path

    dashboard = json.loads((Path(__file__).parents[2] / "docs" / "grafana-dashboard.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    named = {m for e in exprs for m in re.findall(r"\bschedulerd_[a-z_]+", e)}
    async with httpx.AsyncClient(base_url=api.ops_url) as ops:
        text = (await ops.get("/metrics")).text
    served: set[str] = set()
    for name, kind in re.findall(r"^# TYPE (\S+) (\S+)$", text, flags=re.M):
        served |= {name, f"{name}_bucket", f"{name}_sum", f"{name}_count"} if kind == "histogram" else {name, f"{name}_total"}
    assert named - served == set()
    for alerted in ("schedulerd_start_lag_seconds_bucket", "schedulerd_oldest_due_age_seconds", "schedulerd_materialiser_horizon_seconds",
                    "schedulerd_parked_by_reason", "schedulerd_breaker_open"):  # fmt: skip
        assert alerted in named
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])
