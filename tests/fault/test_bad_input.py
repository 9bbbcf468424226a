"""Item 11: bad input, fuzzed with hypothesis, through every door a job comes in by: Jobs.create
in-process (what the CLI and the API both call), the CLI as a subprocess, and the HTTP API app
in-process. Cron strings, time zones, out-of-range timestamps, deeply nested or huge params,
non-UTF-8 text, NUL, NaN, SQL-looking strings: each is refused with a precise error naming the
field (ValidationError / exit 2 / a 4xx) and writes nothing, or is stored exactly. Never a
500, a traceback or a partial row."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from schedulerd.core.schedule import CronSchedule
from schedulerd.errors import ValidationError
from schedulerd.jobs import Jobs, JobSpec
from tests.conftest import REPO_ROOT, create_job

SEED = int(os.environ.get("SCHEDULERD_FAULT_SEED", "8"))
FIELDS = {"task", "tenant", "params", "run_at", "cron", "timezone", "misfire_policy", "catch_up_limit", "window",
          "name", "max_attempts", "timeout_s", "backoff_base_s", "backoff_factor", "backoff_max_s"}  # fmt: skip

# --- strategies ----------------------------------------------------------------------------------

NASTY = [
    "'; DROP TABLE jobs; --", "\" OR 1=1 --", "$1", "%s%s%n", "\\", "NULL", "null", "\u2028", "\U0001f600", "\x00",
    "a\x00b", "\udcff", "caf\udce9", "\ud800", "../../etc/passwd", "{{7*7}}", "<script>", " ", "", "x" * 300,
]  # fmt: skip
texts = st.one_of(st.text(max_size=20), st.sampled_from(NASTY), st.lists(st.sampled_from(NASTY), max_size=3).map("".join))
FIELD_TOKENS = ["*", "*/0", "*/1", "*/15", "0", "7", "59", "60", "-1", "1-5", "5-1", "1,2,3", "MON-FRI", "SUN", "JAN", "L",
                "?", "1/0", "99999999999999999999", "0-59/7", "*/99999", "LW", "L-3", "L-31", "15W", "32W", "W", "FRI#2",
                "8#1", "FRI#6", "5L", "L/2", "MON-SUN", "1,L", "#"]  # fmt: skip
crons = st.one_of(
    st.sampled_from(["*/5 * * * *", "0 9 * * MON-FRI", "30 1 * * *", "0 0 1 1 *"]),
    st.sampled_from(["@hourly", "@daily", "@weekly", "@monthly", "@yearly", "@reboot", "@every 5m", "* * * * *",
                     "0 0 30 2 *", "0 0 31 4 *", "0 0 29 2 *", "* * * *", "* * * * * *", "30 2 * * *", "@every 0s",
                     "@every 5x", "@every 1h30m", "@every 1e9d", "0 0 L * *", "0 9 ? * FRI#2", "0 0 L-30 2 *"]),
    st.lists(st.sampled_from(FIELD_TOKENS), min_size=4, max_size=6).map(" ".join),
    texts,
)  # fmt: skip
zones = st.one_of(
    st.sampled_from(["UTC", "Europe/London", "America/New_York", "Asia/Kolkata"]),
    st.sampled_from(["UTC", "Europe/London", "America/New_York", "Australia/Lord_Howe", "Europe/Dublin", "+02:00", "UTC+2",
                     "EST5EDT", "../../etc/passwd", "/etc/localtime", "Etc/GMT+12", "", " UTC", "utc", "posix/Europe/London",
                     "right/UTC", "Europe/London\x00"]),
    texts,
)  # fmt: skip
offsets = st.sampled_from([None, UTC, timezone(timedelta(hours=14)), timezone(-timedelta(hours=12)), ZoneInfo("America/New_York")])
instants = st.one_of(
    st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=offsets),
    st.integers(-86400 * 400, 86400 * 4000).map(lambda s: datetime.now(UTC) + timedelta(seconds=s)),
)
floats = st.floats(allow_nan=True, allow_infinity=True)
json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), floats, texts)
json_values = st.recursive(json_leaf, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
                           max_leaves=20)  # fmt: skip


def mostly(good: st.SearchStrategy[Any], bad: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Good four times in five, so a bad value in one field is not always hidden by another."""
    return st.one_of(good, good, good, good, bad)


def _nested(depth: int) -> dict[str, Any]:
    value: Any = "bottom"
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return {"deep": value}


