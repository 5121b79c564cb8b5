// twotower explorer: plain JS, no build step, no external requests.
// Talks to the service's JSON API: POST /recommend (explain: true), POST /explain,
// POST /similar-items, GET /items/{id}, optional GET /users/{id} and POST /search
// (detected from /openapi.json). Every value from the API is inserted as text, never HTML.
"use strict";

// multi: the item metadata column shown as chips (see multiColumn)
const state = { paths: new Set(), search: false, users: false, multi: "genres" };

const $ = (id) => document.getElementById(id);

// Each panel shows the answer to the latest request made for it. Two clicks on titles in a row cleared the
// similar list twice and then appended both answers (20 items under the second title), and a slow answer to an
// earlier Recommend overwrote the later one's (or its error wiped them): an answer whose request is no longer
// the latest of its panel is dropped. claim(panel) -> current(): true while that request is still the latest.
const latest = { recs: 0, similar: 0, search: 0 };
function claim(panel) {
  const ticket = ++latest[panel];
  return () => ticket === latest[panel];
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v;
    else if (k === "onclick") node.addEventListener("click", v);
    else node.setAttribute(k, v);
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

async function api(method, path, body) {
  const opts = { method, headers: {} };
  if (body !== undefined) {
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  const res = await fetch(path, opts);
  let data = null;
  try { data = await res.json(); } catch (_) { /* not JSON */ }
  if (res.ok && data === null) {
    // a 200 that is not JSON (the page itself, a proxy's page) is no answer: callers read fields of it
    const err = new Error(`${method} ${path}: the answer is not JSON`);
    err.status = res.status;
    throw err;
  }
  if (!res.ok) {
    const msg = (data && data.error && data.error.message) || (data && data.detail) || res.statusText;
    const err = new Error(msg);
    err.status = res.status;
    throw err;
  }
  return data;
}

// GET /items/{id} or /users/{id}. The ids "." and ".." cannot travel in a path (the browser resolves
// /items/.. to / before it asks, %2e alike), so they are answered as unknown here, as a 404 would be.
function getById(prefix, id) {
  if (/^\.{1,2}$/.test(String(id))) {
    const err = new Error(`the id ${id} cannot be looked up by URL`);
    err.status = 404;
    return Promise.reject(err);
  }
  return api("GET", prefix + encodeURIComponent(id));
}

function setStatus(text, isError) {
  const s = $("status");
  s.textContent = text || "";
  s.className = isError ? "error" : "";
}

// The run's first multi-valued item column (MovieLens's genres, a shop's tags): an explanation's shared_metadata
// lists those columns as arrays, the rule `twotower explain` heads its table by; null when the run has none.
function multiColumn(shared) {
  return Object.keys(shared || {}).find((k) => Array.isArray(shared[k])) || null;
}

function genresOf(item, column) {
  const col = column === undefined ? state.multi : column;
  const g = col ? item[col] : undefined;
  if (Array.isArray(g)) return g;
  return typeof g === "string" && g ? g.split("|") : [];
}

// display_name: the item as the explanation sentences and the CLI name it (a title another item has too, as 18 of
// MovieLens-100K's do, gets its year or id): by the bare title two such items were two identical rows here.
// A search hit (doc_id) and an id the server did not find have none.
function titleOf(item) {
  return item.display_name || item.title || item.name || item.item_id || item.doc_id || "?";
}

function chips(values) {
  const span = el("span", { class: "chips" });
  for (const v of values) span.append(el("span", { class: "chip" }, v));
  return span;
}

function itemLine(item, extra) {
  const title = el("a", { href: "#", class: "title", title: "show similar items",
    onclick: (e) => { e.preventDefault(); showSimilar(item.item_id); } }, titleOf(item));
  const meta = el("span", { class: "meta" });
  const title_ = String(titleOf(item));
  if (typeof item.year === "number" && !title_.includes(String(Math.round(item.year)))) meta.append(el("span", { class: "muted" }, ` ${Math.round(item.year)}`));
  return el("div", { class: "line" }, title, " ", chips(genresOf(item)), meta, extra || null);
}

// An answer's words about itself: its warnings (an item the model cannot place, a new user's unread features) and
// why its list is short. The page showed neither: an item with no similar items was an empty panel under its title.
function answerNotes(res) {
  const notes = (res.warnings || []).map(String);
  if (res.shortfall && res.shortfall.reason) notes.push(String(res.shortfall.reason));
  return notes;
}

function renderNotes(box, notes) {
  box.replaceChildren(...notes.map((n) => el("p", { class: "warning" }, n)));
}

function fmt(x, digits) {
  return typeof x === "number" ? x.toFixed(digits === undefined ? 3 : digits) : "–";
}

// A score (search hit, recommendation, similar item) to 4 significant digits: fixed 3 decimals read RRF's 0.016393 and 0.016129 both "0.016".
// Number() drops toPrecision's exponent (1.235e+5 -> 123500) and its trailing zeros.
function scoreText(x) {
  return typeof x === "number" && Number.isFinite(x) ? String(Number(x.toPrecision(4))) : "–";
}

// POST /search's words about its answer, as the recommend panels show theirs: a short list, a query the dense
// side read only the start of (the CLI notes both on stderr)
function searchNotes(res) {
  const notes = answerNotes(res);
  const cut = res.query_cut;
  if (cut && typeof cut.read === "number") {
    notes.push(`the query is ${cut.word_pieces} word pieces long; dense search read only the first ${cut.read}`);
  }
  return notes;
}

// ------------------------------------------------------------------ explanations

// "year 1985–1995 across the 13 history items sharing a genres value (this item: 1994)": a numeric column's
// range over the history items the server compared (its "count" and "among"), and the item's own value.
function rangeFact(key, v) {
  let among = v.among || "history items";
  if (v.count === 1) among = among.replace("history items", "history item");
  const own = v.item !== null && v.item !== undefined ? ` (this item: ${v.item})` : "";
  return `${key.slice(0, -"_range".length)} ${v.min}–${v.max} across the ${v.count} ${among}${own}`;
}

function explanationBlock(expl) {
  const box = el("div", { class: "explanation" });
  box.append(el("p", { class: "why" }, expl.text || ""));
  const details = el("details", {});
  details.append(el("summary", {}, `details (${expl.method || "loo"}, basis: ${expl.basis})`));
  const hist = expl.history || [];
  // the chips column is the run's own: a fixed "genres" header stood over empty cells for a catalogue of tags
  const col = expl.shared_metadata ? multiColumn(expl.shared_metadata) : state.multi;
  if (hist.length) {
    const maxAbs = Math.max(...hist.map((h) => Math.abs(h.contribution)), 1e-9);
    const table = el("table", { class: "contrib" });
    table.append(el("tr", {}, el("th", {}, "contribution"), el("th", {}, "history item"), col ? el("th", {}, col) : null));
    for (const h of hist) {
      const bar = el("span", { class: h.contribution >= 0 ? "bar pos" : "bar neg" });
      bar.style.width = `${Math.round((60 * Math.abs(h.contribution)) / maxAbs)}px`;
      table.append(el("tr", {},
        el("td", { class: "num" }, bar, ` ${h.contribution >= 0 ? "+" : ""}${fmt(h.contribution, 4)}`),
        el("td", {}, titleOf(h)),
        col ? el("td", {}, chips(genresOf(h, col))) : null));
    }
    details.append(table);
  }
  const shared = expl.shared_metadata || {};
  const facts = [];
  const ranges = [];
  for (const [key, v] of Object.entries(shared)) {
    if (Array.isArray(v) && v.length) facts.push(`${key}: ` + v.map((x) => `${x.value} (${x.count})`).join(", "));
    // a categorical column (decade, brand): one {value, count}, present only when some history item has the value
    else if (v && typeof v === "object" && !Array.isArray(v) && "value" in v) facts.push(`${key}: ${v.value} (${v.count})`);
    else if (key.endsWith("_range") && v && v.min !== null && v.min !== undefined) ranges.push(rangeFact(key, v));
  }
  // a tower that reads no history has no window: the items compared are the whole history, which it does not read
  const compared = expl.reads_history === false ? `your ${shared.history_items} history items (this model does not read them)`
    : `the last ${shared.history_items} history items`;
  if (facts.length) details.append(el("p", { class: "muted shared" }, `shared with ${compared}: ${facts.join("; ")}`));
  // a range is not a shared value, and it spans only the history items its "among" names (those sharing a
  // genre with this item): under "shared with the last N history items" it read as a range over all N
  for (const r of ranges) details.append(el("p", { class: "muted range" }, r));
  if (expl.heads) {
    details.append(el("p", { class: "muted" },
      `heads: α=${fmt(expl.heads.alpha)} · semantic ${fmt(expl.heads.semantic, 4)} · collaborative ${fmt(expl.heads.collaborative, 4)}`));
  }
  if (typeof expl.history_total === "number") {
    details.append(el("p", { class: "muted" }, `the history as a whole adds ${fmt(expl.history_total, 4)} to the score ${fmt(expl.score, 4)}`));
  }
  box.append(details);
  return box;
}

async function explainOne(user, item, slot) {
  slot.textContent = "explaining…";
  try {
    const body = user.user_id ? { user_id: user.user_id, item_id: item.item_id } : { history: user.history, item_id: item.item_id };
    const res = await api("POST", "/explain", body);
    slot.replaceChildren(explanationBlock(res.explanation || res));
  } catch (e) {
    slot.replaceChildren(el("p", { class: "error" }, `no explanation: ${e.message}`));
  }
}

// ------------------------------------------------------------------ panels

function renderHistory(items, note) {
  const list = $("history-list");
  list.replaceChildren();
  // an empty history is a note beside the heading, not a numbered entry that looks like an item
  $("history-note").textContent = items.length ? note || "" : `${note ? note + " · " : ""}no history yet`;
  const howto = $("howto");
  if (howto) howto.classList.add("hidden");
  for (const it of items) list.append(el("li", {}, itemLine(it)));
}

async function loadHistory(user, recs, current) {
  if (user.history) {
    const items = await Promise.all(user.history.slice().reverse().map((id) =>
      getById("/items/", id).catch(() => ({ item_id: id }))));
    if (current()) renderHistory(items, "(ad-hoc, newest first)");
    return;
  }
  if (state.users) {
    try {
      const res = await getById("/users/", user.user_id);
      if (!current()) return;
      const items = res.history || res.items || [];
      const n = res.n_history !== undefined ? res.n_history : items.length;
      // GET /users lists the newest 50: "(218 items, newest first)" over 50 rows read as the whole history
      renderHistory(items, items.length < n ? `(the newest ${items.length} of ${n} items)` : `(${n} items, newest first)`);
      return;
    } catch (e) {
      if (e.status !== 404) throw e;
      if (!current()) return;
    }
  }
  // No history route: show the history items the explanations name.
  const seen = new Map();
  for (const r of recs) for (const h of ((r.explanation || {}).history || [])) if (!seen.has(h.item_id)) seen.set(h.item_id, h);
  renderHistory([...seen.values()], "(the items that explain these recommendations)");
}

function renderRecs(user, items) {
  const list = $("recs-list");
  list.replaceChildren();
  if (!items.length) list.append(el("li", { class: "muted" }, "no recommendations"));
  for (const it of items) {
    const slot = el("div", { class: "slot" });
    const li = el("li", { class: "rec" },
      itemLine(it, el("span", { class: "score" }, `score ${scoreText(it.score)}`)), slot);
    if (it.explanation) {
      const block = explanationBlock(it.explanation);
      if (it === items[0]) block.querySelector("details").open = true; // the top pick shows its evidence
      slot.append(block);
    }
    else slot.append(el("button", { class: "link", onclick: () => explainOne(user, it, slot) }, "why?"));
    list.append(li);
  }
}

async function recommend(user, k, current) {
  setStatus("loading…");
  $("recs-note").textContent = user.user_id ? `for user ${user.user_id}` : "for an ad-hoc history";
  const body = Object.assign({ k, explain: true }, user.user_id ? { user_id: user.user_id } : { history: user.history });
  let res;
  try {
    res = await api("POST", "/recommend", body);
  } catch (e) {
    if (e.status !== 501) throw e;
    body.explain = false; // explanations unavailable on this server: ask per item instead
    res = await api("POST", "/recommend", body);
  }
  if (!current()) return;
  const items = res.items || [];
  renderNotes($("recs-warnings"), answerNotes(res));
  const explained = items.find((it) => it.explanation && it.explanation.shared_metadata);
  if (explained) state.multi = multiColumn(explained.explanation.shared_metadata);
  renderRecs(user, items);
  await loadHistory(user, items, current);
  if (current()) setStatus("");
}

async function showSimilar(itemId) {
  const current = claim("similar");
  $("similar-note").textContent = "";
  const head = $("similar-item");
  const list = $("similar-list");
  list.replaceChildren();
  renderNotes($("similar-warnings"), []);
  try {
    const item = await getById("/items/", itemId).catch(() => ({ item_id: itemId }));
    if (!current()) return;
    head.replaceChildren(el("strong", {}, `like ${titleOf(item)}`), " ", chips(genresOf(item)));
    const res = await api("POST", "/similar-items", { item_id: String(itemId), k: 10 });
    if (!current()) return;
    const items = res.items || [];
    renderNotes($("similar-warnings"), answerNotes(res));
    if (!items.length) list.append(el("li", { class: "muted" }, "no similar items"));
    for (const it of items) list.append(el("li", {}, itemLine(it, el("span", { class: "score" }, scoreText(it.score)))));
    const url = new URL(window.location);
    url.searchParams.set("item", itemId);
    history.replaceState(null, "", url);
  } catch (e) {
    if (current()) head.replaceChildren(el("span", { class: "error" }, e.message));
  }
}

async function search(query) {
  const current = claim("search");
  const url = new URL(window.location);
  url.searchParams.set("q", query); // init() reads ?q= back; it was never written, so a reload lost the search
  history.replaceState(null, "", url);
  const box = $("search-results");
  const list = $("search-list");
  box.classList.remove("hidden");
  renderNotes($("search-warnings"), []);
  list.replaceChildren(el("li", { class: "muted" }, "searching…"));
  try {
    const res = await api("POST", "/search", { query, k: 10 });
    if (!current()) return;
    renderNotes($("search-warnings"), searchNotes(res));
    list.replaceChildren();
    for (const it of res.items || []) {
      const snippet = it.text ? el("div", { class: "muted snippet" }, String(it.text).slice(0, 200)) : null;
      list.append(el("li", {}, el("div", { class: "line" }, el("span", { class: "title" }, titleOf(it)), " ",
        el("span", { class: "score" }, scoreText(it.score))), snippet));
    }
    if (!list.children.length) list.append(el("li", { class: "muted" }, "no results"));
  } catch (e) {
    if (current()) list.replaceChildren(el("li", { class: "error" }, e.message));
  }
}

// ------------------------------------------------------------------ start-up

// The bare page lists real ids to try (GET /examples): the users with the most history and
// a recent history of the first one. Each is a link that fills the form and asks.
async function showExamples() {
  const box = $("examples");
  if (!box || !state.paths.has("GET /examples")) return;
  let ex;
  try { ex = await api("GET", "/examples"); } catch (_) { return; }
  const users = ex.users || [];
  if (!users.length) return;
  const pick = (user) => (e) => {
    e.preventDefault();
    $("user-input").value = user.user_id || "";
    $("history-input").value = user.history ? user.history.join(",") : "";
    submitUser();
  };
  box.replaceChildren("Try a user with a long history: ");
  users.forEach((u, i) => {
    if (i) box.append(", ");
    box.append(el("a", { class: "example-user", href: `?user=${encodeURIComponent(u.user_id)}`,
      onclick: pick({ user_id: u.user_id }) }, u.user_id), ` (${u.n_history} items)`);
  });
  const hist = ex.history || [];
  if (hist.length) {
    box.append("; or the history ", el("a", { class: "example-history",
      href: `?history=${encodeURIComponent(hist.join(","))}`, onclick: pick({ history: hist }) }, hist.join(",")), ".");
  }
}

function readUser() {
  const userId = $("user-input").value.trim();
  const hist = $("history-input").value.split(",").map((s) => s.trim()).filter(Boolean);
  if (userId) return { user_id: userId };
  if (hist.length) return { history: hist };
  return null;
}

async function submitUser(ev) {
  if (ev) ev.preventDefault();
  const user = readUser();
  if (!user) { setStatus("type a user id or a history", true); return; }
  const k = Math.max(1, Math.min(100, parseInt($("k-input").value, 10) || 10));
  const url = new URL(window.location);
  url.searchParams.delete("user");
  url.searchParams.delete("history");
  if (user.user_id) url.searchParams.set("user", user.user_id);
  else url.searchParams.set("history", user.history.join(","));
  url.searchParams.set("k", String(k)); // read back by init(): a reload or shared link asked for 10 again
  history.replaceState(null, "", url);
  const current = claim("recs");
  try {
    await recommend(user, k, current);
  } catch (e) {
    if (!current()) return;
    setStatus(e.message, true);
    $("recs-list").replaceChildren();
    renderHistory([], "");
  }
}

async function init() {
  try {
    const spec = await api("GET", "/openapi.json");
    for (const [path, ops] of Object.entries(spec.paths || {})) for (const m of Object.keys(ops)) state.paths.add(`${m.toUpperCase()} ${path}`);
  } catch (_) { /* no schema: assume the core routes only */ }
  state.search = state.paths.has("POST /search");
  state.users = state.paths.has("GET /users/{user_id}") || [...state.paths].some((p) => p.startsWith("GET /users/{"));
  $("search-form").classList.toggle("hidden", !state.search);
  // a search-only service has no recommender: hide its form and panels
  state.recommend = state.paths.size === 0 || state.paths.has("POST /recommend");
  // and its how-to and similar-items panel: they spoke of user ids and titles to click on a page without either
  for (const id of ["user-form", "history-panel", "recs-panel", "howto-recommend", "similar-box",
    "contrib-note"]) {
    $(id).classList.toggle("hidden", !state.recommend);
  }
  $("howto-search").classList.toggle("hidden", !state.search);
  try {
    const r = await fetch("/readyz").then((x) => x.json());
    $("run-info").textContent = state.recommend
      ? `${r.n_users ?? "?"} users · ${r.n_items ?? "?"} items` + (r.ready === false ? " · index not ready" : "")
      : "text search";
  } catch (_) {
    $("run-info").textContent = "";
  }
  $("user-form").addEventListener("submit", submitUser);
  $("search-form").addEventListener("submit", (ev) => { ev.preventDefault(); const q = $("search-input").value.trim(); if (q) search(q); });
  const params = new URLSearchParams(window.location.search);
  if (params.get("user")) $("user-input").value = params.get("user");
  else if (params.get("history")) $("history-input").value = params.get("history");
  if (params.get("k")) $("k-input").value = params.get("k");
  if (params.get("q") && state.search) { $("search-input").value = params.get("q"); search(params.get("q")); }
  const work = [];
  if (params.get("user") || params.get("history")) work.push(submitUser());
  else if (state.recommend) work.push(showExamples());
  if (params.get("item") && state.recommend) work.push(showSimilar(params.get("item")));
  await Promise.all(work);
  document.body.dataset.ready = "1";
}

init();
