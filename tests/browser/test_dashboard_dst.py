"""The dashboard's job page in headless Chromium: the DST policy in force, the tz database, and
next runs labelled with what DST did to them."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from playwright.async_api import async_playwright, expect

from tests.browser.conftest import CHROMIUM_ARGS


@pytest.mark.timeout(120)
async def test_job_page_labels_next_runs_dst_touched(
    chromium: str, serve_dashboard: Callable[..., Any], store: Any
) -> None:
    served = await serve_dashboard("browser-dst", "dst")
    token = served.token
    url = served.url
    # Sundays in March at 02:30 New York time: the second Sunday's 02:30 does not exist, and any
    # five consecutive runs include exactly one second Sunday.
    created = httpx.post(f"{url}/v1/jobs", headers={"Authorization": f"Bearer {token}"},
                         json={"task": "noop", "name": "march", "cron": "30 2 * 3 SUN", "timezone": "America/New_York"})  # fmt: skip
    assert created.status_code == 201, created.text
    job_id = created.json()["job"]["id"]
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        page = await browser.new_page(viewport={"width": 1280, "height": 720})
        await page.goto(url + "/")
        await page.fill("#token", token)
        await page.click("#login-button")
        await page.goto(f"{url}/#/jobs/{job_id}")
        runs = page.locator("#next-runs .run")
        await expect(runs).to_have_count(5)
        label = page.locator("#next-runs .dst")
        await expect(label).to_have_count(1)
        await expect(label).to_have_text("dst_shifted")
        title = re.compile(r"^\d{4}-03-(0[89]|1[0-4]) 02:30 did not exist \(clocks sprang forward\): runs at the first instant")
        await expect(label).to_have_attribute("title", title)
        await expect(page.locator("dl")).to_contain_text("repeated time: first, missing time: shift")
        await browser.close()
