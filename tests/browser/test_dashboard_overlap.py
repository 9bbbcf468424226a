"""The dashboard's overlap policy and overrun warning in headless Chromium against a real daemon:
create a job with an overlap policy from the form, then see both on the job's page."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from playwright.async_api import async_playwright, expect

from tests.browser.conftest import CHROMIUM_ARGS
from tests.integration.test_overrun import add_history


@pytest.mark.timeout(120)
async def test_job_page_shows_overlap_and_overrun_warning(
    chromium: str, serve_dashboard: Callable[..., Any], store: Any, tmp_path: Path
) -> None:
    served = await serve_dashboard("browser-overlap", "overlap")
    token = served.token
    url = served.url + "/"
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        page = await browser.new_page(viewport={"width": 1280, "height": 720})
        await page.goto(url)
        await page.fill("#token", token)
        await page.click("#login-button")
        await page.click("#new-job-details summary")
        await page.fill("#job-name", "five-minutely")
        await page.select_option("#job-task", "sleep")
        await page.check('input[name="when"][value="cron"]')
        await page.fill("#job-cron", "*/5 * * * *")
        await page.fill("#job-zone", "UTC")
        await page.select_option("#job-overlap", "buffer_one")
        await page.click("#job-submit")
        await expect(page.locator("#job-result")).to_contain_text("Created")
        job_id = await page.locator("#created-job").text_content()
        assert job_id is not None
        await add_history(store, UUID(job_id), served.tenant, [280.0] * 5)

        await page.goto(f"{url}#/jobs/{job_id}")
        await expect(page.locator("#job-overlap-policy")).to_have_text("buffer_one")
        await expect(page.locator("#job-overrun")).to_contain_text("will soon overlap")
        await expect(page.locator("#job-overrun")).to_contain_text("(93%, warn at 80%")
        await page.goto(f"{url}#/jobs")
        await expect(page.locator("tr.job", has_text="five-minutely")).to_contain_text("overrun")
        await browser.close()
