// schedulerd dashboard: a static page that reads the JSON API with the bearer token kept in
// sessionStorage (gone when the tab closes). Hash routes: #/jobs, #/jobs/ID[?status=&cursor=&up=],
// #/executions/ID (Cancel, Redrive), #/failed (dead letters), #/overview (with the bulk actions taken),
// #/notifications (the tenant's setting, a test notice, the newest notices).
// Re-renders the current view every REFRESH_MS. Times: the job's zone, then UTC. Charts: charts.js (SVG drawn here, no CDN).
"use strict";

const REFRESH_MS = 3000;
const TOKEN_KEY = "schedulerd.token";
const PAGE = 25; // runs per page on a job's page
const STRIP = 60; // recent runs in a job's strip
const UPCOMING_SINCE_MS = 24 * 3600 * 1000; // a job's upcoming runs: not yet started, scheduled since a day ago
const HARMLESS_TASKS = ["log", "noop"]; // the New job form's default, before any other type
const RUN_STATUSES = ["running", "succeeded", "failed", "skipped", "cancelled"]; // a job's past runs
const CANCELLABLE = ["pending", "queued", "running"]; // an execution a Cancel button may stop
const $ = (id) => document.getElementById(id);
const zones = {}; // job id -> IANA zone, for executions' times
const names = {}; // job id -> name (or the id's start), for pages that show a job

function remember(job) {
  zones[job.id] = job.timezone;
  names[job.id] = job.name || job.id.slice(0, 8);
}

// A job's name for a page listing executions of several jobs; fetched once per job.
async function jobName(id) {
  if (!(id in names)) {
    try {
      remember(await api("GET", `/v1/jobs/${encodeURIComponent(id)}`));
    } catch (error) {
      if (error instanceof Unauthorized) throw error;
      names[id] = id.slice(0, 8);
    }
  }
  return names[id];
}

const jobLink = (id) => `<a href="#/jobs/${esc(id)}" class="job-name">${esc(names[id] || id.slice(0, 8))}</a>`;

