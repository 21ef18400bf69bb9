// Erasure: name a user, a memory or a namespace, see what would go, confirm with a reason, and keep the
// certificate memoryd answers (shown, and downloadable as JSON).
import { call, query } from "./api.js";
import { counted, download, el, errorBox, field, replace, table } from "./dom.js";

const KINDS = { user_id: "A user (their memories, and every memory they wrote)", memory_id: "One memory",
  scope: "A namespace (scope and scope id)" };

export async function erasureView(section, _parts, session) {
  section.append(el("h2", {}, "Erasure"));
  if (!session.canWrite) {
    section.append(el("p", {}, "This token cannot write, so it cannot erase."));
    return;
  }
  const kind = el("select", { name: "kind" }, Object.entries(KINDS).map(([value, label]) => el("option", { value }, label)));
  const subject = el("input", { name: "subject", required: true });
  const scopeId = el("input", { name: "scope_id" });
  const scopeIdField = field("Scope id", scopeId);
  scopeIdField.hidden = true;
  kind.addEventListener("change", () => { scopeIdField.hidden = kind.value !== "scope"; });
  const outcome = el("div", { "aria-live": "polite" });
  const form = el("form", { class: "filters", "aria-label": "What to erase" },
    field("Erase", kind), field("User id, memory id or scope", subject), scopeIdField,
    el("button", { type: "submit" }, "Preview"));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const selector = kind.value === "scope"
      ? { scope: subject.value.trim(), scope_id: scopeId.value.trim() } : { [kind.value]: subject.value.trim() };
    try {
      const preview = (await call("GET", `/v1/api/admin/erasures/preview${query(selector)}`)).body;
      replace(outcome, previewView(selector, preview, outcome));
    } catch (error) {
      replace(outcome, errorBox(error));
    }
  });
  section.append(form, outcome);
}

function previewView(selector, preview, outcome) {
  if (!preview.memories.length) return el("p", { role: "status" }, "Nothing to erase: no memory in the log matches.");
  const reason = el("input", { name: "reason", required: true, placeholder: "the request's reference" });
  const confirm = el("form", { class: "confirm", "aria-label": "Confirm the erasure" },
    field("Reason (kept in the log)", reason),
    el("button", { type: "submit", class: "danger" },
      `Erase ${counted(preview.memories.length, "memory", "memories")} and `
      + `${counted(preview.positions.length, "event", "events")}`));
  confirm.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const certificate = (await call("POST", "/v1/api/admin/erasures", { body: { ...selector, reason: reason.value },
        headers: { "Idempotency-Key": `console-erasure-${[...crypto.getRandomValues(new Uint32Array(4))].map((n) => n.toString(36)).join("")}` } })).body;
      replace(outcome, certificateView(certificate));
    } catch (error) {
      confirm.append(errorBox(error));
    }
  });
  return el("div", {},
    el("p", { role: "status" }, `This would erase ${counted(preview.memories.length, "memory", "memories")} from `
      + `everything memoryd stores, and redact ${counted(preview.positions.length, "event", "events")} of the log `
      + "(the hash chain still verifies)."),
    table("Memories that would be erased", ["Name", "Scope", "Type", "Description", "Memory id"],
      preview.memories.map((memory) => el("tr", {}, el("td", {}, memory.name),
        el("td", {}, memory.scope_id ? `${memory.scope}:${memory.scope_id}` : memory.scope), el("td", {}, memory.type),
        el("td", {}, memory.description), el("td", {}, memory.memory_id)))),
    confirm);
}

export function certificateView(certificate) {
  return el("section", { class: "certificate", "aria-labelledby": "certificate-title" },
    el("h3", { id: "certificate-title" }, `Erasure certificate (log position ${certificate.position})`),
    el("p", { role: "status", class: certificate.free ? "ok" : "error" }, certificate.free
      ? "Every store was read back and holds nothing of the erased memories."
      : "Some store still holds something of the erased memories: see the checks."),
    table("Each store, read back", ["Store", "Free", "Details"], certificate.checks.map((check) => el("tr", {},
      el("td", {}, check.store), el("td", {}, check.free ? "yes" : "NO"),
      el("td", {}, check.detail || "")))),
    el("p", {}, `Erased at ${certificate.erased_at} by ${certificate.erased_by}, reason: ${certificate.reason}; `
      + `${counted(certificate.memories.length, "memory", "memories")}, log positions ${certificate.positions.join(", ")}.`),
    download(`erasure-${certificate.position}.json`, certificate),
    el("pre", { class: "json" }, JSON.stringify(certificate, null, 2)));
}
