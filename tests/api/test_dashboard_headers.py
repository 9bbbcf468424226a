"""The dashboard and /docs as a browser gets them: a Content-Security-Policy allowing only this
origin's files (no inline script or handler), no framing, no sniffing, no Referer; and /docs
served without a third-party CDN."""

from __future__ import annotations

import re

import httpx

from schedulerd.api.app import DASHBOARD_DIR


async def test_every_response_carries_the_security_headers(api, client) -> None:  # type: ignore[no-untyped-def]
    async with httpx.AsyncClient(base_url=api.url) as anonymous:
        responses = [await anonymous.get(path) for path in ("/", "/docs", "/dashboard/app.js", "/openapi.json", "/v1/me", "/nope")]
    responses.append(await client.get("/v1/me"))
    for response in responses:
        csp = response.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in csp and "script-src 'self'" in csp and "unsafe-inline" not in csp, csp
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["referrer-policy"] == "no-referrer"
        assert response.headers["x-frame-options"] == "DENY"


async def test_docs_load_nothing_from_another_origin(api) -> None:  # type: ignore[no-untyped-def]
    async with httpx.AsyncClient(base_url=api.url) as http:
        docs = await http.get("/docs")
        assert docs.status_code == 200 and "text/html" in docs.headers["content-type"]
        script = await http.get("/dashboard/docs.js")
    for text in (docs.text, script.text):
        assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text), text[:500]
        assert "cdn" not in text.lower().replace("cdn-hosted", "")


def test_the_dashboard_has_no_inline_script_or_handler() -> None:
    for path in DASHBOARD_DIR.iterdir():
        text = path.read_text()
        assert not re.search(r"\son[a-z]+\s*=", text), path  # onclick=..., onload=...
        assert "<script>" not in text and "style=" not in text, path
        if path.suffix == ".html":
            assert all(src.startswith("/dashboard/") for src in re.findall(r'<script src="([^"]+)"', text)), path