function esc(value) {
  return String(value ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

function formatIn(iso, zone) {
  const options = { timeZone: zone, year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit",
                    minute: "2-digit", second: "2-digit", hourCycle: "h23", timeZoneName: "short" };
  const parts = {};
  for (const part of new Intl.DateTimeFormat("en-US", options).formatToParts(new Date(iso))) parts[part.type] = part.value;
  return `${parts.year}-${parts.month}-${parts.day} ${parts.hour}:${parts.minute}:${parts.second} ${parts.timeZoneName}`;
}

// An instant in the job's zone, with UTC under it (one line when the zone is UTC).
function when(iso, zone) {
  if (!iso) return "–";
  const utc = formatIn(iso, "UTC");
  if (!zone || zone === "UTC") return `<span class="local">${esc(utc)}</span>`;
  return `<span class="local">${esc(formatIn(iso, zone))}</span><span class="utc">${esc(utc)}</span>`;
}

const seconds = (s) => (s == null ? "–" : s < 1 ? `${(s * 1000).toFixed(0)} ms` : `${s.toFixed(2)} s`);
const badge = (status) => `<span class="status ${esc(status)}">${esc(status)}</span>`;
// A backfilled or triggered run says so; scheduled runs (the usual) show nothing.
const origin = (e) => (e.origin && e.origin !== "scheduled" ? ` <span class="origin">${esc(e.origin)}</span>` : "");
const pauseText = (pause) => (pause ? `${pause.note ? `“${pause.note}”` : "no note"} — ${pause.by || "?"}` : "");
const lateNote = (e) => (e.late_reason ? ` <span class="late">late: ${esc(e.late_reason)}</span>` : "");

class Unauthorized extends Error {}

async function api(method, path, body, extraHeaders) {
  const headers = { Authorization: `Bearer ${sessionStorage.getItem(TOKEN_KEY) || ""}`, ...(extraHeaders || {}) };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const data = await response.json().catch(() => ({}));
  if (response.status === 401) throw new Unauthorized(data.error?.message || "unauthorized");
  if (!response.ok) {
    const e = data.error || {};
    throw new Error(`${e.field ? e.field + ": " : ""}${e.message || response.statusText}`);
  }
  return data;
}

function showLogin(message) {
  sessionStorage.removeItem(TOKEN_KEY);
  $("login").hidden = false;
  $("nav").hidden = true;
  $("new-job").hidden = true;
  $("view").innerHTML = "";
  $("login-error").textContent = message || "";
}

const labelText = (labels) => Object.entries(labels || {}).map(([k, v]) => `${k}=${v}`).join(",");
const JOB_FILTERS = ["name", "label", "task", "kind", "state"];
const JOB_PAGE = 100; // jobs per page of the jobs list

// The jobs list: a filter box (name prefix, label selector, task, kind, state; in the hash) and
// pages by the API's cursor. Done jobs (finished one-offs, bounded jobs with no run left) show
// when the state asks for them.
async function jobsView(query) {
  const filters = new URLSearchParams(query || "");
  const params = new URLSearchParams({ limit: String(JOB_PAGE) });
  for (const key of [...JOB_FILTERS, "cursor"]) if (filters.get(key)) params.set(key, filters.get(key));
  const page = await api("GET", `/v1/jobs?${params}`);
  const older = new URLSearchParams(filters);
  older.set("cursor", page.next_cursor || "");
  const newest = new URLSearchParams(filters);
  newest.delete("cursor");
  const value = (key) => esc(filters.get(key) || "");
  const choice = (key, choices) => choices.map(([v, text]) =>
    `<option value="${v}"${(filters.get(key) || "") === v ? " selected" : ""}>${text}</option>`).join("");
  const box = `<form id="job-filter" class="filters">
    <label>Name <input name="name" value="${value("name")}" placeholder="starts with"></label>
    <label>Labels <input name="label" value="${value("label")}" placeholder="team=billing,env=prod"></label>
    <label>Task <input name="task" value="${value("task")}"></label>
    <label>Kind <select name="kind">${choice("kind", [["", "any"], ["cron", "cron"], ["one-off", "one-off"]])}</select></label>
    <label>State <select name="state">${choice("state", [["", "enabled, paused"], ["enabled", "enabled"], ["paused", "paused"],
      ["done", "done"], ["all", "all"]])}</select></label>
    <button type="submit">Find</button>
    ${filters.get("cursor") ? `<a id="jobs-newest" href="#/jobs${newest.toString() ? `?${esc(newest.toString())}` : ""}">newest</a>` : ""}
    ${page.next_cursor ? `<a id="jobs-older" href="#/jobs?${esc(older.toString())}">older →</a>` : ""}</form>`;
  const filtered = JOB_FILTERS.some((key) => filters.get(key));
  const rows = page.items.map((job) => {
    remember(job);
    const schedule = job.cron ? `<code>${esc(job.cron)}</code>` : esc(job.schedule_kind);
    const next = job.next_runs.slice(0, 2).map((t) => when(t, job.timezone)).join("") || "–";
    const last = job.last_execution
      ? `${badge(job.last_execution.status)} ${when(job.last_execution.scheduled_for, job.timezone)}` : "–";
    return `<tr class="link job" data-id="${esc(job.id)}" data-href="#/jobs/${esc(job.id)}">
      <td>${esc(job.name || job.id.slice(0, 8))}${labelText(job.labels) ? `<span class="note labels">${esc(labelText(job.labels))}</span>` : ""}</td>
      <td>${esc(job.task)}</td><td>${schedule}</td>
      <td>${esc(job.timezone)}</td><td>${esc(job.state)}${job.pause ? `<span class="note">${esc(pauseText(job.pause))}</span>` : ""}${overrunFlag(job)}</td>
      <td>${next}</td><td>${last}</td></tr>`;
  });
  return `<h1>Jobs</h1>${box}<div class="scroll"><table id="jobs"><thead><tr><th>Name</th><th>Task</th><th>Schedule</th><th>Zone</th>
    <th>State</th><th>Next runs</th><th>Last outcome</th></tr></thead><tbody>${rows.join("") ||
    (filtered || filters.get("cursor") ? '<tr><td colspan="7">No job matches.</td></tr>'
      : '<tr><td colspan="7">No jobs yet: create one above.</td></tr>')}</tbody></table></div>`;
}

function runRow(e, zone) {
  return `<tr class="link execution" data-id="${esc(e.id)}" data-status="${esc(e.status)}"
      data-href="#/executions/${esc(e.id)}"><td>${badge(e.status)}${origin(e)}</td>
      <td>${when(e.scheduled_for, zone)}</td><td>${when(e.first_started_at, zone)}</td>
      <td>${seconds(e.start_lag_s)}</td><td>${seconds(e.duration_s)}</td><td>${esc(e.attempt)}</td><td>${esc(e.worker || "")}</td>
      <td class="version">v${esc(e.job_version || 1)}</td>
      <td class="error">${esc((e.last_error || e.reason || "").split("\n").slice(-1)[0])}${lateNote(e)}</td></tr>`;
}

// A job's page: what it is, a strip of its recent runs, its past runs (status filter, pages by
// the API's cursor) and, apart, its upcoming ones. The filter and cursors live in the hash.
async function jobView(id, query) {
  const filters = new URLSearchParams(query || "");
  const job = await api("GET", `/v1/jobs/${encodeURIComponent(id)}`);
  remember(job);
  const path = (params) => `#/jobs/${encodeURIComponent(id)}${params.toString() ? `?${params}` : ""}`;
  const past = new URLSearchParams({ job: id, when: "past", limit: String(PAGE) });
  const status = RUN_STATUSES.includes(filters.get("status")) ? filters.get("status") : "";
  if (status) past.set("status", status);
  if (filters.get("cursor")) past.set("cursor", filters.get("cursor"));
  // Upcoming from a day back: overdue runs still show, and the scan skips the job's history.
  const upcoming = new URLSearchParams({ job: id, when: "upcoming", limit: "10", since: new Date(Date.now() - UPCOMING_SINCE_MS).toISOString() });
  if (filters.get("up")) upcoming.set("cursor", filters.get("up"));
  const [runs, next, recent] = await Promise.all([
    api("GET", `/v1/executions?${past}`), api("GET", `/v1/executions?${upcoming}`),
    api("GET", `/v1/executions?${new URLSearchParams({ job: id, when: "past", limit: String(STRIP) })}`)]);
  const rows = runs.items.map((e) => runRow(e, job.timezone));
  const upcomingRows = next.items.map((e) => runRow(e, job.timezone));
  const older = new URLSearchParams(filters);
  older.set("cursor", runs.next_cursor || "");
  const later = new URLSearchParams(filters);
  later.set("up", next.next_cursor || "");
  const first = new URLSearchParams(filters);
  first.delete("cursor");
  const firstUp = new URLSearchParams(filters);
  firstUp.delete("up");
  // Next runs from the labelled preview: a run DST shifted, skipped before or de-duplicated says so.
  const preview = job.state === "enabled" ? (await api("GET", `/v1/jobs/${encodeURIComponent(id)}/next-runs?count=5`)).items : [];
  const nextRuns = preview.map((r) => `<div class="run">${when(r.at, job.timezone)}${r.labels.map((label) =>
    `<span class="dst" title="${esc(r.note)}">${esc(label)}</span>`).join("")}</div>`).join("") || "–";
  const dst = job.cron ? `<dt>DST</dt><dd>repeated time: ${esc(job.dst_repeated)}, missing time: ${esc(job.dst_missing)};
    tz database ${esc(job.tzdata_version || "unrecorded")}</dd>` : "";
  const actions = job.state === "deleted" ? "" : `
    <button data-action="trigger">Run now</button>
    ${job.state === "enabled" ? '<button data-action="pause">Pause</button>' : ""}
    ${job.state === "paused" && job.cron ? '<button data-action="resume">Resume</button>' : ""}
    <button data-action="delete">Delete</button>`;
  const head = `<thead><tr><th>Status</th><th>Scheduled</th><th>Started</th><th>Start lag</th><th>Duration</th>
    <th>Attempts</th><th>Worker</th><th title="the job version it runs under">Version</th><th>Error / reason</th></tr></thead>`;
  const options = ["", ...RUN_STATUSES].map((s) => `<option value="${s}"${s === status ? " selected" : ""}>${s || "all"}</option>`);
  return `<h1>Job <span id="job-title">${esc(job.name || job.id)}</span></h1>
    <dl><dt>id</dt><dd>${esc(job.id)}</dd><dt>task</dt><dd>${esc(job.task)}</dd>
    <dt>schedule</dt><dd>${job.cron ? `<code>${esc(job.cron)}</code> in ${esc(job.timezone)}` : esc(job.schedule_kind)}</dd>
    <dt>state</dt><dd id="job-state">${esc(job.state)}${job.pause ? ` since ${when(job.pause.at, "UTC")}
      <span class="note">${esc(pauseText(job.pause))}</span>` : ""}</dd><dt>params</dt><dd><code>${esc(JSON.stringify(job.params))}</code></dd>
    <dt>overlap</dt><dd id="job-overlap-policy">${esc(job.overlap)}</dd><dt>version</dt><dd id="job-version">${esc(job.version)}</dd>
    <dt title="0-9: higher starts first among your due runs">priority</dt><dd id="job-priority">${esc(job.priority ?? 5)}</dd>
    ${job.concurrency ? `<dt title="at most this many of your runs with this key run at once">concurrency</dt><dd id="job-concurrency">${esc(job.concurrency.key)}: ${esc(job.concurrency.limit)} at once</dd>` : ""}
    <dt title="where this job's notices go: its own setting, else the tenant's (Notifications)">notify</dt><dd id="job-notify">${job.notify
      ? (job.notify.on.length ? `${esc(job.notify.on.join(", "))} to ${esc(job.notify.url)}` : "none (opted out)")
      : '<a href="#/notifications">the tenant\'s setting</a>'}${job.pause_after_failures
      ? `; paused after ${esc(job.pause_after_failures)} failed runs in a row` : ""}</dd>
    ${job.rate_limit ? `<dt title="at most this many starts per window of your runs with this key">rate limit</dt><dd id="job-rate-limit">${esc(job.rate_limit.key)}: ${esc(job.rate_limit.limit)} per ${esc(job.rate_limit.window_s)} s</dd>` : ""}
    <dt>labels</dt><dd id="job-labels">${esc(labelText(job.labels) || "–")}</dd>
    ${bounded(job) ? `<dt>bounds</dt><dd id="job-bounds">${bounded(job)}</dd>` : ""}
    ${job.overrun ? `<dt>run time</dt><dd id="job-overrun" class="${job.overrun.warning ? "error" : ""}">${overrunText(job.overrun)}</dd>` : ""}
    ${dst}<dt>next runs</dt><dd id="next-runs">${nextRuns}</dd></dl>
    <p id="job-actions" data-id="${esc(job.id)}">${actions}</p>
    ${job.state === "deleted" ? "" : editForm(job)}
    <h2>Recent runs</h2>${recent.items.length ? `<figure><figcaption>The last ${esc(recent.items.length)} runs, oldest left:
      colour is the outcome, height the duration</figcaption>${Charts.strip("run-strip", "recent runs by outcome and duration", recent.items)}</figure>`
      : "<p>No run yet.</p>"}
    <h2>Runs</h2><form id="run-filter" class="filters"><label>Status <select id="run-status" name="status">${options.join("")}</select></label>
      ${filters.get("cursor") ? `<a id="runs-newest" href="${esc(path(first))}">newest</a>` : ""}
      ${runs.next_cursor ? `<a id="runs-older" href="${esc(path(older))}">older →</a>` : ""}</form>
    <div class="scroll"><table id="executions">${head}
    <tbody>${rows.join("") || `<tr><td colspan="9">No ${esc(status || "past")} runs${filters.get("cursor") ? " on this page" : " yet"}.</td></tr>`}</tbody></table></div>
    <h2>Upcoming</h2><p class="note">Not yet started, soonest first (scheduled since 24 hours ago; older ones are under
      Operator, late runs).</p><p class="filters">${filters.get("up") ? `<a id="upcoming-first" href="${esc(path(firstUp))}">soonest</a>` : ""}
      ${next.next_cursor ? `<a id="upcoming-later" href="${esc(path(later))}">later →</a>` : ""}</p>
    <div class="scroll"><table id="upcoming">${head}
    <tbody>${upcomingRows.join("") || '<tr><td colspan="9">Nothing waiting to start.</td></tr>'}</tbody></table></div>`;
}

// The edit form of a job's page (PATCH /v1/jobs/{id}): the editable fields, filled with the job's
// values; only the fields changed are sent. Plan asks for a dry run; Save applies it with If-Match,
// so an edit made meanwhile elsewhere is refused rather than overwritten.
function editForm(job) {
  const overlap = ["allow", "skip", "buffer_one", "cancel_other"].map((o) =>
    `<option value="${o}"${o === job.overlap ? " selected" : ""}>${o}</option>`).join("");
  const schedule = job.cron
    ? `<label>Cron <input id="edit-cron" name="cron" value="${esc(job.cron)}"></label>`
    : `<label>Run at <input id="edit-run-at" name="run_at" value="${esc(job.run_at || "")}"></label>`;
  return `<details id="job-edit"><summary>Edit</summary>
    <form id="edit-form" data-id="${esc(job.id)}" data-version="${esc(job.version)}">
      ${schedule}<label>Zone <input id="edit-zone" name="timezone" value="${esc(job.timezone)}"></label>
      <label>Name <input id="edit-name" name="name" value="${esc(job.name || "")}"></label>
      <label>Overlap <select id="edit-overlap" name="overlap">${overlap}</select></label>
      <label>Priority <input id="edit-priority" name="priority" type="number" min="0" max="9" step="1" value="${esc(job.priority ?? 5)}"></label>
      <label>Max attempts <input id="edit-attempts" name="max_attempts" type="number" min="1" max="100" value="${esc(job.retry.max_attempts)}"></label>
      <label>Timeout (s) <input id="edit-timeout" name="timeout_s" type="number" step="any" value="${esc(job.timeout_s)}"></label>
      <fieldset><legend title="at most this many of your runs with this key run at once, across the fleet (empty key: none)">Concurrency</legend>
        <label>Key <input id="edit-concurrency-key" name="concurrency_key" value="${esc(job.concurrency?.key || "")}"></label>
        <label>At once <input id="edit-concurrency-limit" name="concurrency_limit" type="number" min="1" max="100000" step="1"
          value="${esc(job.concurrency?.limit ?? "")}"></label></fieldset>
      <fieldset><legend title="at most this many starts per window of your runs with this key (empty key: none)">Rate limit</legend>
        <label>Key <input id="edit-rate-key" name="rate_key" value="${esc(job.rate_limit?.key || "")}"></label>
        <label>Starts <input id="edit-rate-limit" name="rate_limit" type="number" min="1" step="1" value="${esc(job.rate_limit?.limit ?? "")}"></label>
        <label>Per (s) <input id="edit-rate-window" name="rate_window_s" type="number" min="0.001" step="any"
          value="${esc(job.rate_limit?.window_s ?? "")}"></label></fieldset>
      <label>Params (JSON) <textarea id="edit-params" name="params" rows="2">${esc(JSON.stringify(job.params))}</textarea></label>
      <label title="empty with no events: the tenant's setting">Notify URL <input id="edit-notify-url" name="notify_url" size="40"
        placeholder="the tenant's setting" value="${esc(job.notify?.url || "")}"></label>
      <label title="comma-separated: failure, recovery, late, dead_letter; none: no notice">Notify on <input id="edit-notify-on"
        name="notify_on" placeholder="failure,recovery" value="${esc(job.notify ? job.notify.on.join(",") || "none" : "")}"></label>
      ${job.cron ? `<label>Pause after failures <input id="edit-pause-after" name="pause_after_failures" type="number" min="1" max="1000"
        placeholder="never" value="${esc(job.pause_after_failures ?? "")}"></label>` : ""}
      <button id="edit-plan" type="submit" data-plan="true">Plan</button> <button id="edit-save" type="submit">Save</button>
    </form><div id="edit-result" role="status"></div></details>`;
}

// The fields of the edit form that differ from the job as shown, as a PATCH body.
function editChanges(form, job) {
  const body = {};
  const value = (name) => form.elements[name]?.value;
  if (form.elements.cron && value("cron") !== job.cron) body.cron = value("cron");
  if (form.elements.run_at && value("run_at") !== (job.run_at || "")) body.run_at = value("run_at");
  if (value("timezone") !== job.timezone) body.timezone = value("timezone");
  if (value("name") !== (job.name || "")) body.name = value("name") || null;
  if (value("overlap") !== job.overlap) body.overlap = value("overlap");
  if (Number(value("priority")) !== (job.priority ?? 5)) body.priority = Number(value("priority"));
  if (Number(value("max_attempts")) !== job.retry.max_attempts) body.retry = { max_attempts: Number(value("max_attempts")) };
  if (Number(value("timeout_s")) !== job.timeout_s) body.timeout_s = Number(value("timeout_s"));
  // A limit is replaced as a whole; an empty key removes it (null). A half-filled one is sent as
  // it is, and the refusal names the missing field.
  const concurrency = value("concurrency_key")
    ? { key: value("concurrency_key"), limit: Number(value("concurrency_limit")) } : null;
  const was = job.concurrency ?? null;
  if (concurrency?.key !== was?.key || concurrency?.limit !== was?.limit) body.concurrency = concurrency;
  const rate = value("rate_key")
    ? { key: value("rate_key"), limit: Number(value("rate_limit")), window_s: Number(value("rate_window_s")) } : null;
  const rated = job.rate_limit ?? null;
  if (rate?.key !== rated?.key || rate?.limit !== rated?.limit || rate?.window_s !== rated?.window_s) body.rate_limit = rate;
  const params = JSON.parse(value("params") || "{}"); // a SyntaxError is shown, naming params
  if (JSON.stringify(params) !== JSON.stringify(job.params)) body.params = params;
  const url = value("notify_url").trim();
  const onText = value("notify_on").trim();
  if (url !== (job.notify?.url || "") || onText !== (job.notify ? job.notify.on.join(",") || "none" : "")) {
    const on = onText === "none" ? [] : onText.split(",").map((e) => e.trim()).filter(Boolean);
    body.notify = !url && !onText ? null : { url: url || null, ...(onText ? { on } : {}) }; // null: the tenant's setting
  }
  if (form.elements.pause_after_failures) {
    const pause = value("pause_after_failures") === "" ? null : Number(value("pause_after_failures"));
    if (pause !== (job.pause_after_failures ?? null)) body.pause_after_failures = pause;
  }
  return body;
}

function diffList(kind, runs, zone) {
  const items = runs.map((r) => `<li>${when(r.at, zone)}${r.labels.map((label) =>
    `<span class="dst" title="${esc(r.note)}">${esc(label)}</span>`).join("")}</li>`).join("");
  return `<div class="diff-${kind}"><h3>${kind} (${runs.length})</h3><ul>${items || "<li>–</li>"}</ul></div>`;
}

function editResult(answer) {
  const zone = answer.job.timezone;
  const verdict = answer.dry_run ? `Plan: would become version ${esc(answer.job.version)}; nothing written.`
    : `Saved: version ${esc(answer.job.version)}.`;
  return `<p id="edit-verdict">${verdict} ${esc(answer.cancelled_executions)} unstarted runs ${answer.dry_run ? "would be " : ""}cancelled,
    ${esc(answer.written_executions)} ${answer.dry_run ? "would be " : ""}written.</p>
    ${diffList("removed", answer.removed, zone)}${diffList("kept", answer.kept, zone)}${diffList("added", answer.added, zone)}`;
}

function bounded(job) {
  const parts = [];
  if (job.start_at) parts.push(`from ${when(job.start_at, job.timezone)}`);
  if (job.end_at) parts.push(`until ${when(job.end_at, job.timezone)}`);
  if (job.max_runs) parts.push(`at most ${esc(job.max_runs)} runs (${esc(job.runs_written)} written)`);
  return parts.join(", ");
}

function overrunFlag(job) {
  return job.overrun && job.overrun.warning
    ? ' <span class="error" title="recent runs take most of the interval">⚠ overrun</span>' : "";
}

function overrunText(o) {
  const figures = `p95 ${seconds(o.p95_s)} of a ${seconds(o.interval_s)} interval (${Math.round(o.ratio * 100)}%, ` +
    `warn at ${Math.round(o.fraction * 100)}%; ${esc(o.samples)} recent attempts)`;
  return o.warning ? `⚠ runs take most of the interval and will soon overlap: ${figures}` : figures;
}

async function executionView(id) {
  const e = await api("GET", `/v1/executions/${encodeURIComponent(id)}`);
  if (!zones[e.job_id]) remember(await api("GET", `/v1/jobs/${e.job_id}`));
  const zone = zones[e.job_id];
  const attempts = e.attempts.map((a) => `<tr class="attempt"><td>${esc(a.attempt)}</td><td>${badge(a.outcome)}</td>
    <td>${when(a.started_at, zone)}</td><td>${when(a.finished_at, zone)}</td><td>${seconds(a.duration_s)}</td>
    <td>${esc(a.worker || "")}</td><td>${a.error ? `<pre class="error">${esc(a.error)}</pre>` : ""}</td></tr>`);
  const redrives = (e.redrive_history || []).map((r) => `<tr class="redrive"><td>${when(r.redriven_at, zone)}</td>
    <td>${esc(r.redriven_by)}</td><td>${esc(r.attempts_before)}</td><td class="error">${esc(r.error_before || "")}</td></tr>`);
  return `<h1>Execution ${esc(e.id)}</h1>
    <dl><dt>job</dt><dd>${jobLink(e.job_id)} <span class="note">${esc(e.job_id)}</span></dd>
    <dt>status</dt><dd id="execution-status">${badge(e.status)} ${esc(e.reason || "")}${lateNote(e)}</dd>
    <dt>scheduled for</dt><dd>${when(e.scheduled_for, zone)}</dd><dt>first started</dt><dd>${when(e.first_started_at, zone)}</dd>
    <dt>start lag</dt><dd>${seconds(e.start_lag_s)}</dd><dt>finished</dt><dd>${when(e.finished_at, zone)}</dd>
    <dt>attempts</dt><dd>${esc(e.attempt)}</dd><dt>origin</dt><dd>${esc(e.origin)}</dd>
    <dt>redrives</dt><dd>${esc(e.redrives)}</dd><dt>job version</dt><dd id="execution-job-version">${esc(e.job_version || 1)}</dd>
    <dt>priority</dt><dd id="execution-priority">${esc(e.priority ?? 5)}</dd></dl>
    ${e.status === "failed" ? `<p id="execution-actions" data-id="${esc(e.id)}"><button data-action="redrive">Redrive</button></p>` : ""}
    ${CANCELLABLE.includes(e.status) ? `<p id="execution-actions" data-id="${esc(e.id)}">${e.status === "running" && e.cancel_requested
      ? '<span id="cancel-requested" class="note">cancel requested: the handler stops at its next heartbeat</span>'
      : '<button data-action="cancel">Cancel</button>'}</p>` : ""}
    ${redrives.length ? `<h2>Redrives</h2><div class="scroll"><table id="redrives"><thead><tr><th>When</th><th>By</th><th>Attempts before</th>
    <th>Error before</th></tr></thead><tbody>${redrives.join("")}</tbody></table></div>` : ""}
    <h2>Attempts</h2><div class="scroll"><table id="attempts"><thead><tr><th>#</th><th>Outcome</th><th>Started</th><th>Ended</th>
    <th>Duration</th><th>Worker</th><th>Error</th></tr></thead>
    <tbody>${attempts.join("") || '<tr><td colspan="7">No finished attempt yet.</td></tr>'}</tbody></table></div>`;
}

// Dead letters: this tenant's failed executions, filtered by task and error text (#/failed?task=..&error=..).
async function failedView(query) {
  const filters = new URLSearchParams(query || "");
  const params = new URLSearchParams({ limit: "100" });
  for (const key of ["task", "error", "job"]) if (filters.get(key)) params.set(key, filters.get(key));
  const page = await api("GET", `/v1/executions/failed?${params}`);
  await Promise.all([...new Set(page.items.map((e) => e.job_id))].map(jobName));
  const rows = page.items.map((e) => `<tr class="failed" data-id="${esc(e.id)}"><td><a href="#/executions/${esc(e.id)}">${esc(e.id.slice(0, 8))}</a>${origin(e)}</td>
    <td>${jobLink(e.job_id)}</td><td>${esc(e.task)}</td><td>${when(e.scheduled_for, zones[e.job_id])}</td><td>${when(e.finished_at, zones[e.job_id])}</td>
    <td>${esc(e.attempt)}</td><td>${esc(e.redrives)}</td><td class="error">${esc((e.last_error || "").split("\n").slice(-1)[0])}</td>
    <td><button data-action="redrive" data-id="${esc(e.id)}">Redrive</button></td></tr>`);
  return `<h1>Failed executions</h1>
    <form id="failed-filter"><input name="task" placeholder="task" value="${esc(filters.get("task") || "")}">
    <input name="error" placeholder="error contains" value="${esc(filters.get("error") || "")}"><button>Filter</button></form>
    <div class="scroll"><table id="failed"><thead><tr><th>Execution</th><th>Job</th><th>Task</th><th>Scheduled</th><th>Failed</th><th>Attempts</th>
    <th>Redrives</th><th>Last error</th><th></th></tr></thead>
    <tbody>${rows.join("") || '<tr><td colspan="9">No failed executions.</td></tr>'}</tbody></table></div>`;
}

async function overviewView() {
  const [o, forecast, late, stats, actions] = await Promise.all([api("GET", "/v1/overview"), api("GET", "/v1/forecast"),
    api("GET", "/v1/executions/late?limit=20"), api("GET", "/v1/stats/minutes?minutes=60"), api("GET", "/v1/actions?limit=20")]);
  await Promise.all([...new Set(late.items.map((e) => e.job_id))].map(jobName));
  const card = (label, value) => `<div class="card">${esc(label)}<b>${esc(value)}</b></div>`;
  const lag = o.start_lag;
  const statuses = Object.entries(o.runs_by_status).map(([status, n]) => `<tr><td>${badge(status)}</td><td>${esc(n)}</td></tr>`);
  const dueBars = Charts.bars("forecast-chart", "executions due next", forecast.windows.map((w) => ({
    label: w.window, title: `due within ${w.window}`, parts: [{ name: "due", value: w.due }] })));
  return `<h1>Operator view</h1><div class="cards" id="overview">
    ${card("queue depth", o.queue_depth)}${card("oldest due, waiting", seconds(o.oldest_due_age_s))}
    ${card("materialiser horizon", o.horizon_s == null ? "–" : `${(o.horizon_s / 3600).toFixed(2)} h`)}
    ${card("start lag p50", seconds(lag.p50_s))}${card("p90", seconds(lag.p90_s))}${card("p99", seconds(lag.p99_s))}
    ${card("max", seconds(lag.max_s))}</div>
    <h2>Your last hour, minute by minute</h2>${Charts.minuteCharts("tenant", stats)}
    <h2>Your runs of the last ${esc(Math.round(o.window_s / 60))} minutes by status (${esc(lag.started)} started)</h2>
    <div class="scroll"><table id="runs-by-status"><tbody>${statuses.join("") || '<tr><td>none</td></tr>'}</tbody></table></div>
    <h2>Due next (your executions not yet started)</h2><div class="cards" id="forecast">
    ${forecast.windows.map((w) => card(`within ${w.window}`, w.due)).join("")}</div>
    <figure><figcaption>Due within 1, 5, 15 and 60 minutes</figcaption>${dueBars}</figure>
    <h2>Late or missed in the last 24 hours</h2><div class="scroll"><table id="late-runs"><thead><tr><th>Scheduled</th><th>Status</th>
    <th>Late reason</th><th>Started</th><th>Job</th></tr></thead><tbody>${late.items.map((e) => `<tr class="link"
      data-href="#/executions/${esc(e.id)}"><td>${when(e.scheduled_for, zones[e.job_id])}</td>
      <td>${badge(e.status)}</td><td>${esc(e.late_reason)}</td><td>${when(e.first_started_at, zones[e.job_id])}</td>
      <td>${jobLink(e.job_id)}</td></tr>`).join("") || '<tr><td colspan="5">none: everything started on time</td></tr>'}
    </tbody></table></div>
    <h2>Bulk actions (by label selector or filter)</h2><div class="scroll"><table id="bulk-actions"><thead><tr><th>When</th>
    <th>Action</th><th>Selector</th><th>Jobs</th><th>Executions</th><th>By</th></tr></thead><tbody>${actions.items.map((a) =>
      `<tr class="bulk-action"><td>${when(a.at, "UTC")}</td><td>${esc(a.action)}</td><td>${esc(Object.entries(a.selector)
      .map(([k, v]) => `${k}=${v}`).join(",") || "–")}</td><td>${esc(a.jobs_count)}</td><td>${esc(a.executions_count)}</td>
      <td>${esc(a.actor)}</td></tr>`).join("") || '<tr><td colspan="6">none yet</td></tr>'}</tbody></table></div>`;
}

// The tenant's notification setting (edit, remove, send a test notice) and its newest notices (#/notifications).
async function notificationsView() {
  const [setting, sent] = await Promise.all([api("GET", "/v1/notifications"), api("GET", "/v1/notifications/sent?limit=50")]);
  await Promise.all([...new Set(sent.items.map((n) => n.job_id))].map(jobName));
  const chosen = setting.url ? setting.on : NOTIFY_DEFAULT;
  const checks = NOTIFY_EVENTS.map((e) => `<label><input type="checkbox" name="on" value="${e}"${chosen.includes(e) ? " checked" : ""}>
    ${esc(e)}</label>`).join(" ");
  const rows = sent.items.map((n) => `<tr class="notice" data-id="${esc(n.id)}"><td>${when(n.created_at, "UTC")}</td><td>${esc(n.event)}</td>
    <td>${jobLink(n.job_id)}</td><td><a href="#/executions/${esc(n.execution_id)}">${esc(n.execution_id.slice(0, 8))}</a></td>
    <td>${badge(n.status)}</td><td>${esc(n.attempts)}</td><td>${esc(n.last_status ?? "–")}</td><td class="error">${esc(n.last_error || "")}</td></tr>`);
  return `<h1>Notifications</h1>
    <p>Your jobs POST a notice here on the events checked, unless a job has its own setting (it replaces this one).</p>
    <form id="notify-form"><label>URL <input id="notify-url" name="url" size="60" placeholder="https://hooks.example.com/schedulerd"
      value="${esc(setting.url || "")}"></label><fieldset><legend>Events</legend>${checks}</fieldset>
      <button id="notify-save" type="submit">Save</button> <button id="notify-test" type="button" data-action="notify-test">Send test</button>
      <button id="notify-remove" type="button" data-action="notify-remove">Remove</button></form>
    <p id="notify-result" role="status"></p>
    <h2>Newest notices</h2><div class="scroll"><table id="notices"><thead><tr><th>Recorded</th><th>Event</th><th>Job</th><th>Execution</th>
    <th>Delivery</th><th>Tries</th><th>Last answer</th><th>Last error</th></tr></thead>
    <tbody>${rows.join("") || '<tr><td colspan="8">No notice yet.</td></tr>'}</tbody></table></div>`;
}

const NOTIFY_EVENTS = ["failure", "recovery", "late", "dead_letter"];
const NOTIFY_DEFAULT = ["failure", "recovery"];

async function notifyAction(action) {
  const result = $("notify-result");
  try {
    if (action === "save") {
      const on = [...document.querySelectorAll('#notify-form input[name="on"]:checked')].map((input) => input.value);
      await api("PUT", "/v1/notifications", { url: $("notify-url").value.trim(), on });
      result.innerHTML = '<span id="notify-saved">Saved.</span>';
    } else if (action === "notify-remove") {
      await api("DELETE", "/v1/notifications");
      $("notify-url").value = "";
      result.innerHTML = '<span id="notify-saved">Removed: your jobs without a setting of their own send no notice.</span>';
    } else {
      const url = $("notify-url").value.trim();
      const answer = await api("POST", "/v1/notifications/test", url ? { url } : {});
      result.innerHTML = answer.delivered
        ? `<span id="notify-test-result" class="ok">Delivered: the receiver answered ${esc(answer.status)}.</span>`
        : `<span id="notify-test-result" class="error">Not delivered: ${esc(answer.error)}</span>`;
    }
  } catch (error) {
    result.innerHTML = `<span id="notify-test-result" class="error">${esc(error.message)}</span>`;
  }
}

// Whether the page holds something the user is writing that a refresh would wipe.
function inUse(automatic) {
  if (automatic === true && $("notify-form")) return true; // the notifications page changes when its form acts, not under it
  if (document.activeElement?.matches?.("#failed-filter input, #run-filter select, #job-filter input, #job-filter select")) return true;
  return Boolean($("job-edit")?.open && location.hash.startsWith("#/jobs/")); // an edit being written or its answer
}

let renders = 0; // the newest render's number: an older one still loading never writes over it

async function render(automatic) {
  if (!sessionStorage.getItem(TOKEN_KEY)) return showLogin();
  const [route, query] = (location.hash || "#/jobs").split("?");
  const [, kind, id] = route.split("/");
  if (inUse(automatic)) return;
  const number = ++renders;
  try {
    const html = kind === "jobs" && id ? await jobView(id, query) : kind === "executions" && id ? await executionView(id)
      : kind === "overview" ? await overviewView() : kind === "failed" ? await failedView(query)
      : kind === "notifications" ? await notificationsView() : await jobsView(query);
    // judged again after loading: another render may have drawn this page meanwhile and the user begun writing into it
    if (number !== renders) return;
    if ($("view").dataset.route === route && (inUse(automatic) || $("notify-form")?.dataset.edited)) return;
    $("view").innerHTML = html;
    $("view").dataset.route = route;
    $("new-job").hidden = !(kind === "jobs" && !id);
    $("refreshed").textContent = `refreshed ${formatIn(new Date().toISOString(), "UTC")}`;
  } catch (error) {
    if (error instanceof Unauthorized) return showLogin(error.message);
    if (number !== renders) return;
    $("view").innerHTML = `<p class="error">${esc(error.message)}</p>`;
    $("view").dataset.route = "";
  }
}

async function start() {
  if (!sessionStorage.getItem(TOKEN_KEY)) return showLogin(); // nothing typed yet: no error to show
  try {
    const me = await api("GET", "/v1/me");
    $("tenant").textContent = `tenant ${me.tenant}`;
    const tasks = await api("GET", "/v1/tasks");
    const harmless = HARMLESS_TASKS.find((t) => tasks.tasks.includes(t)) || tasks.tasks.find((t) => t !== "fail");
    $("job-task").innerHTML = tasks.tasks.map((t) => `<option${t === harmless ? " selected" : ""}>${esc(t)}</option>`).join("");
  } catch (error) {
    return showLogin(error.message);
  }
  $("login").hidden = true;
  $("nav").hidden = false;
  await render();
}

$("login-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  sessionStorage.setItem(TOKEN_KEY, $("token").value.trim());
  $("token").value = "";
  await start();
});

$("logout").addEventListener("click", () => showLogin());

$("job-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const mode = document.querySelector('input[name="when"]:checked').value;
  const body = { task: $("job-task").value };
  if ($("job-name").value) body.name = $("job-name").value;
  if ($("job-overlap").value !== "allow") body.overlap = $("job-overlap").value;
  try {
    body.params = JSON.parse($("job-params").value || "{}");
  } catch (error) {
    $("job-result").innerHTML = `<span class="error">params: ${esc(error.message)}</span>`;
    return;
  }
  if (mode === "at") body.run_at = $("job-at").value;
  if (mode === "cron") {
    body.cron = $("job-cron").value;
    body.timezone = $("job-zone").value || Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
  }
  try {
    const created = await api("POST", "/v1/jobs", body);
    const zone = created.job.timezone;
    $("job-result").innerHTML = `Created <a id="created-job" href="#/jobs/${esc(created.job.id)}">${esc(created.job.id)}</a>;
      next runs: ${created.next_runs.map((t) => when(t, zone)).join(" ") || "–"}`;
    await render();
  } catch (error) {
    $("job-result").innerHTML = `<span class="error">${esc(error.message)}</span>`;
  }
});

