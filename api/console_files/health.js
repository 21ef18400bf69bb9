// Health: readiness, each projection's checkpoint and lag, a stopped projection with its event and the way
// out, the search index, and the worker queue (from /readyz and /metrics, which every monitor reads too).
import { call } from "./api.js";
import { definitions, el, errorBox, table } from "./dom.js";

export async function healthView(section) {
  section.append(el("h2", {}, "Health"));
  const [ready, metrics] = await Promise.all([
    call("GET", "/readyz").then((answer) => answer.body, (error) => (error.status === 503 ? error.body : error)),
    call("GET", "/metrics", { raw: true }).then((answer) => gauges(answer.body), (error) => error),
  ]);
  if (ready instanceof Error) return section.append(errorBox(ready));
  const values = metrics instanceof Error ? new Map() : metrics;
  section.append(
    el("p", { role: "status", class: ready.status === "ready" ? "ok" : "error" },
      `Status: ${ready.status}${ready.error ? ` (${ready.error})` : ""}; log head at position ${ready.head ?? "?"}`
      + `${ready.degraded && ready.degraded.length ? `; degraded: ${ready.degraded.join(", ")}` : ""}.`),
    table("Projections", ["Projection", "Checkpoint", "Lag (events)", "State"],
      Object.entries(ready.lag || {}).map(([name, lag]) => el("tr", {}, el("td", {}, name),
        el("td", {}, String(values.get(`memoryd_projection_checkpoint{projection="${name}"}`) ?? (ready.head - lag))),
        el("td", {}, String(lag)),
        el("td", {}, ready.stopped && ready.stopped[name] ? "stopped" : lag > ready.max_lag ? "lagging" : "ok")))),
    ...Object.entries(ready.stopped || {}).map(([name, fault]) => el("section", { class: "fault", role: "alert" },
      el("h3", {}, `${name} is stopped at position ${fault.position}`),
      definitions([["Event type", fault.event_type], ["Error", fault.error],
        ["The way out", el("span", {}, "Supersede the event with a corrected one: ",
          el("code", {}, `memoryd events supersede ${fault.position}`),
          " (see the operations guide); the projection applies the replacement and goes on.")]]))),
    el("h3", {}, "Search index"),
    definitions([["Analyzer", ready.search ? ready.search.analyzer : ""],
      ["Started from", ready.search ? ready.search.index : ""],
      ["Memories indexed", String(values.get("memoryd_search_index_memories") ?? "")],
      ["Parts", String(values.get("memoryd_search_index_parts") ?? "")],
      ["Position applied", String(values.get("memoryd_search_index_position") ?? "")]]),
    el("h3", {}, "Worker queue"),
    values.has("memoryd_queue_up")
      ? definitions([["Redis", values.get("memoryd_queue_up") ? "answers" : "down (writes project in the API process)"],
        ["Workers", String(values.get("memoryd_queue_workers") ?? "")],
        ["Jobs waiting", String(values.get("memoryd_queue_jobs") ?? "")],
        ["Failed jobs", String(values.get("memoryd_queue_failed_jobs") ?? "")]])
      : el("p", {}, "No queue: projections run in the API process."));
}

// Prometheus' text format -> Map of "name{labels}" -> number (gauges and counters alike).
function gauges(text) {
  const found = new Map();
  for (const line of text.split("\n")) {
    const match = /^([a-z_:]+(?:\{[^}]*\})?)\s+(\S+)$/.exec(line);
    if (match) found.set(match[1], Number(match[2]));
  }
  return found;
}
