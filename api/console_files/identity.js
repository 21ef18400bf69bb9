// Identity: users, their tokens (revoke) and sessions (close); every change is an audited API call.
import { call, query } from "./api.js";
import { el, errorBox, replace, table } from "./dom.js";

export async function identityView(section, _parts, session) {
  const [users, tokens, sessions] = await Promise.all([
    call("GET", `/v1/api/admin/users${query({ limit: 100 })}`),
    call("GET", `/v1/api/admin/tokens${query({ limit: 100 })}`),
    call("GET", `/v1/api/admin/sessions${query({ limit: 100, state: "open" })}`),
  ]);
  const outcome = el("div", { "aria-live": "polite" });
  const act = (label, method, path, done) => (session.canWrite ? el("button", { type: "button", onclick: async () => {
    try {
      await call(method, path, { body: { reason: "from the console" } });
      replace(outcome, el("p", { role: "status" }, done));
      replace(section);
      await identityView(section, _parts, session);
      section.prepend(el("p", { role: "status", class: "ok" }, done));
    } catch (error) { replace(outcome, errorBox(error)); }
  } }, label) : null);
  section.append(el("h2", {}, "Identity"), outcome,
    table("Users", ["Name", "User id", "Created", "Active"], users.body.users.map((user) => el("tr", {},
      el("td", {}, user.name), el("td", {}, user.user_id), el("td", {}, user.created),
      el("td", {}, user.active ? "yes" : `no, since ${user.deactivated_at}`)))),
    table("Tokens", ["Name", "Prefix", "User", "Scopes", "Permissions", "Last used", "State", ""],
      tokens.body.tokens.map((token) => el("tr", {},
        el("td", {}, token.name), el("td", {}, token.prefix), el("td", {}, token.user_id),
        el("td", {}, token.scopes.join(", ")), el("td", {}, token.permissions.join(", ")),
        el("td", {}, token.last_used_at || "never"),
        el("td", {}, token.revoked_at ? `revoked ${token.revoked_at}` : "active"),
        el("td", {}, token.revoked_at || token.token_id === session.token.token_id ? null
          : act(`Revoke ${token.prefix || token.token_id}`, "DELETE",
            `/v1/api/admin/tokens/${encodeURIComponent(token.token_id)}`, `Token ${token.prefix} revoked.`))))),
    table("Open sessions", ["Session", "Kind", "User", "Workstream", "Last active", ""],
      sessions.body.sessions.map((open) => el("tr", {},
        el("td", {}, el("a", { href: `#/turns/${encodeURIComponent(open.session_id)}` }, open.session_id)),
        el("td", {}, open.kind), el("td", {}, open.user_id || ""), el("td", {}, open.workstream_id),
        el("td", {}, open.last_active_at),
        el("td", {}, act(`Close ${open.session_id}`, "DELETE", `/v1/api/sessions/${encodeURIComponent(open.session_id)}`,
          `Session ${open.session_id} closed.`))))));
}
