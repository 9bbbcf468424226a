"""The dashboard's dead letters and pause notes in headless Chromium against a real daemon: a
failed execution is listed under Failed, filtered, redriven (its history shows the redrive), and a
job paused with a note shows who and why."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from playwright.async_api import async_playwright, expect

from tests.browser.conftest import CHROMIUM_ARGS
from tests.conftest import wait_for


@pytest.mark.timeout(120)
async def test_redrive_a_failed_execution_and_pause_with_a_note(
    chromium: str, serve_dashboard: Callable[..., Any], store: Any
) -> None:
    served = await serve_dashboard("browser-replica", "dlq")
    token = served.token
    url = served.url
    http = httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=10)
    failing = await http.post("/v1/jobs", json={"task": "fail", "params": {"message": "ledger locked"}, "retry": {"max_attempts": 1}})
    failing_job = failing.json()["job"]["id"]
    cron_job = (await http.post("/v1/jobs", json={"task": "noop", "name": "hourly-sync", "cron": "@hourly"})).json()["job"]["id"]

    async def failed() -> list[dict[str, Any]]:
        return (await http.get("/v1/executions/failed", params={"job": failing_job})).json()["items"]

    (execution,) = await wait_for(failed, timeout_s=30, interval_s=0.2)
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        page = await browser.new_page(viewport={"width": 1280, "height": 720})
        await page.goto(url + "/")
        await page.fill("#token", token)
        await page.click("#login-button")
        await expect(page.locator("#tenant")).to_contain_text(served.tenant)

        await page.click('nav a[href="#/failed"]')
        row = page.locator(f'#failed tr.failed[data-id="{execution["id"]}"]')
        await expect(row).to_contain_text("ledger locked")
        await page.fill('#failed-filter input[name="error"]', "no such error")
        await page.click("#failed-filter button")
        await expect(page.locator("#failed tr.failed")).to_have_count(0)
        await page.goto(url + "/#/failed?error=LEDGER")
        await expect(row).to_be_visible()
        await row.locator('button[data-action="redrive"]').click()
        await page.goto(url + f"/#/executions/{execution['id']}")
        await expect(page.locator("#redrives tr.redrive")).to_have_count(1, timeout=10_000)
        await expect(page.locator("#redrives")).to_contain_text(f"api:{served.tenant}")

        page.on("dialog", lambda dialog: dialog.accept("vendor maintenance until 18:00"))
        await page.goto(url + f"/#/jobs/{cron_job}")
        await page.click('#job-actions button[data-action="pause"]')
        await expect(page.locator("#job-state")).to_contain_text("vendor maintenance until 18:00")
        await expect(page.locator("#job-state")).to_contain_text(re.compile(rf"api:{re.escape(served.tenant)}"))
        await browser.close()
    await http.aclose()
