// The monolock console: plain JavaScript, no framework, no request beyond
// this server's admin API. It polls GET /api/info, then one page of
// GET /api/locks, every 2 s (the same two requests from every open console,
// each bounded by the API), and calls the API's release and kick endpoints.
"use strict";

const REFRESH_MS = 2000;
const PAGE_SIZE = 50;
// The server's answer beyond which the console gives up a poll.
const REQUEST_TIMEOUT_MS = 10000;
// Token fields: uint64 values past 2^53 and 2^63 that a JavaScript number
// cannot hold. They are read from their source text as BigInt.
const TOKEN_KEYS = new Set(["token", "newest_token", "released_token"]);

// parseJSON parses an API answer, tokens as BigInt from the number's source
// text (JSON.parse source text access: Chromium 114, Firefox 135, Safari
// 18.4). A browser without it gets numbers; exactTokens then says so and a
// token past 2^53 is shown as inexact.
let exactTokens = true;
function parseJSON(text) {
  return JSON.parse(text, function (key, value, context) {
    if (!TOKEN_KEYS.has(key) || typeof value !== "number") {
      return value;
    }
    if (context && typeof context.source === "string") {
      return BigInt(context.source);
    }
    return value;
  });
}

function tokenText(t) {
  if (typeof t === "bigint" || Number.isSafeInteger(t)) {
    return String(t);
  }
  return "≈" + String(t) + " (this browser cannot read tokens past 2^53 exactly)";
}

function maxToken(a, b) {
  return a > b ? a : b;
}

// The console's state: what it shows and what it asks for.
const state = {
  roles: new Set(),
  match: "",
  after: "", // the cursor of the page shown
  cursors: [], // the after= of the pages before it
  next: "",
  paused: false,
  info: null, // the last /api/info, with the time it was read
  rates: null, // grants and expiries per second, from the last two polls
  locks: [],
  skewMS: 0, // the server's clock minus the browser's, from the Date header
  open: new Set(), // the locks whose queue is shown
  timer: 0,
  polling: false,
};

const $ = (id) => document.getElementById(id);

// api calls the admin API and returns [status, parsed body].
async function api(method, path) {
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), REQUEST_TIMEOUT_MS);
  try {
    const res = await fetch(path, {
      method,
      signal: ctl.signal,
      cache: "no-store",
      credentials: "same-origin",
      headers: { Accept: "application/json" },
    });
    const date = Date.parse(res.headers.get("Date") || "");
    if (!Number.isNaN(date)) {
      state.skewMS = date - Date.now();
    }
    const text = await res.text();
    let body = null;
    try {
      body = parseJSON(text);
    } catch {
      body = { error: text.trim() || res.statusText };
    }
    return [res.status, body];
  } finally {
    clearTimeout(timer);
  }
}

function errorText(status, body) {
  const msg = body && typeof body.error === "string" ? body.error : "no explanation";
  return `${status}: ${msg}`;
}

// loadRoles asks the server what this operator may do. A server without
// authentication answers 404 to /api/whoami: every role.
async function loadRoles() {
  try {
    const [status, body] = await api("GET", "/api/whoami");
    if (status === 404) {
      state.roles = new Set(["read", "release", "kick"]);
      $("roles").textContent = "This server's admin API has no authentication: anyone who reaches it may release and kick.";
      return;
    }
    if (status !== 200 || !Array.isArray(body.roles)) {
      state.roles = new Set();
      $("roles").textContent = `Cannot learn your roles (${errorText(status, body)}): actions are off.`;
      return;
    }
    state.roles = new Set(body.roles);
    const who = body.identity ? `Signed in as ${body.identity}` : "No client certificate";
    const roles = body.roles.length ? body.roles.join(", ") : "none";
    $("roles").textContent = `${who}; roles: ${roles}.`;
  } catch (err) {
    state.roles = new Set();
    $("roles").textContent = `Cannot learn your roles (${err.message}): actions are off.`;
  }
}

function locksPath() {
  const q = new URLSearchParams();
  if (state.match) {
    q.set("match", state.match);
  }
  q.set("limit", String(PAGE_SIZE));
  if (state.after) {
    q.set("after", state.after);
  }
  return "/api/locks?" + q.toString();
}