params = st.one_of(
    st.dictionaries(texts, json_values, max_size=5),
    st.integers(20, 45).map(_nested),
    st.integers(60_000, 70_000).map(lambda n: {"blob": "x" * n}),
)
# Valid values, varied (SQL-looking and exotic text is valid and must be stored exactly) ...
CLEAN = [t for t in NASTY if "\x00" not in t and not any(0xD800 <= ord(c) <= 0xDFFF for c in t)]
clean_texts = st.one_of(st.text(max_size=20), st.sampled_from(CLEAN))
clean_json = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False, allow_infinity=False), clean_texts),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(clean_texts, inner, max_size=4), max_leaves=20,
)  # fmt: skip
near_future = st.integers(0, 86400 * 300).map(lambda s: datetime.now(UTC) + timedelta(seconds=s, minutes=1))
GOOD = {
    "task": st.sampled_from(["noop", "log"]), "tenant": st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9_.-]{0,20}\Z"),
    "params": st.dictionaries(clean_texts, clean_json, max_size=5), "name": st.none() | clean_texts,
    "max_attempts": st.none() | st.integers(1, 100), "timeout_s": st.none() | st.floats(0.5, 86400),
    "backoff_base_s": st.none() | st.floats(0, 3600), "backoff_factor": st.none() | st.floats(1, 10),
    "backoff_max_s": st.none() | st.floats(0, 86400),
}  # fmt: skip
# ... and bad ones, of which each example takes up to two.
BAD = {
    "task": st.sampled_from(["nope", "NOOP", "", "noop "]) | texts, "tenant": st.sampled_from(["a" * 65, "x y", "../x", ""]) | texts,
    "params": params | st.dictionaries(texts, json_values, min_size=1, max_size=5), "name": texts | st.just("n" * 201),
    "max_attempts": st.integers(-5, 0) | st.integers(101, 10**20), "timeout_s": floats, "backoff_base_s": floats,
    "backoff_factor": floats, "backoff_max_s": floats, "run_at": instants,
}  # fmt: skip
GOOD_CRON = {"cron": st.sampled_from(["*/5 * * * *", "0 9 * * MON-FRI", "30 1 * * *", "0 0 1 1 *", "@daily", "@hourly",
                                      "0 0 L * *", "30 2 15W * *", "0 9 ? * MON#1", "0 0 * * 5L", "@every 1h30m"]),
             "timezone": st.sampled_from(["UTC", "Europe/London", "America/New_York", "Asia/Kolkata", "Australia/Lord_Howe"]),
             "misfire_policy": st.sampled_from(["skip", "run_once", "catch_up"]), "catch_up_limit": st.integers(0, 1000),
             "window_s": st.floats(0, 86400)}  # fmt: skip
BAD_CRON = {"cron": crons, "timezone": zones, "misfire_policy": st.sampled_from(["never", ""]) | texts,
            "catch_up_limit": st.integers(-5, -1) | st.integers(1001, 10**9), "window_s": floats | st.floats(-100, -0.001)}  # fmt: skip


@st.composite
def job_specs(draw: st.DrawFn, recurring: bool) -> JobSpec:
    good = {**GOOD, **GOOD_CRON} if recurring else {**GOOD, "run_at": st.none() | near_future}
    bad = {**BAD, **BAD_CRON} if recurring else BAD
    fields = {name: draw(strategy) for name, strategy in good.items()}
    for name in sorted(draw(st.sets(st.sampled_from(sorted(bad)), max_size=2))):
        fields[name] = draw(bad[name])
    return JobSpec(**fields)


one_offs = job_specs(recurring=False)
recurring = job_specs(recurring=True)


