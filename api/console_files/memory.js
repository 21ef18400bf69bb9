// One memory: what it holds and who wrote it, an edit at its version (a conflict shows the version that
// won beside the edit), delete, its history from the log with a diff of any two versions, and restore.
import { call, query } from "./api.js";
import { diffView } from "./diff.js";
import { definitions, el, errorBox, field, replace, table } from "./dom.js";

const TYPES = ["user", "general", "feedback", "reference"];

export async function memoryView(section, [memoryId, asOf = ""], session) {
  const path = `/v1/api/admin/memories/${encodeURIComponent(memoryId)}`;
  const [found, history, shown] = await Promise.all([
    call("GET", `${path}${query({ as_of: asOf })}`).catch((error) => error),
    call("GET", `${path}/history`).then((answer) => answer.body.versions, () => []),
    call("GET", `${path}/turns${query({ limit: 20 })}`).then((answer) => answer.body.receipts, () => []),
  ]);
  section.append(el("p", {}, el("a", { href: "#/memories" }, "← Memories")));
  if (found instanceof Error) {
    section.append(el("h2", {}, "Memory"), errorBox(found));
  } else {
    const memory = found.body;
    const latest = history.filter((version) => !asOf || version.position <= Number(found.headers.get("X-As-Of-Position")))
      .at(-1);
    section.append(el("h2", {}, memory.name));
    if (asOf) section.append(el("p", { class: "notice", role: "status" },
        `As it was at log position ${found.headers.get("X-As-Of-Position")} (asked: ${asOf}). `,
        el("a", { href: `#/memory/${encodeURIComponent(memoryId)}` }, "See it now")));
    section.append(details(memory, latest));
    if (!asOf && session.canWrite) section.append(editor(path, memory, section, memoryId));
  }
  if (history.length) section.append(historyView(path, memoryId, history, session));
  section.append(turnsShown(shown, memoryId));
}

// The newest turns that put this memory in front of a model, each leading to its session's receipts.
function turnsShown(receipts, memoryId) {
  return el("section", { "aria-labelledby": "shown-title" },
    el("h3", { id: "shown-title" }, "Turns that showed it"),
    receipts.length
      ? table("The newest turns whose block held this memory", ["Session", "Turn", "Time", "Score", "Version's position"],
        receipts.map((receipt) => {
          const item = receipt.items.find((candidate) => candidate.memory_id === memoryId) || {};
          return el("tr", {},
            el("td", {}, el("a", { href: `#/turns/${encodeURIComponent(receipt.session_id)}` }, receipt.session_id)),
            el("td", {}, `${receipt.turn} (${receipt.turn_id})`), el("td", {}, receipt.created),
            el("td", {}, typeof item.score === "number" ? item.score.toFixed(2) : ""), el("td", {}, String(item.position ?? "")));
        }))
      : el("p", {}, "No recorded turn showed it (receipts expire after the configured retention)."));
}

function details(memory, latest) {
  return definitions([
    ["Content", el("pre", { class: "content" }, memory.content)],
    ["Description", memory.description],
    ["Type", memory.type],
    ["Scope", memory.scope_id ? `${memory.scope}:${memory.scope_id}` : memory.scope],
    ["Version", String(memory.version)],
    ["Log position", latest ? String(latest.position) : ""],
    ["Written by", latest ? `${latest.actor || "(no user)"} through ${latest.surface || "?"}` : ""],
    ["Created", memory.created],
    ["Updated", memory.updated],
    ["Reads", memory.access_count === undefined ? "" : `${memory.access_count}, last ${memory.last_accessed || "never"}`],
    ["Memory id", memory.memory_id],
  ]);
}

