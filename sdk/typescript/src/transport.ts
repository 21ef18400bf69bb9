/**
 * HTTP for every client: auth, retries with backoff, idempotency keys, read-your-writes positions, errors.
 *
 * Retried: network errors and timeouts, 408, 429, 502, 503 and 504, and a 409 `request_in_progress` (the
 * call's key is held by its own earlier attempt). An answer with `Retry-After` (memoryd's for a database
 * restarting or a key in use) is retried after that wait as often as `retryDeadlineMs` (from the call's start)
 * allows; the others at most `maxRetries` times, 0.5 s doubling with jitter, capped at 8 s, within the deadline
 * too. Every write carries an `Idempotency-Key` chosen once per call, so a retried write is applied at most
 * once. The highest
 * `X-Memory-Position` any answer carried is sent as `X-Min-Position` on reads.
 */

import { apiError, MemorydConnectionError } from "./errors.js";

export type Fetch = (input: string, init?: RequestInit) => Promise<Response>;

export interface ClientOptions {
  /** Default http://localhost:8080. */
  baseUrl?: string;
  token?: string;
  /** Called before every request; wins over `token`. */
  tokenFactory?: () => string | Promise<string>;
  /** Default globalThis.fetch (Node >= 20, browsers, workers); pass one with an agent for custom TLS. */
  fetch?: Fetch;
  /** Per attempt, default 30000. */
  timeoutMs?: number;
  /** Retries of failures that do not say when to come back (network errors, 502, 504, ...); default 2. */
  maxRetries?: number;
  /** How long a call may go on retrying, from its start; answers with `Retry-After` are retried until then.
   * Default 30000; 0 turns retries off. */
  retryDeadlineMs?: number;
  /** Send the highest position seen as X-Min-Position on reads (default true). */
  readYourWrites?: boolean;
}

export type Query = Record<string, string | number | boolean | null | undefined>;

export interface Call {
  method: string;
  path: string;
  query?: Query;
  body?: unknown;
  /** Sends X-Min-Position (read your writes). */
  read?: boolean;
  /** The Idempotency-Key, when the call names it (a turn: its turn_id); other writes get one of their own. */
  key?: string;
  timeoutMs?: number;
  retries?: number;
  /** Write only at this version (sent as If-Match). */
  ifMatch?: number;
}

const RETRY_STATUSES = new Set([408, 429, 502, 503, 504]);
const IN_PROGRESS = "request_in_progress"; // a 409's code: the key's first attempt has not answered yet
const WRITES = new Set(["POST", "PUT", "PATCH", "DELETE"]);
const BACKOFF_MS = 500;
const BACKOFF_CAP_MS = 8000;

/** The highest log position a client (and the sessions it opened) has been answered. */
export class Positions {
  highest = 0;

  saw(position: number): void {
    if (position > this.highest) this.highest = position;
  }
}

/** Query parameters without the empty ones (the reference SDK's rule). */
export function given(values: Query): Query {
  return Object.fromEntries(Object.entries(values).filter(([, value]) => value !== undefined && value !== ""));
}

export class Transport {
  readonly baseUrl: string;
  readonly positions: Positions;
  private readonly options: ClientOptions;
  private readonly fetcher: Fetch;

  constructor(options: ClientOptions = {}, positions: Positions = new Positions()) {
    this.options = options;
    this.baseUrl = (options.baseUrl ?? "http://localhost:8080").replace(/\/+$/, "");
    this.fetcher = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
    this.positions = positions;
  }

  /** This transport for another token (a session's), sharing its fetch and positions. */
  withToken(token: string): Transport {
    return new Transport({ ...this.options, token, tokenFactory: undefined }, this.positions);
  }

  async send<T>(call: Call): Promise<T> {
    // Every POST, PUT, PATCH and DELETE carries an Idempotency-Key, the same on each of its retries.
    const key = call.key ?? (WRITES.has(call.method) ? `sdk-${crypto.randomUUID()}` : undefined);
    const retries = new Retries(call.retries ?? this.options.maxRetries ?? 2, this.options.retryDeadlineMs ?? 30000);
    for (;;) {
      let response: Response;
      try {
        response = await this.attempt(call, key);
      } catch (error) {
        const wait = await retries.wait(undefined);
        if (wait === undefined) throw failure(error);
        await sleep(wait);
        continue;
      }
      const wait = await retries.wait(response);
      if (wait === undefined) return this.outcome<T>(response);
      await sleep(wait);
    }
  }

