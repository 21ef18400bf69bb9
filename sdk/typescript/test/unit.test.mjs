// Unit tests with an injected fetch: the reference method shapes, errors, retries, idempotency keys,
// read-your-writes positions and a turn that fails open. The live scenarios are in scenarios.mjs.
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { test } from "node:test";

import { MemorydAPIError, MemorydConnectionError, MemorydConsole, MemorydServer } from "../dist/esm/index.js";
import { TurnstoneAPIError, TurnstoneConsole, TurnstoneServer } from "../dist/esm/turnstone.js";

const MEMORY = { memory_id: "m1", name: "deploy_steps", description: "how", type: "general", scope: "global",
                 scope_id: "", content: "buildkite", created: "t", updated: "t" };

function json(status, body, headers = {}) {
  return new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json", ...headers } });
}

function recording(...answers) {
  const calls = [];
  const fetch = async (url, init) => {
    calls.push({ url: new URL(url), init });
    const next = answers.length > 1 ? answers.shift() : answers[0];
    if (next instanceof Error) throw next;
    return typeof next === "function" ? next() : next.clone();
  };
  return { calls, fetch };
}

test("the reference methods send the reference requests", async () => {
  const { calls, fetch } = recording(json(200, { memories: [MEMORY], total: 1 }));
  const server = new MemorydServer({ baseUrl: "http://memoryd/", token: "tok", fetch });
  await server.listMemories({ type: "", scope: "user" });
  await server.searchMemories({ query: "deploy" });
  await server.getMemory("a/b c", { scope: "user" });
  const [list, search, get] = calls;
  assert.equal(list.url.toString(), "http://memoryd/v1/api/memories?scope=user&limit=100");
  assert.equal(list.init.headers.Authorization, "Bearer tok");
  assert.equal(search.init.method, "POST");
  assert.deepEqual(JSON.parse(search.init.body), { query: "deploy", limit: 20 });
  assert.equal(get.url.pathname, "/v1/api/memories/a%2Fb%20c");
  const console = new MemorydConsole({ baseUrl: "http://memoryd", fetch });
  await console.searchMemories({ q: "deploy", limit: 5 });
  assert.equal(calls.at(-1).url.search, "?q=deploy&limit=5");
});

test("the iterators follow next_after through the list and offset through a search", async () => {
  const { calls, fetch } = recording(
    json(200, { memories: [MEMORY, MEMORY], total: 2, next_after: "c1" }),
    json(200, { memories: [MEMORY], total: 1, next_after: null }),
    json(200, { memories: [MEMORY, MEMORY], total: 2 }),
    json(200, { memories: [MEMORY], total: 1 }));
  const server = new MemorydServer({ baseUrl: "http://memoryd", fetch });
  const listed = [];
  for await (const memory of server.iterMemories({ scope: "user", page: 2 })) listed.push(memory);
  const found = [];
  for await (const memory of server.iterSearchMemories({ query: "deploy", page: 2 })) found.push(memory);
  assert.equal(listed.length, 3);
  assert.equal(found.length, 3);
  assert.deepEqual(calls.slice(0, 2).map((call) => call.url.search),
                   ["?scope=user&limit=2", "?scope=user&after=c1&limit=2"]);
  assert.deepEqual(calls.slice(2).map((call) => JSON.parse(call.init.body)),
                   [{ query: "deploy", limit: 2 }, { query: "deploy", limit: 2, offset: 2 }]);
});