// poll reads the summary and the page, then shows them. Polls never
// overlap: a slow server gets fewer, not more.
async function poll() {
  if (state.polling) {
    return;
  }
  state.polling = true;
  try {
    // One after the other, so that a console keeps one connection: the
    // admin port serves at most 64, and a wall of consoles should not make
    // it close some to make room.
    const [is, info] = await api("GET", "/api/info");
    const [ls, list] = await api("GET", locksPath());
    if (is !== 200) {
      throw new Error("GET /api/info: " + errorText(is, info));
    }
    if (ls !== 200) {
      throw new Error("GET /api/locks: " + errorText(ls, list));
    }
    updateRates(info);
    state.locks = list.locks;
    state.next = list.next;
    state.total = list.total;
    render();
    showError("");
    setStatus(`updated ${new Date().toLocaleTimeString()}`);
  } catch (err) {
    showError(err.name === "AbortError" ? "The server did not answer within 10 s; retrying." : err.message);
    setStatus("update failed");
  } finally {
    state.polling = false;
    schedule();
  }
}

function schedule() {
  clearTimeout(state.timer);
  if (!state.paused) {
    state.timer = setTimeout(poll, REFRESH_MS);
  }
}

// updateRates derives grants and expiries per second from this poll and the
// one before, by the server's uptime (not the browser's clock).
function updateRates(info) {
  const prev = state.info;
  if (prev && info.uptime_ms > prev.uptime_ms && info.grants >= prev.grants) {
    const secs = (info.uptime_ms - prev.uptime_ms) / 1000;
    state.rates = {
      grants: (info.grants - prev.grants) / secs,
      expiries: (info.expiries - prev.expiries) / secs,
    };
  } else if (prev && info.uptime_ms < prev.uptime_ms) {
    state.rates = null; // the server restarted
  }
  state.info = info;
}

function setStatus(text) {
  $("status").textContent = state.paused ? "paused" : text;
}

function showError(text) {
  const el = $("error");
  el.textContent = text;
  el.hidden = text === "";
}

// --- rendering ---------------------------------------------------------

function el(tag, props, ...children) {
  const e = document.createElement(tag);
  Object.assign(e, props || {});
  for (const c of children) {
    if (c !== null && c !== undefined) {
      e.append(c);
    }
  }
  return e;
}

function serverNow() {
  return Date.now() + state.skewMS;
}

function duration(ms) {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) {
    return `${s}s`;
  }
  const m = Math.floor(s / 60);
  if (m < 60) {
    return `${m}m ${s % 60}s`;
  }
  const h = Math.floor(m / 60);
  if (h < 48) {
    return `${h}h ${m % 60}m`;
  }
  return `${Math.floor(h / 24)}d ${h % 24}h`;
}

function ago(iso) {
  return duration(serverNow() - Date.parse(iso)) + " ago";
}

// identity shows a client's certificate identity; "—" without one.
function identity(id) {
  return id ? el("span", { textContent: id }) : el("span", { className: "muted", textContent: "—", title: "no client certificate" });
}

function timeEl(iso, text) {
  return el("time", { dateTime: iso, title: iso, textContent: text });
}

function renderSummary() {
  const info = state.info;
  const rate = (v) => (state.rates ? v.toFixed(1) + "/s" : "…");
  const items = [
    ["Locks held", String(info.locks)],
    ["Sessions", String(info.sessions)],
    ["Waiters", String(info.waiters)],
    ["Grants", rate(state.rates ? state.rates.grants : 0)],
    ["Expiries", rate(state.rates ? state.rates.expiries : 0)],
    ["Newest token", tokenText(info.newest_token)],
    ["Uptime", duration(info.uptime_ms)],
  ];
  if (info.ha) {
    // A node of a cluster led through etcd: its role, and whom it follows.
    const role = info.ha.role === "leader" ? (info.ha.serving ? "leader" : "leader (waiting out the longest lease)") : "follower";
    items.push(["Role", `${role} · leader ${info.ha.leader || "unknown"} · cluster ${info.ha.cluster}`]);
  }
  items.push(["Ready", info.ready ? "yes" : "no: " + info.not_ready]);
  $("summary").replaceChildren(
    ...items.map(([k, v]) =>
      el("div", { className: k === "Newest token" ? "wide" : "" }, el("dt", { textContent: k }), el("dd", { textContent: v })),
    ),
  );
  $("summary").querySelector("div:last-child dd").classList.toggle("stale", !info.ready);
  const tls = info.config.mtls ? "mutual TLS" : info.config.tls ? "TLS" : "plain TCP";
  $("server").textContent = `${info.version} · locks on ${info.config.listen} (${tls})`;
}

