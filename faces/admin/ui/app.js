// The page of who is being limited: it reads GET /v1/top every second,
// the feed GET /v1/denials as a stream, and a tenant's usage on click,
// all with the admin token as a bearer token. The token lives in this
// tab's session storage only. Nothing is loaded from another host.
"use strict";

const tokenKey = "tollgate-admin-token";
const $ = (id) => document.getElementById(id);
let selected = null; // the tenant whose usage is shown
let feedAbort = null;
let topTimer = null;

function token() { return sessionStorage.getItem(tokenKey); }

// api fetches path with the token; a 401 signs out.
async function api(path, init = {}) {
  const resp = await fetch(path, {
    ...init,
    cache: "no-store",
    headers: { Authorization: "Bearer " + token(), Accept: "application/json" },
  });
  if (resp.status === 401) {
    signOut("The token was refused.");
    throw new Error("unauthorized");
  }
  return resp;
}

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v;
    else if (k.startsWith("data-")) e.setAttribute(k, v);
    else e[k] = v;
  }
  for (const c of children) e.append(c instanceof Node ? c : String(c));
  return e;
}

function signOut(why) {
  sessionStorage.removeItem(tokenKey);
  if (feedAbort) feedAbort.abort();
  clearTimeout(topTimer);
  $("main").hidden = true;
  $("signout").hidden = true;
  $("login").hidden = false;
  $("status").textContent = "";
  $("login-error").textContent = why || "";
}

async function signIn(t) {
  sessionStorage.setItem(tokenKey, t);
  try {
    const resp = await api("/v1/top?window=5m");
    if (!resp.ok) throw new Error("status " + resp.status);
  } catch (e) {
    if (token()) signOut("The admin API did not answer: " + e.message);
    return;
  }
  $("login").hidden = true;
  $("main").hidden = false;
  $("signout").hidden = false;
  refreshTop();
  openFeed();
}

async function refreshTop() {
  clearTimeout(topTimer);
  try {
    const resp = await api("/v1/top?window=5m");
    const body = await resp.json();
    if (!resp.ok) throw new Error(body.error || "status " + resp.status);
    renderTop(body);
    drawChart(body.per_second);
    $("status").textContent = `${body.replicas} replica${body.replicas === 1 ? "" : "s"} · updated ${new Date().toLocaleTimeString()}` +
      (body.partial ? " · partial: " + body.partial : "");
  } catch (e) {
    if (!token()) return;
    $("status").textContent = "Could not read /v1/top: " + e.message;
  }
  if (token()) topTimer = setTimeout(refreshTop, 1000);
}

function renderTop(body) {
  $("window").textContent = `(${body.window_seconds / 60} min)`;
  const box = $("limits");
  box.replaceChildren();
  if (body.limits.length === 0) {
    box.append(el("p", { class: "empty" }, "No denials in the window."));
    return;
  }
  for (const l of body.limits) {
    const table = el("table", { "data-limit": l.limit },
      el("caption", {}, `${l.limit}: ${l.denied} denied`),
      el("thead", {}, el("tr", {},
        el("th", {}, "tenant"), el("th", { class: "n" }, "denied"),
        el("th", { class: "n" }, "allowed"), el("th", { class: "n" }, "remaining"))));
    const tbody = el("tbody");
    for (const t of l.tenants) {
      const b = el("button", { type: "button", class: "tenant" + (t.tenant === selected ? " selected" : ""), "data-tenant": t.tenant }, t.tenant);
      b.addEventListener("click", () => showUsage(t.tenant));
      const denied = t.denied === t.denied_min ? String(t.denied) : `${t.denied_min}–${t.denied}`;
      tbody.append(el("tr", {},
        el("td", {}, b), el("td", { class: "n" }, denied), el("td", { class: "n" }, t.allowed),
        el("td", { class: "n" }, t.remaining === undefined ? "?" : t.remaining)));
    }
    table.append(tbody);
    box.append(table);
  }
}

async function showUsage(tenant) {
  selected = tenant;
  for (const b of document.querySelectorAll("button.tenant")) b.classList.toggle("selected", b.dataset.tenant === tenant);
  const box = $("usage");
  box.replaceChildren(el("p", { class: "empty" }, "Reading " + tenant + "…"));
  try {
    const resp = await api("/v1/tenants/" + encodeURIComponent(tenant) + "/usage");
    const body = await resp.json();
    if (!resp.ok) throw new Error(body.error || "status " + resp.status);
    const table = el("table", { "data-tenant": body.tenant },
      el("caption", {}, body.tenant),
      el("thead", {}, el("tr", {},
        el("th", {}, "limit"), el("th", {}, "route"), el("th", { class: "n" }, "limit"),
        el("th", { class: "n" }, "used"), el("th", { class: "n" }, "remaining"), el("th", { class: "n" }, "reset in"))));
    const tbody = el("tbody");
    for (const l of body.limits) {
      tbody.append(el("tr", { "data-limit": l.name },
        el("td", {}, l.name + (l.shadow ? " (shadow)" : "")), el("td", {}, l.route || "(global)"),
        el("td", { class: "n" }, `${l.limit} / ${l.window_seconds} s`), el("td", { class: "n" }, l.used),
        el("td", { class: "n remaining" }, l.remaining), el("td", { class: "n" }, l.reset_seconds + " s")));
    }
    table.append(tbody);
    box.replaceChildren(table);
  } catch (e) {
    box.replaceChildren(el("p", { class: "error" }, "Could not read the usage of " + tenant + ": " + e.message));
  }
}

