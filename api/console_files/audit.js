// The audit trail from the log, filtered and paged by position, and the hash chain verified in pages (as
// `memoryd audit verify` does), each page a short request so the server is never held.
import { call, query } from "./api.js";
import { el, errorBox, field, replace, table } from "./dom.js";

const ACTIONS = ["", "memory.*", "identity.*", "project.*", "memory.save", "memory.update", "memory.delete", "memory.erase", "event.supersede",
  "user.create", "user.deactivate", "user.reactivate", "token.create", "token.revoke", "session.open",
  "session.close", "project.create", "project.grant", "project.revoke", "project.archive", "project.reactivate",
  "project.delete"];
const CHAIN_PAGE = 2000;
const filters = { action: "", actor: "", memory_id: "", since: "", limit: 50 };
const CHAIN_KEY = "memoryd.console.chain"; // this tab's last complete walk: {position, hash, time, events}
let lastVerified = null;

export async function auditView(section) {
  const form = el("form", { class: "filters", "aria-label": "Filter the audit trail" },
    field("Action", el("select", { name: "action" }, ACTIONS.map((action) =>
      el("option", { value: action, selected: action === filters.action }, action || "any")))),
    field("Actor (user id)", el("input", { name: "actor", value: filters.actor })),
    field("Memory id", el("input", { name: "memory_id", value: filters.memory_id })),
    field("From time", el("input", { name: "since", value: filters.since, placeholder: "2026-11-30T09:00:00Z" })),
    el("button", { type: "submit" }, "Apply"));
  const records = el("div", {});
  section.append(el("h2", {}, "Audit"), chainPanel(), el("h3", {}, "Audit trail"), form, records);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const data = new FormData(form);
    for (const key of ["action", "actor", "memory_id", "since"]) filters[key] = String(data.get(key)).trim();
    showPage(records, 0, []);
  });
  await showPage(records, 0, []);
}

async function showPage(records, after, earlier) {
  let page;
  try {
    page = (await call("GET", `/v1/api/admin/audit${query({ action: filters.action, actor: filters.actor,
      memory_id: filters.memory_id, since: filters.since, after, limit: filters.limit })}`)).body;
  } catch (error) {
    replace(records, errorBox(error));
    return;
  }
  const rows = page.records.map((record) => el("tr", {},
    el("td", {}, String(record.position)), el("td", {}, record.time), el("td", {}, record.action),
    el("td", {}, record.actor), el("td", {}, record.surface),
    el("td", {}, record.memory_id ? el("a", { href: `#/memory/${encodeURIComponent(record.memory_id)}` },
      record.name || record.memory_id) : (record.user_id || record.token_id || record.session_id || record.project_id || "")),
    el("td", {}, record.scope_id ? `${record.scope}:${record.scope_id}` : record.scope || ""),
    el("td", {}, record.reason || "")));
  const previous = earlier.length
    ? el("button", { type: "button", onclick: () => showPage(records, earlier.at(-1), earlier.slice(0, -1)) }, "Previous page")
    : null;
  const next = page.records.length === filters.limit
    ? el("button", { type: "button", onclick: () => showPage(records, page.next_after, [...earlier, after]) }, "Next page")
    : null;
  replace(records,
    page.records.length
      ? table(`Audit records after position ${after}`, ["Position", "Time", "Action", "Actor", "Surface", "Subject",
        "Scope", "Reason"], rows)
      : el("p", {}, "No audit record matches."),
    el("div", { class: "pager" }, previous, next));
}

function chainPanel() {
  lastVerified = JSON.parse(sessionStorage.getItem(CHAIN_KEY) || "null"); // none after a sign-out
  const state = el("p", { role: "status" }, lastVerified
    ? `Verified up to position ${lastVerified.position} at ${lastVerified.time} (${lastVerified.events} events).`
    : "Not verified from this console yet.");
  const progress = el("progress", { max: 1, value: 0, "aria-label": "Chain verification progress", hidden: true });
  const button = el("button", { type: "button" }, lastVerified ? "Verify the rest" : "Verify the chain");
  button.addEventListener("click", () => verify(state, progress, button));
  return el("section", { class: "chain", "aria-labelledby": "chain-title" },
    el("h3", { id: "chain-title" }, "Hash chain"), state, progress, button);
}

async function verify(state, progress, button) {
  button.disabled = true;
  progress.hidden = false;
  let after = lastVerified ? lastVerified.position : 0;
  let hash = lastVerified ? lastVerified.hash : "";
  let events = lastVerified ? lastVerified.events : 0;
  try {
    for (;;) {
      const page = (await call("GET", `/v1/api/admin/audit/chain${query({ after, hash, limit: CHAIN_PAGE })}`)).body;
      events += page.events;
      if (page.broken) {
        state.textContent = `The log does not verify at position ${page.broken.position}: ${page.broken.reason} `
          + `(${events} events before it verified).`;
        state.className = "error";
        return;
      }
      ({ position: after, hash } = page.reached);
      progress.max = Math.max(1, page.head.position);
      progress.value = after;
      state.textContent = `Verifying… ${after} of ${page.head.position}`;
      if (page.complete) break;
    }
    lastVerified = { position: after, hash, events, time: new Date().toISOString() };
    sessionStorage.setItem(CHAIN_KEY, JSON.stringify(lastVerified));
    state.textContent = `Verified up to position ${after} at ${lastVerified.time} (${events} events): `
      + `the log is complete and unaltered up to hash ${hash.slice(0, 16)}….`;
    state.className = "ok";
    button.textContent = "Verify the rest";
  } catch (error) {
    state.textContent = error.message;
    state.className = "error";
  } finally {
    button.disabled = false;
  }
}
