// The Servers page: plain DOM, no framework, no inline script (the CSP forbids it).
// Every text from the server is set as text (never as markup).
"use strict";

const INTENTS = ["cordon", "drain", "reboot", "shutdown"];
const LABELS = { cordon: "Cordon", drain: "Drain", reboot: "Reboot", shutdown: "Shut down" };
const state = { me: null, csrf: null, source: null, page: { offset: 0, limit: 50 } };

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

async function api(path, options = {}) {
  const headers = { Accept: "application/json" };
  if (options.body !== undefined) headers["Content-Type"] = "application/json";
  if (state.csrf && options.method && options.method !== "GET") headers["X-CSRF-Token"] = state.csrf;
  const resp = await fetch(path, {
    method: options.method || "GET", headers, credentials: "same-origin",
    body: options.body !== undefined ? JSON.stringify(options.body) : undefined,
  });
  let doc = null;
  try { doc = await resp.json(); } catch (e) { doc = null; }
  return { ok: resp.ok, status: resp.status, doc };
}

function notice(text) {
  const el = document.getElementById("notice");
  el.textContent = text || "";
  el.hidden = !text;
}

function problemText(doc) {
  if (!doc) return "The request failed.";
  return `${doc.title || "Error"}: ${doc.detail || ""}`;
}

function mount(...nodes) {
  const app = document.getElementById("app");
  app.replaceChildren(...nodes);
}

// -- who is signed in --------------------------------------------------------------------
async function whoami() {
  const r = await api("/api/v1/whoami");
  const who = document.getElementById("who");
  if (!r.ok) {
    who.replaceChildren(h("a", { href: "/auth/login" }, "Log in"));
    return false;
  }
  state.me = r.doc;
  state.csrf = r.doc.csrfToken || null;
  const groups = r.doc.groups.length ? ` (${r.doc.groups.join(", ")})` : "";
  who.replaceChildren(`Signed in as ${r.doc.user}${groups}`);
  if (state.csrf) {
    who.append(" ", h("button", { type: "button", onclick: logout }, "Log out"));
  }
  return true;
}

async function logout() {
  await api("/auth/logout", { method: "POST", body: {} });
  location.hash = "#/";
  location.reload();
}

// -- the server list ---------------------------------------------------------------------
function actionControl(server, intent) {
  const a = server.actions[intent];
  if (a.offered && a.allowed) {
    return h("button", { type: "button", "data-action": intent, "data-node": server.name,
                         onclick: () => openCeremony(server.name, intent) },
             LABELS[intent]);
  }
  const why = !a.offered ? `Withheld: ${a.withheldReason}` : `Not allowed for you: ${a.rule}`;
  const id = `why-${server.name}-${intent}`;
  return h("span", { class: "withheld tip", tabindex: "0", "data-withheld": intent,
                     "aria-describedby": id, title: why },
           `${LABELS[intent]} (unavailable)`,
           h("span", { class: "tiptext", role: "tooltip", id }, why));
}