test("the console's reads send as_of only when given", async () => {
  const { calls, fetch } = recording(json(200, { memories: [MEMORY], total: 1 }));
  const console = new MemorydConsole({ baseUrl: "http://memoryd", fetch });
  await console.getMemory("m1", { as_of: 42 });
  await console.listMemories({ scope: "global", as_of: "2026-12-01T10:00:00Z" });
  await console.searchMemories({ q: "deploy", as_of: new Date(Date.UTC(2026, 11, 1, 10)) });
  await console.getMemory("m1", { as_of: 0 });
  await console.listMemories();
  await console.searchMemories({ q: "deploy", as_of: "" });
  await console.getMemory("m1");
  assert.deepEqual(calls.map((call) => call.url.searchParams.get("as_of")),
                   ["42", "2026-12-01T10:00:00Z", "2026-12-01T10:00:00.000Z", "0", null, null, null]);
  assert.equal(calls[1].url.search, "?scope=global&limit=100&as_of=2026-12-01T10%3A00%3A00Z");
  assert.equal(calls[2].url.search, "?q=deploy&limit=20&as_of=2026-12-01T10%3A00%3A00.000Z");
  assert.equal(calls[6].url.search, "");
});

test("a save normalizes the description, omits a null type and refuses an empty description", async () => {
  const { calls, fetch } = recording(json(201, MEMORY, { "X-Memory-Position": "7" }));
  const server = new MemorydServer({ fetch });
  await server.saveMemory({ name: "n", content: "c", description: "  how \n we  deploy ", type: null });
  assert.deepEqual(JSON.parse(calls[0].init.body), { name: "n", content: "c", description: "how we deploy", scope: "global" });
  await assert.rejects(server.saveMemory({ name: "n", content: "c", description: " \t " }), TypeError);
  assert.equal(calls.length, 1);
  await server.saveMemory({ name: "n", content: "c", description: "d".repeat(20000) });  // no maximum: the server has none
  assert.equal(JSON.parse(calls[1].init.body).description.length, 20000);
});

test("a session handle carries its own token", async () => {
  const { fetch } = recording(json(201, { session_id: "s1", token: "mds_opened", kind: "interactive" }));
  const console_ = new MemorydConsole({ token: "admin", fetch });
  const opened = await console_.openSession({ kind: "interactive", workstream_id: "w1" });
  assert.equal(opened.token, "mds_opened");
  assert.equal(console_.session("s2", "mds_given").token, "mds_given");
});

test("a turn sends the tool names the model sees", async () => {
  const { calls, fetch } = recording(json(200, { turn_id: "t", nudges: [] }));
  const session = new MemorydConsole({ fetch }).session("s1", "mds_x");
  await session.turn({ query: "q", tool_names: { search: "memory_search" } });
  assert.deepEqual(JSON.parse(calls[0].init.body).tool_names, { search: "memory_search" });
});

test("errors carry the status and the server's message", async () => {
  const { fetch } = recording(json(404, { error: "Memory 'x' not found" }));
  const error = await new MemorydServer({ fetch }).getMemory("x").catch((caught) => caught);
  assert.ok(error instanceof MemorydAPIError && error instanceof TurnstoneAPIError);
  assert.equal(error.statusCode, 404);
  assert.equal(error.errorMessage, "Memory 'x' not found");
  assert.equal(error.message, "HTTP 404: Memory 'x' not found");
});

test("retries honour Retry-After, reuse the write's idempotency key and stop on a client error", async () => {
  const { calls, fetch } = recording(json(503, { error: "busy" }, { "Retry-After": "0" }), new TypeError("reset"),
                                     json(201, MEMORY));
  await new MemorydServer({ fetch }).saveMemory({ name: "n", content: "c", description: "d" });
  const keys = calls.map((call) => call.init.headers["Idempotency-Key"]);
  assert.equal(keys.length, 3);
  assert.ok(keys[0] && keys.every((key) => key === keys[0]));
  const refused = recording(json(400, { error: "bad" }));
  await assert.rejects(new MemorydServer({ fetch: refused.fetch }).listMemories(), MemorydAPIError);
  assert.equal(refused.calls.length, 1);
});

const IN_PROGRESS = json(409, { error: "still running", code: "request_in_progress" }, { "Retry-After": "0" });
const DATABASE_DOWN = json(503, { error: "the database is unavailable", code: "database_unavailable" },
                           { "Retry-After": "0" });