$("view").addEventListener("input", (event) => {
  const form = event.target.closest("#notify-form");
  if (form) form.dataset.edited = "true"; // a render of this page no longer draws over it
});

$("view").addEventListener("change", (event) => {
  if (event.target.id !== "run-status") return;
  const [route] = location.hash.split("?");
  const filters = new URLSearchParams();
  if (event.target.value) filters.set("status", event.target.value);
  event.target.blur();
  location.hash = `${route}${filters.toString() ? `?${filters}` : ""}`;
});

$("view").addEventListener("submit", async (event) => {
  if (event.target.id === "run-filter") return event.preventDefault(); // the select acts on change
  if (event.target.id === "notify-form") {
    event.preventDefault();
    return notifyAction("save");
  }
  if (event.target.id === "edit-form") {
    event.preventDefault();
    const form = event.target;
    const plan = event.submitter?.dataset.plan === "true";
    try {
      const job = await api("GET", `/v1/jobs/${encodeURIComponent(form.dataset.id)}`);
      const body = editChanges(form, job);
      const path = `/v1/jobs/${encodeURIComponent(form.dataset.id)}${plan ? "?dry_run=true" : ""}`;
      const answer = await api("PATCH", path, body, { "If-Match": form.dataset.version });
      $("edit-result").innerHTML = editResult(answer);
      if (!plan) form.dataset.version = String(answer.job.version);
    } catch (error) {
      $("edit-result").innerHTML = `<p class="error" id="edit-error">${esc(error instanceof SyntaxError ? `params: ${error.message}` : error.message)}</p>`;
    }
    return;
  }
  if (event.target.id !== "failed-filter" && event.target.id !== "job-filter") return;
  event.preventDefault();
  const filters = new URLSearchParams();
  for (const [key, value] of new FormData(event.target)) if (value) filters.set(key, value.trim());
  document.activeElement?.blur();
  location.hash = `${event.target.id === "job-filter" ? "#/jobs" : "#/failed"}?${filters}`;
});

