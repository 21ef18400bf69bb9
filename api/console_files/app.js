// The console's shell: sign-in and sign-out, what the token may do, and the sections by their #/ address.
import { call, forget, remember, signedIn } from "./api.js";
import { el, errorBox, replace } from "./dom.js";
import { auditView } from "./audit.js";
import { erasureView } from "./erasure.js";
import { healthView } from "./health.js";
import { identityView } from "./identity.js";
import { memoriesView } from "./memories.js";
import { memoryView } from "./memory.js";
import { turnsView } from "./turns.js";

const VIEWS = { memories: memoriesView, memory: memoryView, audit: auditView, erasure: erasureView,
  turns: turnsView, health: healthView, identity: identityView };
const main = document.getElementById("main");
const signInForm = document.getElementById("sign-in");
export const session = { canWrite: false, token: null };

async function whoAmI() {
  const { body } = await call("GET", "/v1/api/token");
  const admin = body.scopes.includes("service") || body.permissions.includes("admin.memories");
  if (!admin) throw new Error("This token is not an administrator's: it needs the service scope or the "
    + "admin.memories permission.");
  session.token = body;
  session.canWrite = body.scopes.includes("write");
  for (const link of document.querySelectorAll("[data-needs=write]")) link.hidden = !session.canWrite;
}

async function signIn(event) {
  event.preventDefault();
  const input = document.getElementById("token");
  const problem = document.getElementById("sign-in-error");
  problem.textContent = "";
  remember(input.value.trim());
  input.value = "";
  try {
    await whoAmI();
  } catch (error) {
    forget();
    problem.textContent = error.message;
    return;
  }
  if (!location.hash || location.hash === "#/") location.hash = "#/memories";
  else route();
}

function signOut() {
  forget();
  session.token = null;
  session.canWrite = false;
  location.hash = "";
  showSignIn();
}

function showSignIn() {
  document.getElementById("nav").hidden = true;
  replace(main, signInForm);
  document.getElementById("token").focus();
}

async function route() {
  if (!signedIn()) return showSignIn();
  document.getElementById("nav").hidden = false;
  const [name, ...rest] = location.hash.replace(/^#\/?/, "").split("/");
  const view = VIEWS[name];
  if (!view) {
    location.hash = "#/memories";
    return;
  }
  for (const link of document.querySelectorAll("#nav a")) {
    link.toggleAttribute("aria-current", link.getAttribute("href") === `#/${name}`);
  }
  const section = el("section", { "aria-live": "polite" });
  replace(main, section);
  try {
    await view(section, rest.map(decodeURIComponent), session);
  } catch (error) {
    if (error.status === 401) return signOut();
    section.append(errorBox(error));
  }
  main.focus({ preventScroll: true });
}

signInForm.addEventListener("submit", signIn);
document.getElementById("sign-out").addEventListener("click", signOut);
window.addEventListener("hashchange", route);

if (signedIn()) {
  whoAmI().then(route, (error) => { signOut(); document.getElementById("sign-in-error").textContent = error.message; });
} else {
  showSignIn();
}
