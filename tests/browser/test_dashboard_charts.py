"""A job's page and the charts in headless Chromium against a real daemon: past runs apart from
upcoming ones, a status filter and pages by the API's cursor, the strip of recent runs, the
tenant's and the fleet's per-minute charts and the due-next bars holding the right numbers (read
from the SVG's data attributes, not pixels), and nothing wider than a 400 px screen.
SCHEDULERD_UPDATE_SCREENSHOT=1 also writes docs/dashboard-charts.png (a job's page and the charts)."""

from __future__ import annotations

import base64
import os
import shutil
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.async_api import Page, async_playwright, expect

from schedulerd.core.ids import execution_id
from tests.browser.conftest import CHROMIUM_ARGS
from tests.conftest import REPO_ROOT

RUNS = 30  # past runs of one job, all scheduled in one minute
FAILED_EVERY = 3  # every third of them failed


def percentile(values: list[float], p: float) -> float:
    """Postgres's percentile_cont: linear between the two nearest ranks."""
    ordered = sorted(values)
    position = p * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (position - low) * (ordered[high] - ordered[low])


async def insert_history(store: Any, tenant: str, job_id: str, minute: datetime) -> list[dict[str, Any]]:
    """RUNS finished runs of the job in one minute, written final in one statement (no worker sees them)."""
    runs = []
    for i in range(RUNS):
        scheduled = minute + timedelta(seconds=i)
        status = "failed" if i % FAILED_EVERY == 0 else "succeeded"
        runs.append({"id": execution_id(scheduled), "scheduled_for": scheduled, "status": status,
                     "lag_s": 0.05 + i * 0.01, "duration_s": 0.5 + i * 0.1})  # fmt: skip
    await store.db.executemany(
        "INSERT INTO executions (id, job_id, tenant, scheduled_for, due_at, status, attempt, fence, first_started_at,"
        " started_at, finished_at) VALUES ($1, $2, $3, $4::timestamptz, $4, $5, 1, 1, $4 + make_interval(secs => $6::float8),"
        " $4 + make_interval(secs => $6), $4 + make_interval(secs => $6 + $7::float8))",
        [(r["id"], uuid.UUID(job_id), tenant, r["scheduled_for"], r["status"], r["lag_s"], r["duration_s"]) for r in runs],
    )
    return runs


async def log_in(page: Page, url: str, token: str) -> None:
    await page.goto(url + "/")
    await page.fill("#token", token)
    await page.click("#login-button")
    await expect(page.locator("#tenant")).to_be_visible()


async def assert_fits(page: Page, width: int) -> None:
    """Nothing on the page is wider than the screen: tables scroll inside their own box."""
    overflow = await page.evaluate("""(width) => {
        const wide = [...document.querySelectorAll("body *")].filter((e) => !e.closest(".scroll"))
          .filter((e) => e.getBoundingClientRect().right > width + 1).map((e) => e.tagName + "#" + e.id);
        return {page: document.documentElement.scrollWidth, wide};
    }""", width)  # fmt: skip
    assert overflow["page"] <= width and overflow["wide"] == [], overflow