def _same_json(a: Any, b: Any) -> bool:
    """JSON equality: numbers compared as the decimals they were written as (jsonb keeps 1e+308
    exactly, and prints it back as 1000...0)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return Decimal(repr(a) if isinstance(a, float) else a) == Decimal(repr(b) if isinstance(b, float) else b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_json(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_json(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


async def _rows(store) -> tuple[int, int]:
    row = await store.db.fetchrow("SELECT (SELECT count(*) FROM jobs) AS jobs, (SELECT count(*) FROM executions) AS executions")
    return row["jobs"], row["executions"]


async def _create_and_judge(store, jobs: Jobs, spec: JobSpec) -> str:
    before = await _rows(store)
    try:
        job, executions = await create_job(jobs, spec)
    except ValidationError as exc:
        field = exc.field.split(".")[0].split("[")[0].split(" ")[0]
        assert field in FIELDS, exc
        assert exc.message and str(exc).startswith(f"{exc.field}: "), exc
        assert await _rows(store) == before, f"refused ({exc}) but rows were written"
        return f"refused: {field}"
    stored = await store.job_get(job.id)
    assert _same_json(stored.params, spec.params), (stored.params, spec.params)
    assert (stored.task, stored.tenant, stored.name) == (spec.task, spec.tenant, spec.name)
    if spec.cron is not None:
        assert (stored.cron, stored.timezone) == (CronSchedule.parse(spec.cron, spec.timezone).expression, spec.timezone)
        assert all(e.job_id == job.id and e.scheduled_for >= job.created_at - timedelta(minutes=1) for e in executions)
    else:
        (execution,) = executions
        assert spec.run_at is None or stored.run_at == spec.run_at
        assert execution.due_at == execution.scheduled_for == stored.run_at
    assert await _rows(store) == (before[0] + 1, before[1] + len(executions))
    return "stored"


@pytest.mark.timeout(240)
@pytest.mark.parametrize(("kind", "specs", "examples"), [("one-off", one_offs, 250), ("recurring", recurring, 150)])
async def test_fuzzed_job_definitions_are_refused_precisely_or_stored_exactly(store, queue, config, kind, specs, examples) -> None:
    jobs = Jobs(store, queue, config)
    loop = asyncio.get_running_loop()
    seen: Counter[str] = Counter()

    @seed(SEED)
    @settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(spec=specs)
    def judge(spec: JobSpec) -> None:
        seen[asyncio.run_coroutine_threadsafe(_create_and_judge(store, jobs, spec), loop).result(60)] += 1

    await asyncio.to_thread(judge)  # hypothesis drives from a thread; the store stays on this loop
    print(f"\n[fault] fuzzed {kind} definitions (seed {SEED}): {dict(sorted(seen.items()))}; no other outcome")
    assert seen["stored"] > 0 and sum(seen.values()) > seen["stored"]


# --- the CLI -------------------------------------------------------------------------------------

cli_args = st.fixed_dictionaries(
    {"--task": mostly(st.just("noop"), st.sampled_from(["log", "nope"]))},
    optional={
        "--params": st.one_of(json_values.map(lambda v: json.dumps({"v": v})), texts,
                              st.sampled_from([b'{"a": "\xff\xfe"}', b"{\"a\": \"caf\xe9\"}", b"\xff", '{"a": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}'])),
        "--at": st.one_of(instants.map(lambda d: d.isoformat()), st.sampled_from(["2026-12-01T09:00", "0000-01-01T00:00Z",
                          "99999-01-01T00:00Z", "yesterday", "2026-02-30T00:00Z", "1e9", "0001-01-01T00:00:00+01:00",
                          "9999-12-31T23:00:00-05:00", "2026-12-01T09:00:00Z\x01"]), texts),
        "--in": st.sampled_from(["5s", "999999999999d", "1" * 400 + "s", "36600d", "0s", "1e9s"]),
        "--cron": crons, "--tz": zones, "--name": texts,
    },
)  # fmt: skip


def _bytes(text: str) -> bytes:
    """Lone surrogates become the invalid bytes they stand for (or CESU-8): non-UTF-8 argv."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


def _argv(args: dict[str, Any]) -> list[str | bytes]:
    argv: list[str | bytes] = [sys.executable, "-m", "schedulerd", "job", "create", "--json"]
    for key, value in args.items():
        if key == "--tz" and "--cron" not in args:
            continue
        if key == "--at" and "--cron" in args:
            continue
        if key == "--in" and ("--cron" in args or "--at" in args):  # one of the three (argparse says so itself)
            continue
        value = value if isinstance(value, bytes) else _bytes(value)
        argv += [key, value.replace(b"\x00", b"\\0") or b" "]  # argv cannot carry NUL bytes
    return argv


