// Runs sdk/scenarios/*.json with the TypeScript SDK against a live memoryd (tests/sdk/test_scenarios.py
// starts it and passes MEMORYD_SCENARIO_CONTEXT). The rules are those of tests/sdk/scenarios.py: `call`
// and `args` are the Python SDK's, mapped here to the camelCase methods and their options.
// Prints {"failures": [...], "requests": [[method, path], ...]} as JSON.
import { readFileSync } from "node:fs";
import { basename } from "node:path";

import { MemorydAPIError, MemorydConsole, MemorydServer, Session } from "../dist/esm/index.js";

const context = JSON.parse(process.env.MEMORYD_SCENARIO_CONTEXT ?? "{}");
const requests = [];
const fetch = (url, init) => {
  requests.push([init.method, new URL(url).pathname]);
  return globalThis.fetch(url, init);
};
const listing = (a) => ({ type: a.mem_type, scope: a.scope, scope_id: a.scope_id, limit: a.limit, as_of: a.as_of,
                         offset: a.offset });
const CALLS = {
  save_memory: (c, a) => c.saveMemory({ name: a.name, content: a.content, description: a.description,
                                        type: "mem_type" in a ? a.mem_type : "general", scope: a.scope, scope_id: a.scope_id }),
  list_memories: (c, a) => (c instanceof MemorydConsole ? c.listMemories(listing(a))
                                                        : c.listMemories({ ...listing(a), after: a.after })),
  iter_memories: async (c, a) => {
    const memories = [];
    for await (const memory of c.iterMemories({ type: a.mem_type, scope: a.scope, scope_id: a.scope_id, page: a.page })) {
      memories.push(memory);
    }
    return memories;
  },
  iter_search_memories: async (c, a) => {
    const memories = [];
    for await (const memory of c.iterSearchMemories({ query: a.query, type: a.mem_type, scope: a.scope,
                                                      scope_id: a.scope_id, page: a.page })) {
      memories.push(memory);
    }
    return memories;
  },
  write_memories: (c, a) => c.writeMemories(a.writes),
  search_memories: (c, a) => (c instanceof MemorydConsole ? c.searchMemories({ q: a.query, ...listing(a) })
                                                          : c.searchMemories({ query: a.query, offset: a.offset,
                                                                               ...listing(a) })),
  get_memory: (c, a) => (c instanceof MemorydConsole ? c.getMemory(a.memory_id, { as_of: a.as_of })
                                                     : c.getMemory(a.name, { scope: a.scope, scope_id: a.scope_id })),
  delete_memory: (c, a) => (c instanceof MemorydConsole ? c.deleteMemory(a.memory_id)
                                                        : c.deleteMemory(a.name, { scope: a.scope, scope_id: a.scope_id })),
  memory_history: (c, a) => c.memoryHistory(a.memory_id),
  restore_memory: (c, a) => c.restoreMemory(a.memory_id, a.version),
  erase: (c, a) => c.erase(a),
  edit_memory: (c, a) => c.editMemory(a.memory_id, { content: a.content, description: a.description, type: a.mem_type,
                                                     if_match: a.if_match }),
  preview_erasure: (c, a) => c.previewErasure(a),
  verify_chain: async (c, a) => {
    const pages = [];
    for await (const page of c.verifyChain({ page: a.page })) pages.push(page);
    return pages;
  },
  iter_audit: async (c, a) => {
    const records = [];
    for await (const record of c.iterAudit(a)) records.push(record);
    return records;
  },
  iter_events: async (c, a) => {
    const events = [];
    for await (const event of c.iterEvents({ after: a.after, page: a.page })) events.push(event);
    return events;
  },
  create_project: (c, a) => c.createProject({ name: a.name, owner: a.owner }),
  get_project: (c, a) => c.getProject(a.project_id),
  delete_project: (c, a) => c.deleteProject(a.project_id),
  grant_access: (c, a) => c.grantAccess(a.project_id, a.user_id, a.access),
  revoke_access: (c, a) => c.revokeAccess(a.project_id, a.user_id),
  archive_project: (c, a) => c.archiveProject(a.project_id),
  reactivate_project: (c, a) => c.reactivateProject(a.project_id),
  create_workstream: (c, a) => c.createWorkstream(a),
  update_workstream: (c, a) => c.updateWorkstream(a.workstream_id, { project_id: a.project_id, memory: a.memory }),
  open_session: (c, a) => c.openSession(a),
  session_of: (c, a) => c.sessionOf(a.token),
  describe: (s) => s.describe(),
  turns_showing: (c, a) => c.turnsShowing(a.memory_id, { limit: a.limit }),
  session_turns: (c, a) => c.sessionTurns(a.session_id, { after: a.after, limit: a.limit }),
  current_token: (c) => c.currentToken(),
  list_users: (c, a) => c.listUsers(a),
  create_user: (c, a) => c.createUser({ name: a.name }),
  get_user: (c, a) => c.getUser(a.user_id),
  deactivate_user: (c, a) => c.deactivateUser(a.user_id, { reason: a.reason }),
  reactivate_user: (c, a) => c.reactivateUser(a.user_id, { reason: a.reason }),
  list_tokens: (c, a) => c.listTokens(a),
  create_token: (c, a) => c.createToken(a),
  revoke_token: (c, a) => c.revokeToken(a.token_id, { reason: a.reason }),
  list_sessions: (c, a) => c.listSessions(a),
  close_session: (c, a) => c.closeSession(a.session_id, { reason: a.reason }),
  list_projects: (c, a) => c.listProjects(a),
  list_workstreams: (c, a) => c.listWorkstreams(a),
  memory: (s, a) => s.memory(a),
  turn: (s, a) => s.turn(a),
  signal: (s, a) => s.signal(a),
  receipt: (s, a) => s.receipt(a.turn_id),
};

