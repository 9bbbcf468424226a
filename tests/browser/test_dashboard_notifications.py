"""The dashboard's Notifications page in headless Chromium against a real daemon: a refused URL
is named, the tenant's setting saved and shown again, a test notice delivered to a receiver on
loopback (listed in [http].allow_hosts for the test), a failing job's notice listed as sent; and
a job's own setting and pause_after_failures edited from its page."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from playwright.async_api import async_playwright, expect

from tests.browser.conftest import CHROMIUM_ARGS
from tests.http_target import serve


@pytest.mark.timeout(120)
async def test_edit_the_tenants_setting_send_a_test_and_see_a_failure_notice(
    chromium: str, serve_dashboard: Callable[..., Any]
) -> None:  # fmt: skip
    receiver = next(serve_receiver := serve())
    served = await serve_dashboard("browser-notify", "notify", SCHEDULERD_HTTP_ALLOW_HOSTS="127.0.0.1:*",
                                   SCHEDULERD_NOTIFY_INTERVAL_S="0.2")  # fmt: skip
    http = httpx.AsyncClient(base_url=served.url, headers={"Authorization": f"Bearer {served.token}"}, timeout=10)
    try:
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
            page = await browser.new_page(viewport={"width": 1280, "height": 720})
            await page.goto(served.url + "/")
            await page.fill("#token", served.token)
            await page.click("#login-button")
            await expect(page.locator("#tenant")).to_contain_text(served.tenant)

            await page.click('nav a[href="#/notifications"]')
            await page.fill("#notify-url", "http://10.0.0.7/hook")
            await page.click("#notify-save")
            await expect(page.locator("#notify-test-result")).to_contain_text("url: refused")
            assert (await http.get("/v1/notifications")).json()["url"] is None

            await page.fill("#notify-url", receiver.url + "/hook")
            await page.check('#notify-form input[value="late"]')
            await page.click("#notify-save")
            await expect(page.locator("#notify-saved")).to_have_text("Saved.")
            setting = (await http.get("/v1/notifications")).json()
            assert setting["url"] == receiver.url + "/hook" and setting["on"] == ["failure", "recovery", "late"]

            await page.click("#notify-test")
            await expect(page.locator("#notify-test-result")).to_have_text("Delivered: the receiver answered 200.")
            assert [json.loads(r.body)["event"] for r in receiver.requests] == ["test"]

            failing = await http.post("/v1/jobs", json={"task": "fail", "name": "ledger", "retry": {"max_attempts": 1}})
            job_id = failing.json()["job"]["id"]
            await page.goto(served.url + f"/#/jobs/{job_id}")
            await expect(page.locator("#job-notify")).to_contain_text("the tenant's setting")
            await page.goto(served.url + "/#/notifications")
            notice = page.locator("#notices tr.notice")
            for _ in range(50):  # the page refreshes when opened: open it until the daemon has sent the notice
                if await notice.count() and "sent" in await notice.first.inner_text():
                    break
                await page.goto(served.url + "/#/jobs")
                await page.goto(served.url + "/#/notifications")
                await page.wait_for_timeout(200)
            await expect(notice.first).to_contain_text("failure")
            await expect(notice.first).to_contain_text("sent")
            await expect(notice.first).to_contain_text("ledger")
            await expect(page.locator("#notify-url")).to_have_value(receiver.url + "/hook")

            # A job's own setting and pause after failures, edited from its page.
            nightly = (await http.post("/v1/jobs", json={"task": "noop", "name": "nightly", "cron": "0 3 * * *"})).json()["job"]["id"]
            await page.goto(served.url + f"/#/jobs/{nightly}")
            await page.click("#job-edit summary")
            await page.fill("#edit-notify-url", receiver.url + "/nightly")
            await page.fill("#edit-notify-on", "failure,late")
            await page.fill("#edit-pause-after", "3")
            await page.click("#edit-save")
            await expect(page.locator("#edit-verdict")).to_contain_text("Saved")
            job = (await http.get(f"/v1/jobs/{nightly}")).json()
            assert job["notify"] == {"url": receiver.url + "/nightly", "on": ["failure", "late"]} and job["pause_after_failures"] == 3
            await page.fill("#edit-notify-on", "failures")
            await page.click("#edit-save")
            await expect(page.locator("#edit-error")).to_contain_text("notify.on")
            await browser.close()
    finally:
        await http.aclose()
        serve_receiver.close()
