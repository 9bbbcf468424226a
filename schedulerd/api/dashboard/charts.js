// SVG charts drawn by the page itself (no library, no CDN): lines, stacked bars and a strip of runs.
// Every mark carries its figures in data-* attributes and a <title> (the tooltip), so tests and
// screen readers read numbers, not pixels. Used by app.js (tenant dashboard) and ops.js ([ops] page).
"use strict";

const Charts = (() => {
  const W = 600, H = 160, PAD = { left: 44, right: 8, top: 10, bottom: 22 };
  const COLOURS = { p50: "#2271b1", p99: "#d63638", succeeded: "#68de7c", failed: "#f86368", other: "#c3c4c7",
                    running: "#72aee6", queued: "#f0c33c", pending: "#f0c33c", skipped: "#a7aaad", cancelled: "#8c8f94",
                    due: "#2271b1" };
  const PALETTE = ["#2271b1", "#d63638", "#00a32a", "#dba617", "#8c5fc7", "#e26f56", "#1d8a99", "#646970"];
  const esc = (v) => String(v ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
  const round = (v) => Math.round(v * 10) / 10;
  const fmtS = (s) => (s == null ? "–" : s < 1 ? `${(s * 1000).toFixed(0)} ms` : `${s.toFixed(2)} s`);
  const hhmm = (iso) => new Date(iso).toISOString().slice(11, 16);
  const hhmmss = (iso) => new Date(iso).toISOString().slice(11, 19);

  // A nice upper bound for an axis: 1, 2 or 5 times a power of ten, at least `top`.
  function ceiling(top) {
    if (!(top > 0)) return 1;
    const power = 10 ** Math.floor(Math.log10(top));
    return [1, 2, 5, 10].map((m) => m * power).find((v) => v >= top);
  }

  function frame(id, label, top, unit, body, xLabels) {
    const plotH = H - PAD.top - PAD.bottom;
    const ticks = [0, top / 2, top].map((v) => {
      const y = round(PAD.top + plotH - (v / top) * plotH);
      return `<line class="grid" x1="${PAD.left}" x2="${W - PAD.right}" y1="${y}" y2="${y}"></line>` +
        `<text class="axis" x="${PAD.left - 4}" y="${y + 4}" text-anchor="end">${esc(unit(v))}</text>`;
    }).join("");
    const xs = xLabels.map(([x, text]) => `<text class="axis" x="${round(x)}" y="${H - 6}" text-anchor="middle">${esc(text)}</text>`).join("");
    return `<svg id="${esc(id)}" class="chart" viewBox="0 0 ${W} ${H}" role="img" aria-label="${esc(label)}"
      data-max="${esc(top)}"><title>${esc(label)}</title>${ticks}${xs}${body}</svg>`;
  }

  // Every few labels along x, so they never overlap at 400 px.
  function xLabels(items, xOf, text) {
    const every = Math.max(1, Math.ceil(items.length / 6));
    return items.flatMap((item, i) => (i % every === 0 ? [[xOf(i), text(item)]] : []));
  }

  // series: [{name, values: [number|null], label}] over the same x (points[i].minute).
  function lines(id, label, minutes, series, unit = fmtS) {
    const plotW = W - PAD.left - PAD.right, plotH = H - PAD.top - PAD.bottom;
    const top = ceiling(Math.max(0, ...series.flatMap((s) => s.values.filter((v) => v != null))));
    const xOf = (i) => PAD.left + (minutes.length < 2 ? plotW / 2 : (i / (minutes.length - 1)) * plotW);
    const yOf = (v) => PAD.top + plotH - (v / top) * plotH;
    const body = series.map((s) => {
      const points = s.values.map((v, i) => (v == null ? null : [round(xOf(i)), round(yOf(v)), v, i])).filter(Boolean);
      const path = points.map(([x, y]) => `${x},${y}`).join(" ");
      const dots = points.map(([x, y, v, i]) => `<circle class="point" cx="${x}" cy="${y}" r="2.5" fill="${COLOURS[s.name]}"
        data-series="${esc(s.name)}" data-minute="${esc(new Date(minutes[i]).toISOString())}" data-value="${esc(v)}"><title>${esc(hhmm(minutes[i]))} UTC ${esc(s.label)} ${esc(unit(v))}</title></circle>`);
      return `<g class="series" data-series="${esc(s.name)}"><polyline fill="none" stroke="${COLOURS[s.name]}" stroke-width="1.5"
        points="${path}"></polyline>${dots.join("")}</g>`;
    }).join("");
    const legend = series.map((s, i) => `<text class="legend" x="${PAD.left + 8 + i * 70}" y="${PAD.top + 8}"
      fill="${COLOURS[s.name]}">${esc(s.label)}</text>`).join("");
    return frame(id, label, top, unit, body + legend, xLabels(minutes, xOf, hhmm));
  }

  // items: [{label, title, parts: [{name, value}]}]: one stacked bar per item.
  function bars(id, label, items, unit = (v) => String(Math.round(v))) {
    const plotW = W - PAD.left - PAD.right, plotH = H - PAD.top - PAD.bottom;
    const totals = items.map((item) => item.parts.reduce((sum, p) => sum + p.value, 0));
    const top = ceiling(Math.max(0, ...totals));
    const slot = plotW / Math.max(1, items.length), width = Math.max(1, slot * 0.8);
    const body = items.map((item, i) => {
      let y = PAD.top + plotH;
      const x = round(PAD.left + i * slot + (slot - width) / 2);
      const rects = item.parts.map((p, j) => {
        const h = (p.value / top) * plotH;
        y -= h;
        return p.value ? `<rect class="part" x="${x}" y="${round(y)}" width="${round(width)}" height="${round(h)}"
          fill="${COLOURS[p.name] || PALETTE[j % PALETTE.length]}" data-part="${esc(p.name)}" data-value="${esc(p.value)}"></rect>` : "";
      }).join("");
      const title = `${item.title || item.label}: ${item.parts.map((p) => `${p.value} ${p.name}`).join(", ")}`;
      return `<g class="bar" data-label="${esc(item.label)}" data-value="${esc(totals[i])}"><title>${esc(title)}</title>
        <rect class="hit" x="${x}" y="${PAD.top}" width="${round(width)}" height="${plotH}" fill="transparent"></rect>${rects}</g>`;
    }).join("");
    return frame(id, label, top, unit, body, xLabels(items, (i) => PAD.left + i * slot + slot / 2, (item) => item.label));
  }

  // runs: newest first, as the API lists them; drawn oldest left. Height = duration, colour = status.
  function strip(id, label, runs) {
    const ordered = [...runs].reverse();
    const plotW = W - PAD.left - PAD.right, plotH = H - PAD.top - PAD.bottom;
    const top = ceiling(Math.max(0, ...ordered.map((r) => r.duration_s || 0)));
    const slot = plotW / Math.max(1, ordered.length), width = Math.max(1, slot - 1);
    const body = ordered.map((r, i) => {
      const h = Math.max(3, ((r.duration_s || 0) / top) * plotH); // a run with no duration still shows its colour
      const x = round(PAD.left + i * slot);
      return `<a href="#/executions/${esc(r.id)}"><rect class="run" x="${x}" y="${round(PAD.top + plotH - h)}" width="${round(width)}"
        height="${round(h)}" fill="${COLOURS[r.status] || COLOURS.other}" data-id="${esc(r.id)}" data-status="${esc(r.status)}"
        data-duration="${esc(r.duration_s ?? "")}"><title>${esc(hhmmss(r.scheduled_for))} UTC ${esc(r.status)}${
        r.duration_s == null ? "" : ` in ${esc(fmtS(r.duration_s))}`}</title></rect></a>`;
    }).join("");
    return frame(id, label, top, fmtS, body, xLabels(ordered, (i) => PAD.left + i * slot + slot / 2, (r) => hhmmss(r.scheduled_for)));
  }

  // The per-minute series of /v1/stats/minutes or the [ops] /stats/minutes, as two charts.
  function minuteCharts(prefix, stats) {
    const minutes = stats.minutes.map((m) => m.minute);
    const lag = lines(`${prefix}-lag`, "start lag per minute (p50, p99)", minutes, [
      { name: "p50", label: "p50", values: stats.minutes.map((m) => m.lag_p50_s) },
      { name: "p99", label: "p99", values: stats.minutes.map((m) => m.lag_p99_s) },
    ]);
    const counts = bars(`${prefix}-per-minute`, "executions per minute by outcome", stats.minutes.map((m) => ({
      label: hhmm(m.minute), title: `${hhmm(m.minute)} UTC`,
      parts: [{ name: "succeeded", value: m.succeeded }, { name: "failed", value: m.failed },
              { name: "other", value: m.scheduled - m.succeeded - m.failed }],
    })));
    return `<div class="charts"><figure><figcaption>Start lag per minute, p50 and p99 (last ${stats.minutes.length} min)</figcaption>${lag}</figure>
      <figure><figcaption>Executions per minute: succeeded, failed, other</figcaption>${counts}</figure></div>`;
  }

  return { lines, bars, strip, minuteCharts, esc, fmtS };
})();
