// The API reference, rendered here from /openapi.json: no third-party script or stylesheet (the
// Content-Security-Policy allows only this origin), unlike the usual CDN-hosted Swagger UI.
"use strict";

const esc = (text) => String(text ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
const refName = (schema) => (schema?.$ref || "").split("/").pop();

function typeOf(schema, schemas) {
  if (!schema) return "";
  if (schema.$ref) return `<a href="#schema-${esc(refName(schema))}">${esc(refName(schema))}</a>`;
  if (schema.anyOf) return schema.anyOf.map((s) => typeOf(s, schemas)).join(" | ");
  if (schema.type === "array") return `${typeOf(schema.items, schemas)}[]`;
  if (schema.enum) return schema.enum.map((v) => esc(JSON.stringify(v))).join(" | ");
  return esc(schema.type || schema.format || "any");
}

function fields(schema, schemas) {
  const props = Object.entries(schema.properties || {});
  if (!props.length) return "";
  const required = new Set(schema.required || []);
  return `<table><thead><tr><th>field</th><th>type</th><th>description</th></tr></thead><tbody>${props.map(([name, p]) =>
    `<tr><td><code>${esc(name)}</code>${required.has(name) ? " *" : ""}</td><td>${typeOf(p, schemas)}</td>
     <td>${esc(p.description || p.title || "")}</td></tr>`).join("")}</tbody></table>`;
}

async function main() {
  const doc = await (await fetch("/openapi.json")).json();
  const schemas = doc.components?.schemas || {};
  const operations = Object.entries(doc.paths).flatMap(([path, methods]) =>
    Object.entries(methods).map(([method, op]) => ({ path, method: method.toUpperCase(), op })));
  const ops = operations.map(({ path, method, op }) => {
    const params = (op.parameters || []).map((p) =>
      `<tr><td><code>${esc(p.name)}</code>${p.required ? " *" : ""}</td><td>${esc(p.in)}</td><td>${typeOf(p.schema, schemas)}</td>
       <td>${esc(p.description || "")}</td></tr>`).join("");
    const body = op.requestBody?.content?.["application/json"]?.schema;
    const responses = Object.entries(op.responses || {}).map(([code, r]) =>
      `<li><code>${esc(code)}</code> ${esc(r.description || "")} ${typeOf(r.content?.["application/json"]?.schema, schemas)}</li>`).join("");
    return `<section class="operation"><h2><code>${esc(method)} ${esc(path)}</code></h2><p>${esc(op.summary || "")}</p>
      ${params ? `<table><thead><tr><th>parameter</th><th>in</th><th>type</th><th>description</th></tr></thead><tbody>${params}</tbody></table>` : ""}
      ${body ? `<p>body: ${typeOf(body, schemas)}</p>` : ""}<ul>${responses}</ul></section>`;
  });
  const models = Object.entries(schemas).map(([name, schema]) =>
    `<section id="schema-${esc(name)}"><h3>${esc(name)}</h3><p>${esc(schema.description || "")}</p>${fields(schema, schemas)}</section>`);
  document.getElementById("docs").innerHTML = `<h1>${esc(doc.info.title)} API ${esc(doc.info.version)}</h1>
    <p>${esc(doc.info.description || "")}</p>${ops.join("")}<h1>Models</h1>${models.join("")}`;
}

main().catch((error) => { document.getElementById("docs").textContent = `could not load /openapi.json: ${error}`; });