test("a write whose key is still in use is retried with that key; only a real conflict is raised", async () => {
  const { calls, fetch } = recording(IN_PROGRESS, IN_PROGRESS, IN_PROGRESS, json(201, MEMORY));
  await new MemorydServer({ fetch }).saveMemory({ name: "n", content: "c", description: "d" });
  const keys = calls.map((call) => call.init.headers["Idempotency-Key"]);
  assert.equal(keys.length, 4);
  assert.ok(keys[0] && keys.every((key) => key === keys[0]));
  const conflict = recording(json(409, { error: "key reused for another request" }));
  const error = await new MemorydServer({ fetch: conflict.fetch }).saveMemory({ name: "n", content: "c", description: "d" })
    .catch((caught) => caught);
  assert.equal(error.statusCode, 409);
  assert.equal(error.code, undefined);
  assert.equal(conflict.calls.length, 1);
  const stuck = recording(IN_PROGRESS);
  const running = await new MemorydServer({ fetch: stuck.fetch, retryDeadlineMs: 0 })
    .saveMemory({ name: "n", content: "c", description: "d" }).catch((caught) => caught);
  assert.equal(running.code, "request_in_progress");
});

test("an unavailable database is retried past maxRetries until the deadline", async () => {
  const { calls, fetch } = recording(DATABASE_DOWN, DATABASE_DOWN, DATABASE_DOWN, DATABASE_DOWN, DATABASE_DOWN,
                                     json(200, { memories: [], total: 0 }));
  assert.equal((await new MemorydServer({ fetch }).listMemories()).total, 0);
  assert.equal(calls.length, 6);
  const down = recording(DATABASE_DOWN);
  const error = await new MemorydServer({ fetch: down.fetch, retryDeadlineMs: 0 }).listMemories().catch((caught) => caught);
  assert.equal(error.statusCode, 503);
  assert.equal(error.code, "database_unavailable");
  assert.equal(down.calls.length, 1);
});

test("reads after a write carry its position unless turned off", async () => {
  for (const [readYourWrites, expected] of [[true, "42"], [false, undefined]]) {
    const { calls, fetch } = recording(json(201, MEMORY, { "X-Memory-Position": "42" }));
    const server = new MemorydServer({ fetch, readYourWrites });
    await server.listMemories();
    assert.equal(calls[0].init.headers["X-Min-Position"], undefined);
    await server.saveMemory({ name: "n", content: "c", description: "d" });
    await server.searchMemories({ query: "c" });
    assert.equal(calls.at(-1).init.headers["X-Min-Position"], expected);
  }
});

test("a turn makes one attempt, aborted at its timeout, fails open and names itself", async () => {
  const hang = () => new Promise(() => {});
  const { calls, fetch } = recording(hang);
  const session = new TurnstoneServer({ fetch: (url, init) => {
    calls.push({ url, init });
    return new Promise((_, reject) => init.signal.addEventListener("abort", () => reject(new DOMException("aborted", "AbortError"))));
  } }).session("s1", "mds_x");
  const turn = await session.turn({ messages: [{ role: "user", content: "hi" }], system: "You code.", timeoutMs: 200 });
  assert.equal(calls.length, 1); // one attempt, ended by its own timeout (its wall time is in bench/agents)
  assert.ok(calls[0].init.signal.aborted);
  assert.equal(turn.system_message.content, "You code.");
  assert.match(turn.degraded, /^memoryd unavailable/);
  assert.match(JSON.parse(calls[0].init.body).turn_id, /^turn_/);
  await assert.rejects(session.turn({ query: "hi", timeoutMs: 100, failOpen: false }), MemorydConnectionError);
});

test("the CommonJS build loads too", () => {
  const require = createRequire(import.meta.url);
  const sdk = require("../dist/cjs/index.js");
  assert.equal(typeof sdk.MemorydServer, "function");
  assert.equal(new TurnstoneConsole({}).constructor.name, "MemorydConsole");
});
