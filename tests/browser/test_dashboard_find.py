"""The jobs list in headless Chromium against a real daemon: the filter box (name prefix, label
selector, state) and the "older →" pager find a job among more than a page of them, and a
finished one-off shows `done` (hidden until the state filter asks for it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest
from playwright.async_api import async_playwright, expect

from tests.browser.conftest import CHROMIUM_ARGS
from tests.conftest import wait_for


@pytest.mark.timeout(120)
async def test_filter_box_and_pager_find_a_job(chromium: str, serve_dashboard: Callable[..., Any]) -> None:
    served = await serve_dashboard("browser-find", "find")
    http = httpx.AsyncClient(base_url=served.url, headers={"Authorization": f"Bearer {served.token}"}, timeout=10)
    hello = (await http.post("/v1/jobs", json={"task": "noop", "name": "hello", "cron": "@hourly",
                                               "labels": {"team": "billing"}, "max_runs": 50})).json()["job"]  # fmt: skip
    finished = (await http.post("/v1/jobs", json={"task": "noop", "name": "finished-once"})).json()["job"]
    items = [{"task": "noop", "name": f"bulk-{i:03}", "run_at": "2030-01-01T00:00:00Z"} for i in range(105)]
    assert (await http.post("/v1/jobs/batch", json={"items": items})).json()["created"] == 105

    async def done() -> bool:
        return (await http.get(f"/v1/jobs/{finished['id']}")).json()["state"] == "done"

    await wait_for(done, timeout_s=30, interval_s=0.2)
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        page = await browser.new_page(viewport={"width": 1280, "height": 720})
        await page.goto(served.url + "/")
        await page.fill("#token", served.token)
        await page.click("#login-button")
        await expect(page.locator("#tenant")).to_contain_text(served.tenant)

        rows = page.locator("#jobs tr.job")
        await expect(rows).to_have_count(100)
        await expect(page.locator(f'#jobs tr.job[data-id="{hello["id"]}"]')).to_have_count(0)
        await page.click("#jobs-older")
        await expect(rows).to_have_count(6)  # the 5 oldest bulk jobs and hello; the finished one-off is hidden
        await expect(page.locator(f'#jobs tr.job[data-id="{hello["id"]}"]')).to_contain_text("team=billing")
        await expect(page.locator("#jobs-newest")).to_be_visible()

        await page.goto(served.url + "/#/jobs")
        await expect(page.locator("#jobs-newest")).to_have_count(0)  # the first page drawn: the box is the new one
        await page.fill('#job-filter input[name="name"]', "hel")
        await page.click("#job-filter button")
        await expect(rows).to_have_count(1)
        await expect(rows.first).to_contain_text("hello")
        await expect(page.locator("#jobs-older")).to_have_count(0)

        await page.fill('#job-filter input[name="name"]', "")
        await page.fill('#job-filter input[name="label"]', "team=billing")
        await page.click("#job-filter button")
        await expect(rows).to_have_count(1)

        await page.goto(served.url + "/#/jobs?state=done")
        await expect(page.locator(f'#jobs tr.job[data-id="{finished["id"]}"]')).to_contain_text("done")
        await page.goto(served.url + f"/#/jobs/{finished['id']}")
        await expect(page.locator("#job-state")).to_have_text("done")
        await page.goto(served.url + f"/#/jobs/{hello['id']}")
        await expect(page.locator("#job-labels")).to_have_text("team=billing")
        await expect(page.locator("#job-bounds")).to_contain_text("at most 50 runs")
        await browser.close()
    await http.aclose()