  private async attempt(call: Call, key: string | undefined): Promise<Response> {
    const token = this.options.tokenFactory ? await this.options.tokenFactory() : this.options.token ?? "";
    const headers: Record<string, string> = { Accept: "application/json" };
    if (token) headers["Authorization"] = `Bearer ${token}`;
    if (key) headers["Idempotency-Key"] = key;
    if (call.ifMatch !== undefined) headers["If-Match"] = `"${call.ifMatch}"`;
    if (call.read && (this.options.readYourWrites ?? true) && this.positions.highest) {
      headers["X-Min-Position"] = String(this.positions.highest);
    }
    let body: string | undefined;
    if (call.body !== undefined) {
      headers["Content-Type"] = "application/json";
      body = JSON.stringify(call.body);
    }
    const query = new URLSearchParams();
    for (const [name, value] of Object.entries(call.query ?? {})) {
      if (value !== undefined && value !== null) query.set(name, String(value));
    }
    const url = `${this.baseUrl}${call.path}${query.size ? `?${query}` : ""}`;
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), call.timeoutMs ?? this.options.timeoutMs ?? 30000);
    try {
      const response = await this.fetcher(url, { method: call.method, headers, body, signal: controller.signal });
      await response.clone().arrayBuffer(); // the whole answer arrives within the timeout too
      return response;
    } finally {
      clearTimeout(timer);
    }
  }

  private async outcome<T>(response: Response): Promise<T> {
    const text = await response.text();
    let body: unknown = null;
    try {
      body = text ? JSON.parse(text) : null;
    } catch {
      body = null;
    }
    if (response.status >= 400) throw apiError(response.status, body, text);
    const position = response.headers.get("X-Memory-Position");
    if (position && /^\d+$/.test(position)) this.positions.saw(Number(position));
    return body as T;
  }
}

/** One call's retries: how many of the counted kind it has made, and when it must stop. */
class Retries {
  private counted = 0;
  private readonly ends: number;

  constructor(private readonly limit: number, deadlineMs: number) {
    this.ends = Date.now() + deadlineMs;
  }

  /** Milliseconds to wait before trying again after `response` (undefined: the connection failed), or undefined to stop. */
  async wait(response: Response | undefined): Promise<number | undefined> {
    if (this.limit === 0 || (response !== undefined && !(await retryable(response)))) return undefined;
    const header = response?.headers.get("Retry-After")?.trim();
    const told = header && /^\d+$/.test(header) ? Math.min(Number(header) * 1000, BACKOFF_CAP_MS) : undefined;
    if (told === undefined && this.counted >= this.limit) return undefined;
    const wait = told ?? Math.min(BACKOFF_MS * 2 ** this.counted, BACKOFF_CAP_MS) * (0.5 + Math.random() / 2);
    if (Date.now() + wait >= this.ends) return undefined; // no attempt starts at the deadline or after it
    if (told === undefined) this.counted += 1;
    return wait;
  }
}

async function retryable(response: Response): Promise<boolean> {
  if (response.status !== 409) return RETRY_STATUSES.has(response.status);
  try {
    const body = (await response.clone().json()) as { code?: unknown } | null;
    return body?.code === IN_PROGRESS;
  } catch {
    return false;
  }
}

function failure(error: unknown): MemorydConnectionError {
  const timedOut = error instanceof Error && (error.name === "AbortError" || error.name === "TimeoutError");
  const reason = error instanceof Error ? error.message : String(error);
  return new MemorydConnectionError(
    timedOut ? `memoryd did not answer in time: ${reason}` : `memoryd could not be reached: ${reason}`,
    timedOut,
    { cause: error },
  );
}

function sleep(milliseconds: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, milliseconds));
}

export function namePath(prefix: string, name: string): string {
  return `${prefix}/${encodeURIComponent(name)}`;
}