// cell is a table cell; its label heads it on a phone, where each lock is a
// card (console.css).
function cell(label, className, ...children) {
  const td = el("td", { className }, el("div", null, ...children));
  td.dataset.label = label;
  return td;
}

function actionButton(text, key, onClick, allowed, why) {
  const b = el("button", { type: "button", textContent: text, className: "danger" });
  b.dataset.key = key;
  if (allowed) {
    b.addEventListener("click", onClick);
  } else {
    b.disabled = true;
    b.title = why;
  }
  return b;
}

function renderWaiters(lock) {
  const n = lock.waiters.length;
  if (n === 0) {
    return document.createTextNode("none");
  }
  const list = el(
    "ol",
    { className: "waiters" },
    ...lock.waiters.map((w) =>
      el(
        "li",
        null,
        el("span", { textContent: `#${w.position}` }),
        identity(w.identity),
        el("span", { className: "addr", textContent: w.remote_addr }),
        el("span", null, "waiting ", timeEl(w.queued_at, duration(serverNow() - Date.parse(w.queued_at)))),
        state.roles.has("kick")
          ? actionButton(
              "Remove",
              `kick:${lock.name}:${w.remote_addr}`,
              () => kick(lock.name, w.remote_addr),
              true,
              "",
            )
          : null,
      ),
    ),
  );
  const details = el("details", { open: state.open.has(lock.name) }, el("summary", { textContent: `${n} waiting` }), list);
  details.dataset.key = `queue:${lock.name}`;
  details.addEventListener("toggle", () => {
    if (details.open) {
      state.open.add(lock.name);
    } else {
      state.open.delete(lock.name);
    }
  });
  details.querySelector("summary").dataset.key = `queue:${lock.name}`;
  return details;
}

function renderLocks() {
  const box = $("locks");
  if (state.locks.length === 0) {
    box.replaceChildren(el("p", { className: "empty", textContent: state.match ? "No held lock matches the filter." : "No lock is held." }));
    return;
  }
  const head = el(
    "thead",
    null,
    el(
      "tr",
      null,
      ...["Lock", "Holder", "Address", "Held for", "Lease", "Last heartbeat", "Token", "Waiters", "Action"].map((h) =>
        el("th", { scope: "col", textContent: h }),
      ),
    ),
  );
  const rows = state.locks.map((lock) => {
    const h = lock.holder;
    const silent = serverNow() - Date.parse(h.last_heartbeat);
    const beat = el("span", null, timeEl(h.last_heartbeat, duration(silent) + " ago"));
    beat.classList.toggle("stale", silent > h.lease_ms / 2);
    const tr = el(
      "tr",
      null,
      cell("Lock", "name", lock.name),
      cell("Holder", "", identity(h.identity)),
      cell("Address", "addr", h.remote_addr),
      cell("Held for", "", timeEl(h.since, duration(serverNow() - Date.parse(h.since)))),
      cell("Lease", "", h.lease_ms % 1000 === 0 && h.lease_ms < 3600000 ? `${h.lease_ms / 1000}s` : duration(h.lease_ms)),
      cell("Last heartbeat", "", beat),
      cell("Token", "token", tokenText(h.token)),
      cell("Waiters", "", renderWaiters(lock)),
      cell(
        "Action",
        "",
        state.roles.has("release")
          ? actionButton("Force-release", `release:${lock.name}`, () => openRelease(lock), true, "")
          : el("span", { className: "muted", textContent: "no release role" }),
      ),
    );
    tr.dataset.lock = lock.name;
    return tr;
  });
  const caption = el("caption", { className: "visually-hidden", textContent: "Held locks, their holders and queues" });
  box.replaceChildren(el("table", null, caption, head, el("tbody", null, ...rows)));
}

function renderPages() {
  const first = state.cursors.length + 1;
  $("prev").disabled = state.cursors.length === 0;
  $("next").disabled = state.next === "";
  const shown = state.locks.length;
  const from = shown ? state.cursors.length * PAGE_SIZE + 1 : 0;
  $("page").textContent = `page ${first} · locks ${from}–${from + shown - (shown ? 1 : 0)} of ${state.total}`;
}

