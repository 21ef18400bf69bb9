// Memories: the admin list and BM25 search across every scope, filtered, newest first, optionally as of a
// log position or a time; each row opens the memory.
import { call, query } from "./api.js";
import { counted, el, errorBox, field, highlighted, replace, table } from "./dom.js";

const PAGE = 50;
const DEEPEST = 10_000; // the admin list's largest offset: narrow the filters to see past it
const SCOPES = ["", "global", "user", "workstream", "coordinator", "project"];
const TYPES = ["", "user", "general", "feedback", "reference"];
const state = { scope: "", scope_id: "", type: "", q: "", as_of: "", offset: 0 };

function select(name, options, value) {
  return el("select", { name }, options.map((option) =>
    el("option", { value: option, selected: option === value }, option || "any")));
}

export async function memoriesView(section) {
  const form = el("form", { class: "filters", role: "search", "aria-label": "Filter memories" },
    field("Search (BM25)", el("input", { name: "q", type: "search", value: state.q })),
    field("Scope", select("scope", SCOPES, state.scope)),
    field("Scope id", el("input", { name: "scope_id", value: state.scope_id })),
    field("Type", select("type", TYPES, state.type)),
    field("As of (position or time)", el("input", { name: "as_of", value: state.as_of,
      placeholder: "now, or 1207, or 2026-11-30T09:00:00Z" })),
    el("button", { type: "submit" }, "Apply"));
  const results = el("div", {});
  section.append(el("h2", {}, "Memories"), form, results);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const data = new FormData(form);
    for (const key of ["q", "scope", "scope_id", "type", "as_of"]) state[key] = String(data.get(key)).trim();
    state.offset = 0;
    show(results);
  });
  await show(results);
}

async function show(results) {
  const searching = state.q !== "";
  const params = { scope: state.scope, scope_id: state.scope_id, type: state.type, as_of: state.as_of,
    limit: PAGE, ...(searching ? { q: state.q } : { offset: state.offset || "" }) };
  let answer;
  try {
    answer = await call("GET", `/v1/api/admin/memories${searching ? "/search" : ""}${query(params)}`);
  } catch (error) {
    replace(results, errorBox(error));
    return;
  }
  const { memories, total } = answer.body;
  const at = answer.headers.get("X-As-Of-Position");
  const summary = searching
    ? `${counted(memories.length, "best match", "best matches")} for “${state.q}”`
    : memories.length ? `${state.offset + 1}–${state.offset + memories.length} of ${total} memories, most recently `
      + "updated first" : `${total} memories`;
  const rows = memories.map((memory) => el("tr", {},
    el("td", {}, el("a", { href: `#/memory/${encodeURIComponent(memory.memory_id)}${at ? `/${at}` : ""}` },
      highlighted(memory.name, state.q))),
    el("td", {}, highlighted(memory.description, state.q),
      searching ? el("div", { class: "snippet" }, highlighted(snippet(memory.content, state.q), state.q)) : null),
    el("td", {}, memory.type),
    el("td", {}, memory.scope_id ? `${memory.scope}:${memory.scope_id}` : memory.scope),
    el("td", {}, memory.version ?? ""),
    el("td", {}, memory.updated),
    searching ? el("td", {}, memory.score === undefined ? "" : memory.score.toFixed(2)) : null));
  const headings = ["Name", "Description", "Type", "Scope", "Version", "Updated", ...(searching ? ["Score"] : [])];
  const turn = (offset) => () => { state.offset = offset; show(results); };
  const pager = searching ? null : el("div", { class: "pager" },
    state.offset > 0 ? el("button", { type: "button", onclick: turn(Math.max(0, state.offset - PAGE)) }, "Previous page")
      : null,
    state.offset + memories.length < total && state.offset + PAGE <= DEEPEST
      ? el("button", { type: "button", onclick: turn(state.offset + PAGE) }, "Next page") : null);
  replace(results,
    el("p", { class: "summary", role: "status" }, summary, at ? ` — as of log position ${at}` : ""),
    memories.length ? table("Memories", headings, rows) : el("p", {}, "No memory matches."),
    pager);
}

// The part of `content` around the first matched word, so a long memory shows why it matched.
function snippet(content, q) {
  const words = q.toLowerCase().match(/[\p{L}\p{N}_]+/gu) || [];
  const lower = content.toLowerCase();
  const found = Math.min(...words.map((word) => lower.indexOf(word)).filter((index) => index >= 0), Infinity);
  const start = Number.isFinite(found) ? Math.max(0, found - 60) : 0;
  return `${start > 0 ? "…" : ""}${content.slice(start, start + 200)}${content.length > start + 200 ? "…" : ""}`;
}
