"""The dashboard's Cancel button in headless Chromium against a real daemon: a running execution is
cancelled from its page (the handler stops at its next heartbeat, recorded cancelled, no retry),
and the Operator page lists the bulk actions taken, with who did them."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from playwright.async_api import async_playwright, expect

from tests.browser.conftest import CHROMIUM_ARGS
from tests.conftest import wait_for


@pytest.mark.timeout(120)
async def test_cancel_a_running_execution_and_see_the_bulk_actions(
    chromium: str, serve_dashboard: Callable[..., Any], store: Any
) -> None:
    served = await serve_dashboard("browser-replica", "cancel")
    url = served.url
    http = httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {served.token}"}, timeout=10)
    job = (await http.post("/v1/jobs", json={"task": "sleep", "params": {"seconds": 60}, "retry": {"max_attempts": 3}})).json()["job"]
    labelled = (await http.post("/v1/jobs", json={"task": "noop", "cron": "@hourly"})).json()["job"]
    await store.db.execute("UPDATE jobs SET labels = $2 WHERE id = $1", uuid.UUID(labelled["id"]), {"team": "billing"})
    paused = await http.post("/v1/jobs/actions/pause", json={"selector": "team=billing", "dry_run": False})
    assert paused.status_code == 200 and paused.json()["jobs"] == 1

    async def running() -> Any:
        items = (await http.get("/v1/executions", params={"job": job["id"]})).json()["items"]
        return items[0] if items and items[0]["status"] == "running" else None

    execution = await wait_for(running, timeout_s=30, interval_s=0.2)
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        page = await browser.new_page(viewport={"width": 1280, "height": 720})
        await page.goto(url + "/")
        await page.fill("#token", served.token)
        await page.click("#login-button")
        await expect(page.locator("#tenant")).to_contain_text(served.tenant)

        page.on("dialog", lambda dialog: dialog.accept())
        await page.goto(url + f"/#/executions/{execution['id']}")
        await expect(page.locator("#execution-status")).to_contain_text("running")
        await page.click('#execution-actions button[data-action="cancel"]')
        await expect(page.locator("#execution-status")).to_contain_text("cancelled", timeout=15_000)
        await expect(page.locator("#attempts tr.attempt")).to_have_count(1, timeout=10_000)
        await expect(page.locator("#attempts")).to_contain_text("cancelled")
        await expect(page.locator('#execution-actions button[data-action="cancel"]')).to_have_count(0)

        await page.click('nav a[href="#/overview"]')
        row = page.locator("#bulk-actions tr.bulk-action")
        await expect(row).to_have_count(1, timeout=10_000)
        await expect(row).to_contain_text("team=billing")
        await expect(row).to_contain_text(f"api:{served.tenant}")
        await browser.close()
    final = (await http.get(f"/v1/executions/{execution['id']}")).json()
    assert (final["status"], final["reason"], final["attempt"]) == ("cancelled", "cancelled", 1)
    await http.aclose()