async function showServers(params) {
  const site = params.get("site") || "";
  const label = params.get("label") || "";
  const offset = Number(params.get("offset") || 0);
  const q = new URLSearchParams({ offset: String(offset), limit: String(state.page.limit) });
  if (site) q.set("site", site);
  if (label) q.append("label", label);
  const r = await api(`/api/v1/servers?${q}`);
  const siteInput = h("input", { type: "text", id: "f-site", name: "site", value: site });
  const labelInput = h("input", { type: "text", id: "f-label", name: "label", value: label,
                                  placeholder: "key=value" });
  const filters = h("form", { class: "filters", role: "search", onsubmit: (e) => {
      e.preventDefault();
      const p = new URLSearchParams();
      if (siteInput.value) p.set("site", siteInput.value);
      if (labelInput.value) p.set("label", labelInput.value);
      location.hash = `#/?${p}`;
    } },
    h("div", {}, h("label", { for: "f-site" }, "Site"), siteInput),
    h("div", {}, h("label", { for: "f-label" }, "Label"), labelInput),
    h("button", { type: "submit" }, "Filter"));
  if (!r.ok) { mount(h("h1", {}, "Servers"), filters, h("p", { role: "alert" }, problemText(r.doc))); return; }
  const rows = r.doc.items.map((s) => h("tr", { "data-node": s.name },
    h("th", { scope: "row" }, h("a", { href: `#/node/${encodeURIComponent(s.name)}` }, s.name)),
    h("td", {}, s.site || "—"),
    h("td", {}, Object.entries(s.labels).map(([k, v]) => (v ? `${k}=${v}` : k)).join(", ") || "—"),
    h("td", {}, s.channels.join(", ") || "none"),
    h("td", {}, s.maintenance
      ? h("a", { href: `#/maintenance/${encodeURIComponent(s.maintenance.name)}` }, s.maintenance.phase)
      : "in service"),
    h("td", {}, h("div", { class: "actions" }, INTENTS.map((i) => actionControl(s, i))))));
  const more = (delta) => {
    const p = new URLSearchParams(params);
    p.set("offset", String(Math.max(0, offset + delta)));
    location.hash = `#/?${p}`;
  };
  const discovered = r.doc.items.length && r.doc.items[0].discoveredAt
    ? `Offers from discovery at ${new Date(r.doc.items[0].discoveredAt).toLocaleString()}; power is not polled.` : "";
  mount(
    h("h1", {}, "Servers"), filters,
    h("p", { class: "muted" }, discovered),
    h("table", { id: "servers" },
      h("caption", { class: "muted" }, `${r.doc.total} servers`),
      h("thead", {}, h("tr", {}, ["Server", "Site", "Labels", "Channels", "Maintenance", "Actions"]
        .map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, rows)),
    h("div", { class: "pager" },
      h("button", { type: "button", disabled: offset === 0, onclick: () => more(-state.page.limit) }, "Previous page"),
      h("span", {}, `${offset + 1}–${offset + r.doc.items.length} of ${r.doc.total}`),
      h("button", { type: "button", disabled: offset + r.doc.items.length >= r.doc.total,
                    onclick: () => more(state.page.limit) }, "Next page")));
}

// -- a node ------------------------------------------------------------------------------
async function showNode(name) {
  const r = await api(`/api/v1/servers/${encodeURIComponent(name)}`);
  if (!r.ok) { mount(h("h1", {}, name), h("p", { role: "alert" }, problemText(r.doc))); return; }
  const s = r.doc;
  const offers = Object.entries(s.offers).map(([verb, o]) => h("tr", {},
    h("th", { scope: "row" }, verb),
    h("td", {}, o.offered ? "offered" : "withheld"),
    h("td", {}, o.offered ? `${o.channel} (${o.graceful ? "graceful" : "hard"})` : o.reason),
    h("td", {}, o.recovery || "")));
  const history = s.history.slice().reverse().map((m) => h("li", {},
    h("a", { href: `#/maintenance/${encodeURIComponent(m.name)}` }, m.name),
    ` — ${m.intent}, ${m.phase}, requested by ${m.requestedBy}: ${m.reason}`));
  const readings = s.readings.map((d) => h("li", {},
    `${d.maintenance}: ${d.verb} via ${d.dispatch.channel || "?"} — ${d.dispatch.outcome || "no outcome yet"} ${d.dispatch.detail || ""}`));
  mount(
    h("h1", {}, `Server ${s.name}`),
    h("p", {}, `Site ${s.site || "—"} · ${s.classification} · channels: ${s.channels.join(", ") || "none"}`),
    h("div", { class: "actions" }, INTENTS.map((i) => actionControl(s, i))),
    h("h2", {}, "Offers"),
    h("table", {}, h("thead", {}, h("tr", {}, ["Verb", "", "Channel or reason", "Recovery"].map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, offers)),
    h("h2", {}, "Maintenances"), history.length ? h("ul", {}, history) : h("p", {}, "None."),
    h("h2", {}, "Readings taken for maintenances"),
    readings.length ? h("ul", {}, readings) : h("p", {}, "None: power is read only for a maintenance being watched."));
}

// -- the ceremony ------------------------------------------------------------------------
function field(id, label, input, hint) {
  return h("div", { class: "field" }, h("label", { for: id }, label), input,
           hint ? h("div", { class: "muted", id: `${id}-hint` }, hint) : null);
}

async function openCeremony(node, intent) {
  notice("");
  const r = await api("/api/v1/preflight", { method: "POST", body: { node, intent } });
  const dialog = document.getElementById("ceremony");
  const title = document.getElementById("ceremony-title");
  const body = document.getElementById("ceremony-body");
  const problems = document.getElementById("ceremony-problems");
  const submit = document.getElementById("ceremony-submit");
  const form = document.getElementById("ceremony-form");
  problems.replaceChildren();
  dialog.className = "";
  if (!r.ok) { notice(problemText(r.doc)); return; }
  const pre = r.doc;
  const steps = new Set(pre.ceremony.map((s) => s.step));
  const parts = [];
  const q = pre.preflight && pre.preflight.quorum;
  if (pre.refusal) {
    dialog.className = "refused";
    title.replaceChildren(`⛔ Refused: ${LABELS[intent]} ${node}`);
    const n = pre.refusal.quorum;
    parts.push(h("div", { class: "box refusal", id: "refusal" },
      h("p", {}, h("strong", {}, "This request is refused and no ceremony can change that. "), pre.refusal.message),
      n ? h("dl", { class: "numbers" },
        h("dt", {}, "Members"), h("dd", { "data-number": "members" }, String(n.members)),
        h("dt", {}, "Ready"), h("dd", { "data-number": "ready" }, String(n.ready)),
        h("dt", {}, "Quorum"), h("dd", { "data-number": "quorum" }, String(n.quorum)),
        h("dt", {}, "Margin"), h("dd", { "data-number": "margin" }, String(n.margin))) : null));
    body.replaceChildren(...parts);
    submit.hidden = true;
    document.getElementById("ceremony-cancel").textContent = "Close";
    dialog.showModal();
    return;
  }
  submit.hidden = false;
  document.getElementById("ceremony-cancel").textContent = "Cancel";
  if (pre.hazard) {
    dialog.className = "hazard";
    title.replaceChildren(h("span", { role: "img", "aria-label": "Warning" }, "⚠️"), ` Hazard: ${LABELS[intent]} ${node}`);
    parts.push(h("div", { class: "box hazard", id: "hazard" },
      h("strong", {}, "Hazard tier. "),
      "This action consumes the last of the quorum margin: one more member lost and the control plane stops.",
      q ? h("p", { class: "numbers" }, `Members ${q.members}, ready ${q.ready}, quorum ${q.quorum}, margin ${q.margin}.`) : null));
  } else {
    title.replaceChildren(`${LABELS[intent]} ${node}`);
  }
  if (pre.preflight) {
    const p = pre.preflight;
    parts.push(h("div", { class: "box", id: "preflight" }, h("strong", {}, "Pre-flight"),
      h("ul", {},
        h("li", {}, `Pods a drain would evict: ${p.pods.length ? p.pods.join(", ") : "none"}`),
        h("li", {}, `Disruption budgets: ${p.pdbs.length ? p.pdbs.join(", ") : "none"}`),
        h("li", {}, q ? `Quorum: ${q.members} members, ${q.ready} ready, quorum ${q.quorum}, margin ${q.margin}` : "Quorum: no control plane"),
        p.power && p.power.verb ? h("li", {}, `Power: ${p.power.verb} ${p.power.offered ? `via ${p.power.channel} (${p.power.graceful ? "graceful" : "hard"})` : "withheld"}`) : null,
        h("li", {}, `Storage: ${p.storage || "—"}`))));
  }
  const inputs = {};
  inputs.reason = h("textarea", { id: "c-reason", name: "reason", required: true, "aria-describedby": "c-reason-hint" });
  parts.push(field("c-reason", "Reason", inputs.reason, pre.ceremony.find((s) => s.step === "reason").needs));
  if (steps.has("ack-preflight")) {
    inputs.ack = h("input", { type: "checkbox", id: "c-ack", name: "ack" });
    parts.push(h("div", { class: "field" }, inputs.ack, " ",
      h("label", { for: "c-ack", class: "inline" }, "I have read the pre-flight impact above")));
  }
  if (steps.has("typed-node")) {
    inputs.node = h("input", { type: "text", id: "c-node", name: "confirm", autocomplete: "off", spellcheck: "false" });
    parts.push(field("c-node", `Type the node name to confirm: ${node}`, inputs.node));
  }
  if (steps.has("hazard-reason")) {
    inputs.hazard = h("textarea", { id: "c-hazard", name: "hazard" });
    parts.push(field("c-hazard", "⚠️ Hazard reason: why take the last of the margin now", inputs.hazard));
  }
  body.replaceChildren(...parts);
  submit.textContent = pre.hazard ? `Request ${LABELS[intent].toLowerCase()} despite the hazard` : `Request ${LABELS[intent].toLowerCase()}`;
  submit.className = pre.hazard || intent === "shutdown" ? "danger" : "primary";
  form.onsubmit = async (e) => {
    e.preventDefault();
    problems.replaceChildren();
    const req = { node, intent, reason: inputs.reason.value };
    if (inputs.ack) req.ackPreflight = inputs.ack.checked;
    if (inputs.node) req.confirmNode = inputs.node.value;
    if (inputs.hazard) req.hazardReason = inputs.hazard.value;
    const res = await api("/api/v1/maintenances", { method: "POST", body: req });
    if (!res.ok) {
      const items = (res.doc && res.doc.problems) || [problemText(res.doc)];
      problems.replaceChildren(...items.map((t) => h("li", {}, t)));
      return;
    }
    dialog.close();
    location.hash = `#/maintenance/${encodeURIComponent(res.doc.name)}`;
  };
  dialog.showModal();
  inputs.reason.focus();
}

// -- a maintenance, live -----------------------------------------------------------------
function renderMaintenance(m) {
  const poc = m.powerOffConfirmed;
  const conds = Object.entries(m.conditions).map(([k, c]) => h("tr", {},
    h("th", { scope: "row" }, k), h("td", {}, c.status), h("td", {}, c.reason), h("td", {}, c.message)));
  const hist = m.history.map((t) => h("li", {}, `${new Date(t.at).toLocaleTimeString()} ${t.from} → ${t.to}: ${t.why || ""}`));
  const parked = ["Cordoned", "Drained", "PoweredOff", "Returning"].includes(m.phase) || m.phase === "Rebooting" && false;
  const controls = [];
  if (!m.terminal && parked) controls.push(h("button", { type: "button", id: "do-return", onclick: () => personRequest(m, "return") }, "Return to service"));
  if (!m.terminal) controls.push(h("button", { type: "button", id: "do-abandon", onclick: () => personRequest(m, "abandon") }, "Abandon"));
  return [
    h("h1", {}, `Maintenance ${m.name}`),
    h("p", {}, `${m.intent} of `, h("a", { href: `#/node/${encodeURIComponent(m.node)}` }, m.node),
      `, requested by ${m.requestedBy}: ${m.reason}`),
    h("p", {}, "Phase: ", h("span", { class: "phase", id: "phase", "aria-live": "polite" }, m.phase)),
    poc ? h("div", { class: `box status-${poc.status}`, id: "power-off-confirmed" },
      h("strong", {}, `PowerOffConfirmed: ${poc.status}`),
      h("p", { "data-meaning": "" }, `${poc.status === "True" ? "✔" : poc.status === "False" ? "…" : "?"} ${poc.meaning}`),
      h("p", { class: "muted" }, poc.message)) : null,
    m.refusal && m.refusal.reason ? h("div", { class: "box refusal" }, `Refused: ${m.refusal.reason}`) : null,
    h("div", { class: "actions" }, controls),
    h("h2", {}, "Conditions"),
    h("table", {}, h("tbody", {}, conds)),
    h("h2", {}, "History"), h("ol", {}, hist),
  ];
}

async function personRequest(m, what) {
  const dialog = document.getElementById("ceremony");
  const body = document.getElementById("ceremony-body");
  const problems = document.getElementById("ceremony-problems");
  const submit = document.getElementById("ceremony-submit");
  const form = document.getElementById("ceremony-form");
  dialog.className = "";
  problems.replaceChildren();
  document.getElementById("ceremony-title").replaceChildren(`${what === "return" ? "Return to service" : "Abandon"}: ${m.node}`);
  const reason = h("textarea", { id: "c-reason", name: "reason" });
  body.replaceChildren(field("c-reason", "Reason", reason));
  submit.hidden = false;
  submit.textContent = what === "return" ? "Request return" : "Request abandon";
  submit.className = "primary";
  form.onsubmit = async (e) => {
    e.preventDefault();
    const res = await api(`/api/v1/maintenances/${encodeURIComponent(m.name)}/${what}`, { method: "POST", body: { reason: reason.value } });
    if (!res.ok) {
      problems.replaceChildren(...((res.doc && res.doc.problems) || [problemText(res.doc)]).map((t) => h("li", {}, t)));
      return;
    }
    dialog.close();
  };
  dialog.showModal();
  reason.focus();
}

function showMaintenance(name) {
  const r0 = h("p", {}, "Loading…");
  mount(r0);
  const src = new EventSource(`/api/v1/maintenances/${encodeURIComponent(name)}/events`);
  state.source = src;
  src.addEventListener("maintenance", (e) => mount(...renderMaintenance(JSON.parse(e.data))));
  src.addEventListener("end", () => src.close());
  src.onerror = () => { if (src.readyState === EventSource.CLOSED) notice("Live updates stopped."); };
}

// -- the audit trail ---------------------------------------------------------------------
async function showAudit(params) {
  const inputs = {};
  const f = ["node", "actor", "action", "since"].map((k) => {
    inputs[k] = h("input", { type: "text", id: `a-${k}`, name: k, value: params.get(k) || "",
                             placeholder: k === "since" ? "2026-12-01T00:00:00Z" : "" });
    return h("div", {}, h("label", { for: `a-${k}` }, k[0].toUpperCase() + k.slice(1)), inputs[k]);
  });
  const q = new URLSearchParams();
  for (const k of Object.keys(inputs)) if (params.get(k)) q.set(k, params.get(k));
  q.set("limit", "200");
  const r = await api(`/api/v1/audit?${q}`);
  const form = h("form", { class: "filters", role: "search", onsubmit: (e) => {
    e.preventDefault();
    const p = new URLSearchParams();
    for (const [k, el] of Object.entries(inputs)) if (el.value) p.set(k, el.value);
    location.hash = `#/audit?${p}`;
  } }, f, h("button", { type: "submit" }, "Filter"));
  if (!r.ok) { mount(h("h1", {}, "Audit trail"), form, h("p", { role: "alert" }, problemText(r.doc))); return; }
  const rows = r.doc.items.map((a) => h("tr", {},
    h("td", {}, new Date(a.at).toLocaleString()), h("td", {}, `${a.actor} (${a.via})`),
    h("td", {}, a.action), h("td", {}, a.outcome === "denied" ? "✖ denied" : "✔ accepted"),
    h("td", {}, a.node), h("td", {}, a.reason), h("td", {}, a.rule),
    h("td", {}, a.detail || "")));
  const v = r.doc.verification;
  const verified = h("div", { id: "verification", role: v.intact ? "status" : "alert",
                              class: v.intact ? "ok" : "bad" },
    h("strong", {}, v.intact ? "✔ The trail verifies." : "✖ The trail does NOT verify."),
    h("ul", {}, v.trails.map((t) => h("li", {}, t.intact ? t.summary
      : `${t.trail}: first bad entry ${t.firstBad ?? "?"}: ${t.problem}`))));
  mount(h("h1", {}, "Audit trail"), verified, form,
    h("table", { id: "audit" }, h("caption", { class: "muted" }, `${r.doc.total} records`),
      h("thead", {}, h("tr", {}, ["When", "Who", "Action", "Outcome", "Node", "Reason", "Rule", "Detail"].map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, rows)));
}

// -- routing -----------------------------------------------------------------------------
async function route() {
  if (state.source) { state.source.close(); state.source = null; }
  notice("");
  const hash = location.hash || "#/";
  const [path, query] = hash.slice(1).split("?");
  const params = new URLSearchParams(query || "");
  if (path.startsWith("/node/")) await showNode(decodeURIComponent(path.slice(6)));
  else if (path.startsWith("/maintenance/")) showMaintenance(decodeURIComponent(path.slice(13)));
  else if (path === "/audit") await showAudit(params);
  else await showServers(params);
  document.getElementById("app").focus();
}

document.getElementById("ceremony-cancel").addEventListener("click", () => document.getElementById("ceremony").close());
window.addEventListener("hashchange", route);
whoami().then((ok) => (ok ? route() : mount(h("h1", {}, "Servers"), h("p", {}, "You are not signed in."))));