$("view").addEventListener("click", async (event) => {
  const action = event.target.dataset?.action;
  if (!action) {
    // Rows link by data-href: the Content-Security-Policy allows no inline handlers.
    const row = event.target.closest?.("tr[data-href]");
    if (row && !event.target.closest("a, button")) location.hash = row.dataset.href;
    return;
  }
  if (action === "notify-test" || action === "notify-remove") return notifyAction(action);
  if (action === "redrive" || action === "cancel") {
    const execution = event.target.dataset.id || $("execution-actions").dataset.id;
    if (action === "cancel" && !confirm("Cancel this execution? A running one stops at its next heartbeat; none is retried.")) return;
    try {
      await api("POST", `/v1/executions/${execution}/${action}`);
    } catch (error) {
      alert(error.message);
    }
    return render();
  }
  const id = $("job-actions").dataset.id;
  if (action === "delete" && !confirm("Delete this job? Its history stays.")) return;
  let body;
  if (action === "pause") {
    const note = prompt("Why pause this job? (the note is shown until it is resumed)", "");
    if (note === null) return;
    body = note ? { note } : undefined;
  }
  try {
    await api(action === "delete" ? "DELETE" : "POST", action === "delete" ? `/v1/jobs/${id}` : `/v1/jobs/${id}/${action}`, body);
  } catch (error) {
    alert(error.message);
  }
  await render();
});

window.addEventListener("hashchange", () => render());
setInterval(() => { if (sessionStorage.getItem(TOKEN_KEY)) render(true); }, REFRESH_MS);
start();