// render redraws everything, then gives the focus back to the control that
// had it (the same button of the same lock), so that a refresh never takes
// a keyboard user's place.
function render() {
  const active = document.activeElement;
  const key = active && active.dataset ? active.dataset.key : undefined;
  renderSummary();
  renderLocks();
  renderPages();
  if (key) {
    const again = $("locks").querySelector(`[data-key="${CSS.escape(key)}"]`);
    const target = again && again.tagName === "DETAILS" ? again.querySelector("summary") : again;
    if (target) {
      target.focus();
    }
  }
}

// --- actions -----------------------------------------------------------

let releasing = null; // the lock the dialog is about

function openRelease(lock) {
  releasing = lock;
  $("release-name").textContent = lock.name;
  $("release-holder").textContent = `${lock.holder.identity || "(no identity)"} at ${lock.holder.remote_addr}`;
  const newest = state.info ? state.info.newest_token : lock.holder.token;
  $("release-token").textContent = tokenText(maxToken(newest, lock.holder.token));
  $("release-confirm").value = "";
  $("release-submit").disabled = true;
  showDialogError("");
  $("release-dialog").showModal();
  $("release-confirm").focus();
}

function showDialogError(text) {
  $("release-error").textContent = text;
  $("release-error").hidden = text === "";
}

async function confirmRelease(event) {
  event.preventDefault();
  if (!releasing || $("release-confirm").value !== releasing.name) {
    return;
  }
  const name = releasing.name;
  $("release-submit").disabled = true;
  try {
    const [status, body] = await api("POST", `/api/locks/${encodeName(name)}/release`);
    if (status !== 200) {
      showDialogError(errorText(status, body));
      return;
    }
    $("release-dialog").close();
    setStatus(`released ${name}: its holder lost token ${tokenText(body.released_token)}`);
    poll();
  } catch (err) {
    showDialogError(err.message);
  } finally {
    $("release-submit").disabled = $("release-confirm").value !== name;
  }
}

async function kick(name, addr) {
  if (!window.confirm(`Remove the waiter at ${addr} from the queue of ${name}? It gets ERROR 0x02.`)) {
    return;
  }
  try {
    const [status, body] = await api("DELETE", `/api/locks/${encodeName(name)}/waiters/${encodeURIComponent(addr)}`);
    if (status !== 200) {
      showError(`Remove ${addr} from ${name}: ${errorText(status, body)}`);
      return;
    }
    setStatus(`removed ${addr} from ${name}`);
    poll();
  } catch (err) {
    showError(err.message);
  }
}

// encodeName writes a lock name as one path segment: '/' as %2F, and "."
// and ".." encoded, which encodeURIComponent leaves alone.
function encodeName(name) {
  const e = encodeURIComponent(name);
  return e === "." || e === ".." ? e.replaceAll(".", "%2E") : e;
}

// --- wiring ------------------------------------------------------------

function go(after, cursors) {
  state.after = after;
  state.cursors = cursors;
  poll();
}

function start() {
  $("pause").addEventListener("click", () => {
    state.paused = !state.paused;
    $("pause").setAttribute("aria-pressed", String(state.paused));
    $("pause").textContent = state.paused ? "Resume" : "Pause";
    if (state.paused) {
      clearTimeout(state.timer);
      setStatus("");
    } else {
      poll();
    }
  });
  $("filter").addEventListener("submit", (event) => {
    event.preventDefault();
    state.match = $("match").value.trim();
    go("", []);
  });
  $("prev").addEventListener("click", () => {
    const cursors = state.cursors.slice();
    go(cursors.pop() || "", cursors);
  });
  $("next").addEventListener("click", () => {
    if (state.next) {
      go(state.next, [...state.cursors, state.after]);
    }
  });
  $("release-confirm").addEventListener("input", () => {
    $("release-submit").disabled = !releasing || $("release-confirm").value !== releasing.name;
  });
  $("release-form").addEventListener("submit", confirmRelease);
  $("release-cancel").addEventListener("click", () => $("release-dialog").close());
  // A refresh while the dialog was open replaced the button that opened it:
  // the focus goes back to its successor, not to the top of the page.
  $("release-dialog").addEventListener("close", () => {
    const opener = releasing && $("locks").querySelector(`[data-key="${CSS.escape("release:" + releasing.name)}"]`);
    if (opener) {
      opener.focus();
    }
  });
  loadRoles().then(poll);
}

document.addEventListener("DOMContentLoaded", start);
