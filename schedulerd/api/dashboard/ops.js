// The [ops] listener's page: the fleet as `schedulerd status` shows it (/fleet: replicas, queue,
// horizon, start lag, late runs and parked executions by reason, tenant quotas), the last hour
// minute by minute (/stats/minutes) and the due-next forecast by tenant (/forecast), all from the
// same listener (no token: [ops].host is private). Re-rendered every REFRESH_MS.
"use strict";

const REFRESH_MS = 5000;
const esc = (v) => Charts.esc(v);

async function get(path) {
  const response = await fetch(path);
  if (!response.ok) throw new Error(`${path}: ${response.status} ${response.statusText}`);
  return response.json();
}

function span(s) {
  if (s == null) return "-";
  const a = Math.abs(s);
  const text = a < 1 ? `${Math.round(a * 1000)} ms` : a < 120 ? `${a.toFixed(a < 10 ? 1 : 0)} s`
    : a < 7200 ? `${Math.round(a / 60)} min` : `${(a / 3600).toFixed(1)} h`;
  return s < 0 ? `-${text}` : text;
}

function counts(id, byKey) {
  const entries = Object.entries(byKey || {}).filter(([, n]) => n);
  return `<span id="${esc(id)}">${entries.length ? entries.map(([k, n]) => `${esc(k)} <b>${esc(n.toLocaleString())}</b>`).join(", ") : "none"}</span>`;
}

function fleetView(fleet) {
  const horizon = fleet.materialiser_horizon_s;
  const lag = fleet.start_lag_last_5m_s;
  const replicas = fleet.replicas.map((r) => `<tr class="replica" data-worker="${esc(r.worker_id)}"><td>${esc(r.worker_id)}</td>
    <td>${esc(r.roles.join(", "))}</td><td>${esc(r.version)}</td><td>${esc(span(r.up_s))}</td><td>${esc(span(r.seen_s_ago))} ago</td></tr>`);
  const quotas = fleet.tenant_quotas;
  const quotaRows = [
    ...Object.entries(quotas.runtime).map(([t, n]) => `<tr><td>${esc(t)}</td><td>${esc(n)}</td><td>runtime</td></tr>`),
    ...Object.entries(quotas.config).filter(([t]) => !(t in quotas.runtime))
      .map(([t, n]) => `<tr><td>${esc(t)}</td><td>${esc(n)}</td><td>config</td></tr>`),
  ];
  return `<h1>Fleet</h1>
    <h2>Replicas seen in the last minute (${fleet.replicas.length})</h2>
    <div class="scroll"><table id="replicas"><thead><tr><th>Worker</th><th>Roles</th><th>Version</th><th>Up</th><th>Last report</th></tr></thead>
    <tbody>${replicas.join("") || `<tr><td colspan="5">none: no daemon has reported in the last minute</td></tr>`}</tbody></table></div>
    <h2>Now</h2>
    <div class="cards">
      <div class="card">queue depth (Redis)<b id="queue-depth">${fleet.queue_depth == null ? "unknown" : esc(fleet.queue_depth.toLocaleString())}</b></div>
      <div class="card">oldest queued, due<b id="oldest-queued">${fleet.oldest_queued_due_at ? `${esc(span(fleet.oldest_queued_due_age_s))} ago` : "none"}</b></div>
      <div class="card">oldest pending, due<b id="oldest-pending">${fleet.oldest_pending_due_at ? `${esc(span(fleet.oldest_pending_due_age_s))} ago` : "none"}</b></div>
      <div class="card">materialiser horizon<b id="horizon" class="${horizon != null && horizon < 0 ? "late" : ""}">${
        horizon == null ? "no cron jobs" : horizon >= 0 ? `${esc(span(horizon))} ahead` : `behind by ${esc(span(-horizon))}`}</b></div>
      <div class="card">start lag p99, last 5 min<b id="lag-p99">${esc(span(lag.p99))}</b></div>
      <div class="card">started, last 5 min<b id="started">${esc(fleet.started_last_5m.toLocaleString())}</b></div>
      <div class="card">failed, last hour<b id="failed">${esc(fleet.failed_last_hour.toLocaleString())}</b></div>
    </div>
    <dl>
      <dt>parked now, by reason</dt><dd>${counts("parked-by-reason", fleet.parked_by_reason)}</dd>
      <dt>late in the last hour, by reason</dt><dd>${counts("late-by-reason", fleet.late_last_hour_by_reason)}</dd>
      <dt>last hour, by status</dt><dd>${counts("by-status", fleet.last_hour_by_status)}</dd>
      <dt>due next</dt><dd>${counts("due-next", fleet.due_next)}</dd>
    </dl>
    <h2>Tenant in-flight quotas</h2>
    <p class="note">every other tenant: ${quotas.default ? esc(quotas.default) : "no quota"}; set one at runtime with <code>schedulerd tenant quota NAME --in-flight N</code></p>
    ${quotaRows.length ? `<div class="scroll"><table id="tenant-quotas"><thead><tr><th>Tenant</th><th>In flight</th><th>Set in</th></tr></thead>
    <tbody>${quotaRows.join("")}</tbody></table></div>` : ""}`;
}

async function render() {
  const view = document.getElementById("view");
  try {
    const [fleet, stats, forecast] = await Promise.all([get("/fleet"), get("/stats/minutes?minutes=60"), get("/forecast")]);
    const windows = Object.keys(forecast.total);
    const tenants = Object.keys(forecast.by_tenant);
    // One bar per window, stacked by tenant (the top tenants, the rest as _other).
    const due = Charts.bars("fleet-forecast", "executions due next, by tenant", windows.map((w) => ({
      label: w, title: `due within ${w} (total ${forecast.total[w]})`,
      parts: tenants.map((t) => ({ name: t, value: forecast.by_tenant[t][w] })),
    })));
    const rows = tenants.map((t) => `<tr class="tenant" data-tenant="${esc(t)}"><td>${esc(t)}</td>${
      windows.map((w) => `<td>${esc(forecast.by_tenant[t][w])}</td>`).join("")}</tr>`);
    view.innerHTML = `${fleetView(fleet)}<h2>The last hour, minute by minute</h2>${Charts.minuteCharts("fleet", stats)}
      <h2>Due next</h2><figure><figcaption>Executions not yet started due within each window, all tenants</figcaption>${due}</figure>
      <div class="scroll"><table id="forecast-by-tenant"><thead><tr><th>Tenant</th>${windows.map((w) => `<th>${esc(w)}</th>`).join("")}</tr></thead>
      <tbody>${rows.join("") || `<tr><td colspan="${windows.length + 1}">nothing due</td></tr>`}</tbody></table></div>`;
    document.getElementById("refreshed").textContent = `refreshed ${new Date().toISOString().slice(0, 19).replace("T", " ")} UTC`;
  } catch (error) {
    view.innerHTML = `<p class="error">${esc(error.message)}</p>`;
  }
}

render();
setInterval(render, REFRESH_MS);