// drawChart draws the allowed and denied decisions of each second.
function drawChart(series) {
  const canvas = $("chart");
  const ratio = window.devicePixelRatio || 1;
  const w = canvas.clientWidth || canvas.width, h = canvas.clientHeight || canvas.height;
  canvas.width = w * ratio;
  canvas.height = h * ratio;
  const g = canvas.getContext("2d");
  g.scale(ratio, ratio);
  g.clearRect(0, 0, w, h);
  const css = getComputedStyle(document.documentElement);
  const pad = { l: 48, r: 8, t: 8, b: 20 };
  // The last 60 whole seconds the gateway counted, on its clock.
  const end = series.length ? series[series.length - 1].t : Math.floor(Date.now() / 1000) - 1;
  const byT = new Map(series.map((s) => [s.t, s]));
  const points = [];
  for (let t = end - 59; t <= end; t++) points.push(byT.get(t) || { t, allowed: 0, denied: 0 });
  const top = Math.max(1, ...points.map((p) => Math.max(p.allowed, p.denied)));
  const x = (i) => pad.l + (i / (points.length - 1)) * (w - pad.l - pad.r);
  const y = (v) => h - pad.b - (v / top) * (h - pad.t - pad.b);
  g.strokeStyle = css.getPropertyValue("--line");
  g.fillStyle = css.getPropertyValue("--muted");
  g.font = "11px system-ui, sans-serif";
  g.lineWidth = 1;
  for (const v of [0, top / 2, top]) {
    g.beginPath();
    g.moveTo(pad.l, y(v));
    g.lineTo(w - pad.r, y(v));
    g.stroke();
    g.fillText(String(Math.round(v)), 4, y(v) + 4);
  }
  g.fillText("-60 s", pad.l, h - 4);
  g.fillText("now", w - pad.r - 24, h - 4);
  for (const [key, color] of [["allowed", "--allowed"], ["denied", "--denied"]]) {
    g.strokeStyle = css.getPropertyValue(color);
    g.lineWidth = 2;
    g.beginPath();
    points.forEach((p, i) => (i ? g.lineTo(x(i), y(p[key])) : g.moveTo(x(i), y(p[key]))));
    g.stroke();
  }
}

// openFeed reads /v1/denials as a stream (EventSource cannot send a
// bearer token), and opens it again 2 s after it ends.
async function openFeed() {
  if (feedAbort) feedAbort.abort();
  const abort = new AbortController();
  feedAbort = abort;
  try {
    const resp = await api("/v1/denials", { signal: abort.signal });
    if (!resp.ok) throw new Error("status " + resp.status);
    const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += value;
      let end;
      while ((end = buf.indexOf("\n\n")) >= 0) {
        onEvent(buf.slice(0, end));
        buf = buf.slice(end + 2);
      }
    }
  } catch (e) {
    if (abort.signal.aborted) return;
  }
  if (token() && feedAbort === abort) setTimeout(openFeed, 2000);
}

function onEvent(block) {
  let type = "message", data = "";
  for (const line of block.split("\n")) {
    if (line.startsWith("event: ")) type = line.slice(7);
    else if (line.startsWith("data: ")) data += line.slice(6);
  }
  if (!data) return;
  const msg = JSON.parse(data);
  if (type === "dropped") {
    $("dropped").textContent = `${msg.dropped} not shown`;
    return;
  }
  if (type !== "denial") return;
  const feed = $("feed");
  feed.prepend(el("li", { "data-tenant": msg.tenant },
    el("time", {}, new Date(msg.time).toLocaleTimeString()), " ",
    `${msg.tenant} denied by ${msg.limit}` + (msg.route ? ` on ${msg.route}` : "") + (msg.client ? ` from ${msg.client}` : "")));
  while (feed.children.length > 100) feed.lastChild.remove();
}

document.addEventListener("DOMContentLoaded", () => {
  $("login").addEventListener("submit", (e) => {
    e.preventDefault();
    signIn($("token").value.trim());
    $("token").value = "";
  });
  $("signout").addEventListener("click", () => signOut());
  if (token()) signIn(token());
});
