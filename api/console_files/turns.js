// What the agent saw: a session's turns with their receipts (the block as rebuilt, the memories chosen with
// their versions' positions and scores, and whether the block matches what was sent).
import { call, query } from "./api.js";
import { definitions, el, errorBox, field, replace, table } from "./dom.js";

export async function turnsView(section, [sessionId = ""]) {
  const input = el("input", { name: "session_id", value: sessionId, required: true });
  const form = el("form", { class: "filters", "aria-label": "Choose a session" }, field("Session id", input),
    el("button", { type: "submit" }, "Show turns"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    location.hash = `#/turns/${encodeURIComponent(input.value.trim())}`;
  });
  const shown = el("div", {});
  section.append(el("h2", {}, "Turns: what the agent saw"), form, shown);
  if (sessionId) await showTurns(shown, sessionId, 0);
}

async function showTurns(shown, sessionId, after) {
  let page;
  try {
    page = (await call("GET", `/v1/api/admin/sessions/${encodeURIComponent(sessionId)}/turns${query({ after, limit: 50 })}`)).body;
  } catch (error) {
    replace(shown, errorBox(error));
    return;
  }
  if (!page.receipts.length) return replace(shown, el("p", {}, "No turn in this session yet."));
  replace(shown, ...page.receipts.map(receiptView),
    page.receipts.length === 50 ? el("button", { type: "button", onclick: () => showTurns(shown, sessionId,
      page.next_after) }, "Later turns") : null);
}

function receiptView(receipt) {
  return el("details", { class: "receipt" },
    el("summary", {}, `Turn ${receipt.turn} (${receipt.turn_id}) at ${receipt.created}: ${receipt.items.length} memories`
      + `${receipt.block_matches === false ? ", block does NOT match" : ""}`),
    definitions([["Receipt", receipt.receipt_id], ["Log position", String(receipt.position)],
      ["Placement", receipt.placement], ["Memory enabled", String(receipt.memory_enabled)],
      ["Block matches what was sent", receipt.block_matches === null || receipt.block_matches === undefined
        ? "not checked" : receipt.block_matches ? "yes" : "no"],
      ["Block SHA-256", receipt.block_sha256], ["Degraded", receipt.degraded || "no"]]),
    table("Memories chosen", ["Name", "Type", "Scope", "Score", "As of position"], receipt.items.map((item) =>
      el("tr", {},
        el("td", {}, el("a", { href: `#/memory/${encodeURIComponent(item.memory_id)}/${item.position}` }, item.name)),
        el("td", {}, item.type), el("td", {}, item.scope), el("td", {}, typeof item.score === "number" ? item.score.toFixed(2) : ""),
        el("td", {}, String(item.position))))),
    el("h4", {}, "The block, rebuilt from the log"), el("pre", { class: "content" }, receipt.block || "(none)"));
}