@pytest.mark.timeout(240)
async def test_fuzzed_cli_job_create_exits_0_or_2_and_writes_all_or_nothing(store, database_url, redis_url, redis_prefix) -> None:
    env = {**os.environ, "SCHEDULERD_CONFIG": str(REPO_ROOT / "config.toml"), "SCHEDULERD_DATABASE_URL": database_url,
           "SCHEDULERD_REDIS_URL": redis_url, "SCHEDULERD_REDIS_PREFIX": redis_prefix}  # fmt: skip
    loop = asyncio.get_running_loop()
    seen: Counter[str] = Counter()

    @seed(SEED)
    @settings(max_examples=int(os.environ.get("SCHEDULERD_FUZZ_CLI_EXAMPLES", "16")), deadline=None, database=None,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(args=cli_args)
    def judge(args: dict[str, Any]) -> None:
        before = asyncio.run_coroutine_threadsafe(_rows(store), loop).result(30)
        done = subprocess.run(_argv(args), env=env, capture_output=True, timeout=60, cwd=REPO_ROOT)
        after = asyncio.run_coroutine_threadsafe(_rows(store), loop).result(30)
        stderr = done.stderr.decode(errors="replace")
        assert "Traceback" not in stderr, stderr
        assert done.returncode in (0, 2), (done.returncode, stderr)
        if done.returncode == 2:
            assert stderr.startswith("schedulerd: error: ") and ": " in stderr[len("schedulerd: error: "):], stderr
            assert after == before, "refused but rows were written"
            seen["exit 2: " + stderr[len("schedulerd: error: "):].split(":")[0].strip()[:20]] += 1
        else:
            created = json.loads(done.stdout)
            assert after[0] == before[0] + 1
            if "--params" in args and not isinstance(args["--params"], bytes):
                assert _same_json(created["job"]["params"], json.loads(args["--params"]))
            seen["exit 0"] += 1

    await asyncio.to_thread(judge)
    print(f"\n[fault] fuzzed CLI job create (seed {SEED}): {dict(sorted(seen.items()))}")


# --- the HTTP API, in-process ---------------------------------------------------------------------

def _body(spec: JobSpec) -> dict[str, Any]:
    """The API's shape of a job definition (the tenant comes from the token)."""
    body = {
        "task": spec.task, "params": spec.params, "name": spec.name, "cron": spec.cron,
        "run_at": spec.run_at.isoformat() if spec.run_at else None,
        "timezone": spec.timezone if spec.cron else None, "window_s": spec.window_s if spec.cron else None,
        "misfire": {"policy": spec.misfire_policy, "catch_up_limit": spec.catch_up_limit} if spec.cron else None,
        "retry": {k: v for k, v in {"max_attempts": spec.max_attempts, "backoff_base_s": spec.backoff_base_s,
                                    "backoff_factor": spec.backoff_factor, "backoff_max_s": spec.backoff_max_s}.items() if v is not None},
        "timeout_s": spec.timeout_s,
    }  # fmt: skip
    return {k: v for k, v in body.items() if v is not None}


bodies = st.one_of(one_offs.map(_body), recurring.map(_body),
                   st.fixed_dictionaries({"task": st.just("noop")}, optional={"status": texts, "fence": st.integers(),
                                                                               "attempt": st.integers(), "tenant": texts}))  # fmt: skip
raw_bodies = st.one_of(
    st.binary(max_size=200), st.sampled_from([b'{"task": "noop", "params": {"a": "\\udcff"}}', b'{"task": "noop", "name": "\xff"}',
                                              b"[" * 5000 + b"]" * 5000, b'{"task": "noop", "params": ' + b'{"a":' * 100 + b"1" + b"}" * 101,
                                              b'{"task": "noop", "params": {"x": NaN}}', b'{"task": "noop", "run_at": "+275760-09-13T00:00:00Z"}',
                                              b'{"task": "noop", "run_at": "0001-01-01T00:00:00+01:00"}',
                                              b'{"task": "noop", "run_at": "9999-12-31T23:00:00-05:00"}',
                                              b'{"task": "noop", "run_at": "2026-12-01T09:00:00Z\\u0000"}',
                                              b'{"task": "noop", "timezone": "Nowhere/Land"}',
                                              b'{"task": "noop", "name": "a\\u0000b", "timezone": "UTC"}']),
)  # fmt: skip


@pytest.mark.timeout(240)
async def test_fuzzed_api_job_create_never_answers_5xx(store, queue, config) -> None:
    httpx = pytest.importorskip("httpx")
    api = pytest.importorskip("schedulerd.api")
    from schedulerd.tenants import Tenants

    tenant = await Tenants(store).create(f"fuzz-{os.getpid()}-{id(store)}")
    app = api.create_app(Jobs(store, queue, config), store, queue, config)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    loop = asyncio.get_running_loop()
    seen: Counter[str] = Counter()
    async with httpx.AsyncClient(transport=transport, base_url="http://fuzz", headers={"Authorization": f"Bearer {tenant.token}"}) as http:

        async def post(body: Any) -> str:
            before = await _rows(store)
            content = body if isinstance(body, bytes) else json.dumps(body, allow_nan=True).encode("utf-8", "surrogatepass")
            response = await http.post("/v1/jobs", content=content, headers={"Content-Type": "application/json"})
            assert response.status_code < 500, (response.status_code, response.text, content[:300])
            if os.environ.get("FUZZ_DEBUG"):
                print(response.status_code, response.text[:200], content[:200])
            after = await _rows(store)
            if response.status_code == 201:
                assert after[0] == before[0] + 1
                created = response.json()["job"]
                assert created["tenant"] == tenant.tenant  # a body cannot choose its tenant
                if isinstance(body, dict) and "params" in body:
                    assert _same_json(created["params"], body["params"])
            else:
                assert after == before, (response.status_code, response.text)
                error = response.json()["error"]
                assert error["message"] and error["code"], error
            return str(response.status_code)

        @seed(SEED)
        @settings(max_examples=200, deadline=None, database=None, suppress_health_check=list(HealthCheck))
        @given(body=bodies | raw_bodies)
        def judge(body: Any) -> None:
            seen[asyncio.run_coroutine_threadsafe(post(body), loop).result(60)] += 1

        await asyncio.to_thread(judge)
    print(f"\n[fault] fuzzed POST /v1/jobs in-process (seed {SEED}): statuses {dict(sorted(seen.items()))}")
    assert "201" in seen and len(seen) > 1


# --- Quartz's day forms and @every: refused precisely at every door -------------------------------

QUARTZ_REFUSED = [
    ("0 0 * * 8#1", "bad cron expression '0 0 * * 8#1': day-of-week field '8#1': 8 is out of range 0-7"),
    ("0 0 * * FRI#6", "bad cron expression '0 0 * * FRI#6': day-of-week field 'FRI#6': the week of the month after '#' "
                      "must be 1-5, got 6"),
    ("0 0 32W * *", "bad cron expression '0 0 32W * *': day-of-month field '32W': 32 is out of range 1-31"),
    ("L 0 * * *", "bad cron expression 'L 0 * * *': minute field 'L': 'L', 'W', '#' and '?' are allowed only in the "
                  "day-of-month and day-of-week fields"),
    ("0 0 L-30 2 *", "cron expression '0 0 L-30 2 *' never fires: no day of a month in '2' matches day-of-month 'L-30' "
                     "and day-of-week '*'"),
    ("@every 0s", "bad interval '@every 0s': '0s' is shorter than 1 minute, the shortest step of any schedule (as in cron)"),
    ("@every 5x", "bad interval '@every 5x': '5x' is not a duration (use e.g. 30s, 5m, 1h30m, 250ms)"),
]  # fmt: skip


async def test_quartz_forms_and_intervals_refused_precisely_by_jobs_create_and_the_api(store, queue, config) -> None:
    httpx = pytest.importorskip("httpx")
    api = pytest.importorskip("schedulerd.api")
    from schedulerd.tenants import Tenants

    jobs = Jobs(store, queue, config)
    tenant = await Tenants(store).create(f"quartz-{os.getpid()}-{id(store)}")
    app = api.create_app(jobs, store, queue, config)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://q", headers={"Authorization": f"Bearer {tenant.token}"}) as http:
        for cron, message in QUARTZ_REFUSED:
            with pytest.raises(ValidationError) as info:
                await create_job(jobs, JobSpec(task="noop", cron=cron))
            assert (info.value.field, info.value.message) == ("cron", message)
            response = await http.post("/v1/jobs", json={"task": "noop", "cron": cron})
            assert response.status_code == 422, response.text
            assert response.json()["error"]["field"] == "cron" and response.json()["error"]["message"] == message
        # A DST override on an interval is refused naming the override.
        with pytest.raises(ValidationError) as info:
            await create_job(jobs, JobSpec(task="noop", cron="@every 5m", dst_missing="skip"))
        assert info.value.field == "dst_missing" and "an interval is elapsed time" in info.value.message
        response = await http.post("/v1/jobs", json={"task": "noop", "cron": "@every 5m", "dst_repeated": "both"})
        assert response.status_code == 422 and response.json()["error"]["field"] == "dst_repeated", response.text
        assert await _rows(store) == (0, 0)
        # The accepted forms are stored as given, with runs; an interval's view has no DST rule in force.
        for cron in ("0 9 ? * MON#1", "0 0 LW * *", "@every 1h30m"):
            response = await http.post("/v1/jobs", json={"task": "noop", "cron": cron, "timezone": "Europe/London"})
            assert response.status_code == 201, response.text
            view = response.json()["job"]
            assert view["cron"] == cron and len(response.json()["next_runs"]) > 0
            assert (view["dst_repeated"] is None) == cron.startswith("@every")
