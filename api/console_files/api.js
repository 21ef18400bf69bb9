// The console's only way to memoryd: its JSON API, with the signed-in token as a bearer header (never in a
// URL, a cookie or a log), marked as the console so the audit trail records the surface.

const KEY = "memoryd.console.token";
let token = sessionStorage.getItem(KEY) || "";
let pending = 0;
let busyTimer = null;

export class ApiError extends Error {
  constructor(status, body) {
    super(body && body.error ? `${body.error} (HTTP ${status})` : `The server answered HTTP ${status}`);
    this.status = status;
    this.body = body || {};
  }
}

export function signedIn() {
  return token !== "";
}

export function remember(value) {
  token = value;
  sessionStorage.setItem(KEY, value);
}

// Signing out forgets the token and everything else this tab kept (the chain's last walk too).
export function forget() {
  token = "";
  sessionStorage.clear();
}

function busy(delta) {
  pending += delta;
  const indicator = document.getElementById("busy");
  clearTimeout(busyTimer);
  if (pending > 0) busyTimer = setTimeout(() => { indicator.hidden = false; }, 120);
  else indicator.hidden = true;
}

export function query(values) {
  const kept = Object.entries(values).filter(([, value]) => value !== "" && value !== null && value !== undefined);
  return kept.length ? `?${new URLSearchParams(kept)}` : "";
}

// `call("GET", path)` -> {body, headers}; a non-2xx answer throws ApiError with the server's words.
export async function call(method, path, { body, headers = {}, raw = false } = {}) {
  const sent = { "X-Memoryd-Surface": "console", ...headers };
  if (token) sent.Authorization = `Bearer ${token}`;
  if (body !== undefined) sent["Content-Type"] = "application/json";
  busy(1);
  try {
    let response;
    try {
      response = await fetch(path, { method, headers: sent, body: body === undefined ? undefined : JSON.stringify(body),
        credentials: "omit", cache: "no-store", referrerPolicy: "no-referrer" });
    } catch (error) {
      throw new ApiError(0, { error: `memoryd could not be reached: ${error.message}` });
    }
    const text = await response.text();
    let parsed = null;
    if (!raw) {
      try { parsed = text ? JSON.parse(text) : null; } catch { parsed = null; }
    }
    if (!response.ok) throw new ApiError(response.status, parsed);
    return { body: raw ? text : parsed, headers: response.headers, status: response.status };
  } finally {
    busy(-1);
  }
}