function editor(path, memory, section, memoryId) {
  const content = el("textarea", { name: "content", rows: 6 }, memory.content);
  const description = el("input", { name: "description", value: memory.description });
  const type = el("select", { name: "type" }, TYPES.map((name) => el("option", { selected: name === memory.type }, name)));
  const outcome = el("div", { "aria-live": "polite" });
  const reload = () => { replace(section); memoryView(section, [memoryId], { canWrite: true }); };
  const save = async (version) => {
    const edit = { content: content.value, description: description.value, type: type.value };
    try {
      await call("PATCH", path, { body: edit, headers: { "If-Match": `"${version}"` } });
      reload();
    } catch (error) {
      if (error.status !== 412) return replace(outcome, errorBox(error));
      const current = await call("GET", path).then((answer) => answer.body, () => null);
      replace(outcome, conflict(edit, current, error.body.current_version, save, reload));
    }
  };
  const form = el("form", { class: "editor", "aria-labelledby": "edit-title" },
    el("h3", { id: "edit-title" }, `Edit (at version ${memory.version})`),
    field("Content", content), field("Description", description), field("Type", type),
    el("button", { type: "submit" }, "Save"), outcome);
  form.addEventListener("submit", (event) => { event.preventDefault(); save(memory.version); });
  const confirmDelete = el("div", { "aria-live": "polite" });
  const remove = el("button", { type: "button", class: "danger", onclick: () => replace(confirmDelete,
    el("p", {}, `Delete ${memory.name} at version ${memory.version}? The log keeps its history.`),
    el("button", { type: "button", class: "danger", onclick: async () => {
      try {
        await call("DELETE", path, { headers: { "If-Match": `"${memory.version}"` } });
        replace(section, el("p", { role: "status" }, `${memory.name} was deleted. `),
          el("a", { href: "#/memories" }, "Back to memories"));
      } catch (error) {
        replace(confirmDelete, error.status === 412
          ? el("p", { class: "error", role: "alert" }, `Someone saved version ${error.body.current_version} meanwhile: `
            + "nothing was deleted. Reload to see it first.")
          : errorBox(error));
      }
    } }, "Yes, delete it")) }, "Delete…");
  return el("div", {}, form, el("div", { class: "delete" }, remove, confirmDelete));
}

function conflict(edit, current, version, save, reload) {
  if (!current) return el("div", { class: "conflict", role: "alert" }, el("p", {}, "The memory was deleted meanwhile: "
    + "nothing was saved."), el("button", { type: "button", onclick: reload }, "Reload"));
  return el("div", { class: "conflict", role: "alert" },
    el("p", {}, `Someone saved version ${version} while you edited: nothing was saved. Compare and choose.`),
    el("div", { class: "side-by-side" },
      el("div", {}, el("h4", {}, `Current (version ${version})`), definitions([["Content", el("pre", {}, current.content)],
        ["Description", current.description], ["Type", current.type]])),
      el("div", {}, el("h4", {}, "Your edit"), definitions([["Content", el("pre", {}, edit.content)],
        ["Description", edit.description], ["Type", edit.type]]))),
    el("h4", {}, "What your edit changes in the current version"), diffView(current.content, edit.content),
    el("button", { type: "button", onclick: () => save(version) }, `Save mine over version ${version}`),
    el("button", { type: "button", onclick: reload }, "Discard mine"));
}

function historyView(path, memoryId, versions, session) {
  const before = versionSelect("from", versions, Math.max(0, versions.length - 2));
  const after = versionSelect("to", versions, versions.length - 1);
  const shown = el("div", { "aria-live": "polite" });
  const compare = () => {
    const [a, b] = [versions[before.selectedIndex], versions[after.selectedIndex]];
    replace(shown, el("h4", {}, `Version ${a.version} → version ${b.version}`),
      field2("Content", diffView(a.memory.content, b.memory.content)),
      field2("Description", diffView(a.memory.description, b.memory.description)),
      field2("Type", diffView(a.memory.type, b.memory.type)));
  };
  before.addEventListener("change", compare);
  after.addEventListener("change", compare);
  compare();
  const outcome = el("div", { "aria-live": "polite" });
  const rows = versions.map((version) => el("tr", {},
    el("td", {}, String(version.version)), el("td", {}, version.event_type + (version.superseded ? " (superseded)" : "")),
    el("td", {}, String(version.position)), el("td", {}, version.time), el("td", {}, version.actor),
    el("td", {}, version.surface),
    el("td", {}, el("a", { href: `#/memory/${encodeURIComponent(memoryId)}/${version.position}` }, "as of here"), " ",
      session.canWrite && version.event_type !== "memory.delete" ? el("button", { type: "button", onclick: async () => {
        try {
          const answer = await call("POST", `${path}/restore`, { body: { version: version.version } });
          replace(outcome, el("p", { role: "status" }, `Version ${version.version} restored as version `
            + `${answer.body.version}. `, el("a", { href: `#/memory/${encodeURIComponent(answer.body.memory_id)}` },
            "Reload")));
        } catch (error) { replace(outcome, errorBox(error)); }
      } }, `Restore v${version.version}`) : null)));
  return el("section", { "aria-labelledby": "history-title" },
    el("h3", { id: "history-title" }, "History (from the log)"),
    table("Every write of this memory, oldest first",
      ["Version", "Event", "Position", "Time", "Actor", "Surface", ""], rows), outcome,
    el("div", { class: "filters" }, field("Diff from", before), field("to", after)), shown);
}

function versionSelect(name, versions, selected) {
  return el("select", { name }, versions.map((version, index) =>
    el("option", { selected: index === selected }, `v${version.version} (${version.event_type}, ${version.time})`)));
}

function field2(label, value) {
  return el("div", {}, el("strong", {}, `${label}: `), value);
}
