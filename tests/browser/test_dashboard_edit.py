"""The edit form on a job's page, in headless Chromium against a real daemon: plan an edit across
the March change (the removed run labelled dst_shifted, nothing written), save it, see the
version rise in the job and in its runs, and a refusal name the field."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import UUID

import httpx
import pytest
from playwright.async_api import async_playwright, expect

from tests.browser.conftest import CHROMIUM_ARGS


@pytest.mark.timeout(120)
async def test_plan_and_save_an_edit_from_the_jobs_page(chromium: str, serve_dashboard: Callable[..., Any], store: Any) -> None:
    served = await serve_dashboard("browser-edit", "edit")
    async with httpx.AsyncClient(base_url=served.url, headers={"Authorization": f"Bearer {served.token}"}) as http:
        created = await http.post("/v1/jobs", json={"task": "noop", "name": "london", "cron": "30 1 25-31 3 *",
                                                    "timezone": "Europe/London", "params": {"v": 1}})  # fmt: skip
        assert created.status_code == 201, created.text
        job_id = created.json()["job"]["id"]
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        page = await browser.new_page(viewport={"width": 1280, "height": 900}, timezone_id="UTC")
        await page.goto(served.url + "/")
        await page.fill("#token", served.token)
        await page.click("#login-button")
        await page.goto(f"{served.url}/#/jobs/{job_id}")
        await expect(page.locator("#job-version")).to_have_text("1")
        await page.click("#job-edit summary")
        await page.fill("#edit-cron", "30 2 25-31 3 *")
        await page.click("#edit-plan")
        await expect(page.locator("#edit-verdict")).to_contain_text("Plan: would become version 2; nothing written.")
        await expect(page.locator(".diff-removed .dst").first).to_have_text("dst_shifted")
        await expect(page.locator(".diff-added")).to_contain_text("2027-03-28")
        async with httpx.AsyncClient(base_url=served.url, headers={"Authorization": f"Bearer {served.token}"}) as http:
            assert (await http.get(f"/v1/jobs/{job_id}")).json()["version"] == 1  # the plan wrote nothing

        await page.fill("#edit-params", '{"v": 2')
        await page.click("#edit-save")
        await expect(page.locator("#edit-error")).to_contain_text("params")
        await page.fill("#edit-params", '{"v": 2}')
        await page.fill("#edit-zone", "Mars/Olympus")
        await page.click("#edit-save")
        await expect(page.locator("#edit-error")).to_contain_text("timezone: ")
        await page.fill("#edit-zone", "Europe/London")
        await page.click("#edit-save")
        await expect(page.locator("#edit-verdict")).to_contain_text("Saved: version 2.")
        await page.click("#job-edit summary")  # closed: the page refreshes again
        await expect(page.locator("#job-version")).to_have_text("2", timeout=10000)
        await expect(page.locator("dd code", has_text='"v":2')).to_be_visible()
        await expect(page.locator("#job-priority")).to_have_text("5")
        await page.click("#job-edit summary")
        await page.fill("#edit-priority", "9")
        await page.click("#edit-save")
        await expect(page.locator("#edit-verdict")).to_contain_text("Saved: version 3.")
        await page.click("#job-edit summary")
        await expect(page.locator("#job-priority")).to_have_text("9", timeout=10000)

        # Limits: set a concurrency key and a rate limit, then a half-given one is refused naming
        # the field, then an emptied key removes the concurrency limit.
        await page.click("#job-edit summary")
        await page.fill("#edit-concurrency-key", "customer:42")
        await page.fill("#edit-concurrency-limit", "2")
        await page.fill("#edit-rate-key", "vendor")
        await page.fill("#edit-rate-limit", "10")
        await page.fill("#edit-rate-window", "60")
        await page.click("#edit-save")
        await expect(page.locator("#edit-verdict")).to_contain_text("Saved: version 4.")
        await page.click("#job-edit summary")
        await expect(page.locator("#job-concurrency")).to_have_text("customer:42: 2 at once", timeout=10000)
        await expect(page.locator("#job-rate-limit")).to_have_text("vendor: 10 per 60 s")
        await page.click("#job-edit summary")
        await page.fill("#edit-concurrency-limit", "")
        await page.click("#edit-save")
        await expect(page.locator("#edit-error")).to_contain_text("concurrency.limit")
        await page.fill("#edit-concurrency-key", "")
        await page.click("#edit-save")
        await expect(page.locator("#edit-verdict")).to_contain_text("Saved: version 5.")
        await page.click("#job-edit summary")
        await expect(page.locator("#job-concurrency")).to_have_count(0, timeout=10000)
        await expect(page.locator("#job-rate-limit")).to_have_text("vendor: 10 per 60 s")
        row = await store.db.fetchrow("SELECT concurrency_key, concurrency_limit, rate_key, rate_limit, rate_window_s FROM jobs "
                                      "WHERE id = $1", UUID(job_id))  # fmt: skip
        assert tuple(row) == (None, None, "vendor", 10, 60.0)
        await browser.close()
