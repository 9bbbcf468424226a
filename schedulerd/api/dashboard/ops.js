// The [ops] listener's page: the whole fleet's last hour (start lag p50/p99 and executions per
// minute) and the due-next forecast by tenant, from /stats/minutes and /forecast on the same
// listener (no token: [ops].host is private). Re-rendered every REFRESH_MS.
"use strict";

const REFRESH_MS = 5000;

async function get(path) {
  const response = await fetch(path);
  if (!response.ok) throw new Error(`${path}: ${response.status} ${response.statusText}`);
  return response.json();
}

async function render() {
  const view = document.getElementById("view");
  try {
    const [stats, forecast] = await Promise.all([get("/stats/minutes?minutes=60"), get("/forecast")]);
    const windows = Object.keys(forecast.total);
    const tenants = Object.keys(forecast.by_tenant);
    // One bar per window, stacked by tenant (the top tenants, the rest as _other).
    const due = Charts.bars("fleet-forecast", "executions due next, by tenant", windows.map((w) => ({
      label: w, title: `due within ${w} (total ${forecast.total[w]})`,
      parts: tenants.map((t) => ({ name: t, value: forecast.by_tenant[t][w] })),
    })));
    const rows = tenants.map((t) => `<tr class="tenant" data-tenant="${Charts.esc(t)}"><td>${Charts.esc(t)}</td>${
      windows.map((w) => `<td>${Charts.esc(forecast.by_tenant[t][w])}</td>`).join("")}</tr>`);
    view.innerHTML = `<h1>Fleet</h1><h2>The last hour, minute by minute</h2>${Charts.minuteCharts("fleet", stats)}
      <h2>Due next</h2><figure><figcaption>Executions not yet started due within each window, all tenants</figcaption>${due}</figure>
      <div class="scroll"><table id="forecast-by-tenant"><thead><tr><th>Tenant</th>${windows.map((w) => `<th>${Charts.esc(w)}</th>`).join("")}</tr></thead>
      <tbody>${rows.join("") || `<tr><td colspan="${windows.length + 1}">nothing due</td></tr>`}</tbody></table></div>`;
    document.getElementById("refreshed").textContent = `refreshed ${new Date().toISOString().slice(0, 19).replace("T", " ")} UTC`;
  } catch (error) {
    view.innerHTML = `<p class="error">${Charts.esc(error.message)}</p>`;
  }
}

render();
setInterval(render, REFRESH_MS);