const WHOLE = /^\{([\w.]+)\}$/;
const PART = /\{([\w.]+)\}/g;
const lookup = (path, names) => path.split(".").reduce((value, part) => value[part], names);

function resolve(value, names) {
  if (typeof value === "string") {
    const whole = WHOLE.exec(value);
    return whole ? lookup(whole[1], names) : value.replace(PART, (_, path) => String(lookup(path, names)));
  }
  if (Array.isArray(value)) return value.map((item) => resolve(item, names));
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, resolve(item, names)]));
  }
  return value;
}

function mismatch(expected, actual, where = "result") {
  if (Array.isArray(expected)) {
    if (!Array.isArray(actual) || actual.length !== expected.length) {
      return `${where}: expected ${expected.length} items, got ${JSON.stringify(actual)}`;
    }
    for (const [number, item] of expected.entries()) {
      const problem = mismatch(item, actual[number], `${where}[${number}]`);
      if (problem) return problem;
    }
    return null;
  }
  if (expected !== null && typeof expected === "object") {
    if (actual === null || typeof actual !== "object") return `${where}: expected an object, got ${JSON.stringify(actual)}`;
    for (const [key, item] of Object.entries(expected)) {
      if (!(key in actual)) return `${where}.${key}: missing`;
      const problem = mismatch(item, actual[key], `${where}.${key}`);
      if (problem) return problem;
    }
    return null;
  }
  return expected === actual ? null : `${where}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`;
}

function counted(result) {
  for (const key of ["memories", "records", "receipts", "nudges"]) if (result && key in result) return result[key].length;
  return result.length;
}

const clients = {
  server: new MemorydServer({ baseUrl: context.base_url, token: context.token, fetch }),
  console: new MemorydConsole({ baseUrl: context.base_url, token: context.admin_token, fetch }),
};
const failures = [];
for (const path of process.argv.slice(2)) {
  const scenario = JSON.parse(readFileSync(path, "utf8"));
  const names = { ...context };
  for (const [number, step] of scenario.steps.entries()) {
    const label = `${basename(path)} step ${number} (${step.client}.${step.call})`;
    const client = clients[step.client] ?? names[`session:${step.client}`];
    let result;
    try {
      result = await CALLS[step.call](client, resolve(step.args ?? {}, names));
    } catch (error) {
      if (!(error instanceof MemorydAPIError)) failures.push(`${label}: ${error}`);
      else if (error.statusCode !== step.error) failures.push(`${label}: HTTP ${error.statusCode}: ${error.errorMessage}`);
      continue;
    }
    if ("error" in step) {
      failures.push(`${label}: expected HTTP ${step.error}, it succeeded`);
      continue;
    }
    if (result instanceof Session) {
      if (step.save) names[`session:${step.save}`] = result;
      result = { ...result.info, session_id: result.sessionId };
    }
    if (step.save) names[step.save] = result;
    const problem = "expect" in step ? mismatch(resolve(step.expect, names), result) : null;
    if (problem) failures.push(`${label}: ${problem}`);
    if ("count" in step && counted(result) !== step.count) {
      failures.push(`${label}: expected ${step.count} items, got ${counted(result)}`);
    }
  }
}
process.stdout.write(JSON.stringify({ failures, requests }) + "\n");