@pytest.mark.timeout(180)
async def test_a_jobs_runs_upcoming_filter_pages_and_charts(
    chromium: str, serve_dashboard: Callable[..., Any], store: Any, tmp_path: Path
) -> None:
    served = await serve_dashboard("chart-replica", "charts")
    http = httpx.AsyncClient(base_url=served.url, headers={"Authorization": f"Bearer {served.token}"}, timeout=10)
    every_minute = (await http.post("/v1/jobs", json={"task": "noop", "name": "every-minute", "cron": "* * * * *"})).json()["job"]
    history = (await http.post("/v1/jobs", json={"task": "noop", "name": "history", "run_at": "2031-01-01T00:00:00Z"})).json()["job"]
    minute = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=10)
    runs = await insert_history(store, served.tenant, history["id"], minute)
    label = minute.strftime("%H:%M")
    stamp = minute.strftime("%Y-%m-%dT%H:%M:00.000Z")  # as charts.js writes data-minute
    lags = [r["lag_s"] for r in runs]
    failed = sum(1 for r in runs if r["status"] == "failed")

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        page = await browser.new_page(viewport={"width": 1280, "height": 900})
        await log_in(page, served.url, served.token)

        # The history job: past runs newest first, 25 a page, then the 5 older; a filter by status.
        await page.goto(f"{served.url}/#/jobs/{history['id']}")
        await expect(page.locator("#job-title")).to_have_text("history")
        rows = page.locator("#executions tr.execution")
        await expect(rows).to_have_count(25)
        await expect(rows.first).to_have_attribute("data-id", str(runs[-1]["id"]))
        await page.click("#runs-older")
        await expect(rows).to_have_count(RUNS - 25)
        await expect(rows.last).to_have_attribute("data-id", str(runs[0]["id"]))
        await page.click("#runs-newest")
        await expect(rows).to_have_count(25)
        await page.select_option("#run-status", "failed")
        await expect(rows).to_have_count(failed)
        assert {await r.get_attribute("data-status") for r in await rows.all()} == {"failed"}
        assert "status=failed" in page.url
        # Its one upcoming run (2031) sits apart.
        upcoming = page.locator("#upcoming tr.execution")
        await expect(upcoming).to_have_count(1)
        await expect(upcoming).to_have_attribute("data-status", "pending")

        # The strip: one mark per run, coloured by outcome, with its duration.
        strip = page.locator("#run-strip rect.run")
        await expect(strip).to_have_count(RUNS)
        await expect(page.locator('#run-strip rect.run[data-status="failed"]')).to_have_count(failed)
        last = page.locator(f'#run-strip rect.run[data-id="{runs[-1]["id"]}"]')
        assert float(await last.get_attribute("data-duration") or "nan") == pytest.approx(runs[-1]["duration_s"])
        await expect(last.locator("title")).to_contain_text("succeeded in")

        # The every-minute job: nothing past yet to speak of, its next runs listed apart, paged.
        await page.goto(f"{served.url}/#/jobs/{every_minute['id']}")
        await expect(page.locator("#job-title")).to_have_text("every-minute")
        await expect(upcoming).to_have_count(10)
        first_upcoming = await upcoming.first.get_attribute("data-id")
        await page.click("#upcoming-later")
        await expect(upcoming.first).not_to_have_attribute("data-id", first_upcoming or "")
        await expect(upcoming).to_have_count(10)

        # The tenant's operator view: the minute's p50/p99 and counts, and the due-next bars.
        await page.click('nav a[href="#/overview"]')
        p50 = page.locator(f'#tenant-lag circle[data-series="p50"][data-minute="{stamp}"]')
        await expect(p50).to_have_count(1)
        assert float(await p50.get_attribute("data-value") or "nan") == pytest.approx(percentile(lags, 0.5))
        p99 = page.locator(f'#tenant-lag circle[data-series="p99"][data-minute="{stamp}"]')
        assert float(await p99.get_attribute("data-value") or "nan") == pytest.approx(percentile(lags, 0.99))
        bar = page.locator(f'#tenant-per-minute g.bar[data-label="{label}"]')
        await expect(bar).to_have_attribute("data-value", str(RUNS))
        await expect(bar.locator('rect[data-part="failed"]')).to_have_attribute("data-value", str(failed))
        await expect(bar.locator('rect[data-part="succeeded"]')).to_have_attribute("data-value", str(RUNS - failed))
        due = page.locator('#forecast-chart g.bar[data-label="60m"]')
        card = page.locator("#forecast .card", has_text="within 60m").locator("b")
        assert await due.get_attribute("data-value") == await card.text_content()
        assert int(await due.get_attribute("data-value") or "0") >= 59  # the every-minute job's next hour
        await page.screenshot(path=str(tmp_path / "overview.png"), full_page=True)
        await page.goto(f"{served.url}/#/jobs/{history['id']}")
        await expect(strip).to_have_count(RUNS)
        await page.screenshot(path=str(tmp_path / "job.png"), full_page=True)

        # At 400 px: every view fits, tables scroll in their own box.
        await page.set_viewport_size({"width": 400, "height": 800})
        for route, title in (("#/jobs", "Jobs"), (f"#/jobs/{history['id']}", "Job history"), ("#/overview", "Operator view"),
                             ("#/failed", "Failed executions")):  # fmt: skip
            await page.goto(f"{served.url}/{route}")
            await expect(page.locator("#view h1")).to_have_text(title)  # this route's view, rendered
            await assert_fits(page, 400)

        # The [ops] listener's page: the fleet's minute and the due-next bars by tenant.
        ops = await browser.new_page(viewport={"width": 1280, "height": 900})
        await ops.goto(served.ops_url + "/")
        fleet = ops.locator(f'#fleet-per-minute g.bar[data-label="{label}"]')
        await expect(fleet).to_have_attribute("data-value", str(RUNS))
        fleet_p50 = ops.locator(f'#fleet-lag circle[data-series="p50"][data-minute="{stamp}"]')
        assert float(await fleet_p50.get_attribute("data-value") or "nan") == pytest.approx(percentile(lags, 0.5))
        await expect(ops.locator(f'#fleet-forecast g.bar[data-label="60m"] rect[data-part="{served.tenant}"]')).to_have_count(1)
        await expect(ops.locator(f'#forecast-by-tenant tr.tenant[data-tenant="{served.tenant}"]')).to_be_visible()
        # The fleet as `schedulerd status` shows it (/fleet: the same report): the daemon's replica, the figures by reason.
        report = (await http.get(served.ops_url + "/fleet")).json()
        await expect(ops.locator("#replicas tr.replica")).to_have_count(len(report["replicas"]))  # this daemon, and any other seen in the last minute
        assert len(report["replicas"]) >= 1
        await expect(ops.locator("#started")).to_have_text(f"{report['started_last_5m']:,}")
        for element, figures in (("#late-by-reason", report["late_last_hour_by_reason"]), ("#parked-by-reason", report["parked_by_reason"])):
            shown = ", ".join(f"{k} {n:,}" for k, n in figures.items() if n) or "none"
            await expect(ops.locator(element)).to_have_text(shown)
        if os.environ.get("SCHEDULERD_UPDATE_SCREENSHOT"):
            # One picture: the job's page above the charts of the operator view.
            sheet = await browser.new_page(viewport={"width": 1280, "height": 900})
            await sheet.set_content(f'<body style="margin:0"><img src="data:image/png;base64,{_b64(tmp_path / "job.png")}" '
                                    f'style="display:block;width:1280px"><img src="data:image/png;base64,'
                                    f'{_b64(tmp_path / "overview.png")}" style="display:block;width:1280px"></body>')  # fmt: skip
            await sheet.screenshot(path=str(tmp_path / "dashboard-charts.png"), full_page=True)
        await browser.close()
    await http.aclose()
    if os.environ.get("SCHEDULERD_UPDATE_SCREENSHOT"):
        (REPO_ROOT / "docs").mkdir(exist_ok=True)
        shutil.copy(tmp_path / "dashboard-charts.png", REPO_ROOT / "docs" / "dashboard-charts.png")


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()
