"""POST /v1/notifications/test over real HTTP to a receiver on loopback (listed in [http].allow_hosts
for these tests, as tests/integration/test_http_task.py does): the receiver's answer reported,
delivered or not, with the notice's id in its header."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace

import httpx
import pytest

from schedulerd.config import Config, HttpConfig
from schedulerd.core import notify
from tests.http_target import Reply, Target, serve


@pytest.fixture
def config(config: Config) -> Config:
    return replace(config, http=HttpConfig(allow_hosts=("127.0.0.1:*",)))


@pytest.fixture
def receiver() -> Iterator[Target]:
    yield from serve()


async def test_a_test_notice_reaches_the_tenants_url_and_its_answer_is_reported(
    client: httpx.AsyncClient, receiver: Target
) -> None:  # fmt: skip
    assert (await client.put("/v1/notifications", json={"url": receiver.url + "/hook"})).status_code == 200

    sent = await client.post("/v1/notifications/test")
    assert sent.status_code == 200, sent.text
    answer = sent.json()
    assert answer["delivered"] is True and answer["status"] == 200 and answer["error"] is None
    [received] = receiver.requests
    body = json.loads(received.body)
    assert received.path == "/hook" and body["event"] == "test" and body["tenant"] == client.tenant  # type: ignore[attr-defined]
    assert received.headers[notify.ID_HEADER] == answer["notification_id"] == body["id"]

    receiver.script = [Reply(410, b"gone")]
    gone = (await client.post("/v1/notifications/test", json={"url": receiver.url + "/other"})).json()
    assert (gone["delivered"], gone["status"]) == (False, 410) and "answered 410" in gone["error"]


async def test_a_test_notice_to_a_receiver_that_is_down_reports_no_answer(client: httpx.AsyncClient) -> None:
    closed = Target()
    url = closed.url
    closed.close()
    answer = (await client.post("/v1/notifications/test", json={"url": url})).json()
    assert answer["delivered"] is False and answer["status"] is None and "failed to connect" in answer["error"]
