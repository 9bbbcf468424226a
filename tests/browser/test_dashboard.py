"""The dashboard in headless Chromium (Debian's, driven by Playwright) against a real daemon:
log in with a token from `schedulerd tenant create`, create jobs, watch one run, open its
execution and attempts. SCHEDULERD_UPDATE_SCREENSHOT=1 also writes docs/dashboard.png."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import async_playwright, expect

from tests.browser.conftest import CHROMIUM_ARGS
from tests.conftest import REPO_ROOT

@pytest.mark.timeout(120)
async def test_log_in_create_a_job_see_it_run_and_open_its_execution(
    chromium: str, serve_dashboard: Callable[..., Any], store: Any, tmp_path: Path
) -> None:
    served = await serve_dashboard("browser-replica", "web")
    token = served.token
    url = served.url + "/"
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        page = await browser.new_page(viewport={"width": 1280, "height": 720}, timezone_id="Europe/Berlin")
        await page.goto(url)
        await expect(page.locator("#login")).to_be_visible()
        await expect(page.locator("#login-error")).to_have_text("")  # nothing typed yet: no error
        await page.fill("#token", "sdk_wrong")
        await page.click("#login-button")
        await expect(page.locator("#login-error")).to_contain_text("valid bearer token")
        await page.fill("#token", token)
        await page.click("#login-button")
        await expect(page.locator("#tenant")).to_have_text(f"tenant {served.tenant}")

        # A recurring job: its next runs show in its zone and in UTC.
        await page.click("#new-job-details summary")
        await expect(page.locator("#job-task")).to_have_value("log")  # a harmless default, never `fail`
        await page.fill("#job-name", "nightly-report")
        await page.select_option("#job-task", "noop")
        await page.check('input[name="when"][value="cron"]')
        await page.fill("#job-cron", "30 2 * * *")
        await page.fill("#job-zone", "America/New_York")
        await page.click("#job-submit")
        await expect(page.locator("#job-result")).to_contain_text("Created")
        nightly = page.locator("tr.job", has_text="nightly-report")
        await expect(nightly).to_contain_text("America/New_York")
        await expect(nightly.locator(".local").first).to_contain_text(re.compile(r"02:30:00 (EST|EDT)"))
        await expect(nightly.locator(".utc").first).to_contain_text(re.compile(r"(06|07):30:00 UTC"))

        # A bad definition is refused with the field named, and nothing is created.
        await page.fill("#job-zone", "Mars/Olympus")
        await page.click("#job-submit")
        await expect(page.locator("#job-result")).to_contain_text("timezone: unknown time zone 'Mars/Olympus'")

        # A job that runs now: it shows up, runs, and its execution opens with its attempt. Once
        # run it is done, which the list shows when its state filter asks for every state.
        await page.goto(url + "#/jobs?state=all")
        await page.fill("#job-name", "hello-now")
        await page.check('input[name="when"][value="now"]')
        await page.select_option("#job-task", "log")
        await page.fill("#job-params", '{"hello": "browser"}')
        await page.click("#job-submit")
        await expect(page.locator("#job-result")).to_contain_text("Created")
        row = page.locator("tr.job", has_text="hello-now")
        await expect(row.locator(".status")).to_have_text("succeeded", timeout=20_000)  # auto-refresh picks it up
        await page.click("#new-job-details summary")  # fold the form away for the picture
        await page.screenshot(path=str(tmp_path / "dashboard.png"), full_page=True)
        await row.click()
        await expect(page.locator("#job-title")).to_have_text("hello-now")
        execution = page.locator("#executions tr.execution").first
        await expect(execution).to_have_attribute("data-status", "succeeded")
        await execution.click()
        await expect(page.locator("#execution-status")).to_contain_text("succeeded")
        await expect(page.locator(".job-name")).to_have_text("hello-now")  # the job by name, not only its id
        attempt = page.locator("#attempts tr.attempt")
        await expect(attempt).to_have_count(1)
        await expect(attempt).to_contain_text("browser-replica")
        await expect(attempt).to_contain_text("succeeded")

        await page.click('nav a[href="#/overview"]')
        await expect(page.locator("#overview")).to_contain_text("queue depth")
        await expect(page.locator("#runs-by-status")).to_contain_text("succeeded")
        await expect(page.locator("#forecast")).to_contain_text("within 60m")
        await expect(page.locator("#late-runs")).to_contain_text("Late reason")
        await browser.close()
    if os.environ.get("SCHEDULERD_UPDATE_SCREENSHOT"):
        (REPO_ROOT / "docs").mkdir(exist_ok=True)
        shutil.copy(tmp_path / "dashboard.png", REPO_ROOT / "docs" / "dashboard.png")
