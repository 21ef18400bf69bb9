/** The public memory API, with the reference SDK's method names and options. */

import { Client } from "./client.js";
import { given, namePath } from "./transport.js";
import type { ListMemoriesResponse, MemoryInfo, MemoryWrite, StatusResponse, WriteResult } from "./types.js";

const MEMORIES = "/v1/api/memories";
const WHITESPACE = /[\u0009-\u000d\u0020\u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]+/g;

export interface ScopeOptions {
  scope?: string;
  scope_id?: string;
}

export interface ListOptions extends ScopeOptions {
  type?: string;
  limit?: number;
}

export interface SaveMemoryRequest extends ScopeOptions {
  name: string;
  content: string;
  description: string;
  /** Omitted (or null): an update keeps the stored type. */
  type?: string | null;
}

/** A page of the public list: `after` is the previous page's `next_after` ('' or left out: the first page). */
export interface MemoryListOptions extends ListOptions {
  after?: string;
}

export interface SearchOptions extends ListOptions {
  query: string;
  /** Hits to skip: the next page is at `offset + limit` (at most 10,000). */
  offset?: number;
}

/** Every page of the list or of a search: `page` memories fetched per request. */
export interface IterOptions extends ScopeOptions {
  type?: string;
  page?: number;
}

/** The server's deepest search offset. */
const SEARCH_OFFSET_CAP = 10_000;

/**
 * Whitespace runs become one space, trimmed; an empty one is refused here. Nothing else: the server's rule, as its
 * OpenAPI document states it (`SaveMemoryRequest.description`: `minLength` 1, no maximum).
 */
export function normalizeMemoryDescription(description: string): string {
  if (typeof description !== "string") throw new TypeError("memory description must be a string");
  const cleaned = description.replace(WHITESPACE, " ").trim();
  if (!cleaned) throw new TypeError("memory description is required and must be non-empty");
  return cleaned;
}

export class MemorydServer extends Client {
  /** A page of the list, newest first; its `next_after` names the next page (null on the last). */
  listMemories(options: MemoryListOptions = {}): Promise<ListMemoriesResponse> {
    return this.transport.send({
      method: "GET", path: MEMORIES, read: true,
      query: { ...given({ type: options.type, scope: options.scope, scope_id: options.scope_id, after: options.after }),
               limit: options.limit ?? 100 },
    });
  }

  /**
   * Every memory of the list, newest first, fetched `page` (200) at a time. Writes meanwhile move what they touch to
   * the front: it may be met again, or not at all; every other memory is met once.
   */
  async *iterMemories(options: IterOptions = {}): AsyncGenerator<MemoryInfo> {
    let after = "";
    for (;;) {
      const found = await this.listMemories({ ...options, limit: options.page ?? 200, after });
      yield* found.memories;
      if (found.next_after === null || found.next_after === undefined) return;
      after = found.next_after;
    }
  }

  async saveMemory(request: SaveMemoryRequest): Promise<MemoryInfo> {
    const body: Record<string, unknown> = {
      name: request.name, content: request.content, description: normalizeMemoryDescription(request.description),
      scope: request.scope ?? "global",
    };
    if (request.type !== undefined && request.type !== null) body["type"] = request.type;
    if (request.scope_id) body["scope_id"] = request.scope_id;
    return this.transport.send({ method: "POST", path: MEMORIES, body });
  }

  /** The `limit` best hits after the `offset` best. */
  searchMemories(options: SearchOptions): Promise<ListMemoriesResponse> {
    return this.transport.send({
      method: "POST", path: `${MEMORIES}/search`, read: true,
      body: { query: options.query, limit: options.limit ?? 20,
              ...given({ type: options.type, scope: options.scope, scope_id: options.scope_id }),
              ...(options.offset ? { offset: options.offset } : {}) },
    });
  }

  /**
   * Every hit, best first, fetched `page` (50) at a time by offset, as deep as the offset cap allows. Each page is
   * ranked when it is read: a write meanwhile may shift a hit across pages.
   */
  async *iterSearchMemories(options: IterOptions & { query: string }): AsyncGenerator<MemoryInfo> {
    const page = options.page ?? 50;
    for (let offset = 0; offset <= SEARCH_OFFSET_CAP; offset += page) {
      const found = await this.searchMemories({ ...options, limit: page, offset });
      yield* found.memories;
      if (found.memories.length < page) return;
    }
  }

  /**
   * Saves and deletes in order, all or none, in one append. A refusal names the write (`writes[2]: ...`) and nothing
   * is written.
   */
  writeMemories(writes: MemoryWrite[]): Promise<WriteResult> {
    return this.transport.send({ method: "POST", path: `${MEMORIES}/batch`, body: { writes } });
  }

  getMemory(name: string, options: ScopeOptions = {}): Promise<MemoryInfo> {
    return this.transport.send({
      method: "GET", path: namePath(MEMORIES, name), read: true,
      query: { scope: options.scope ?? "global", ...given({ scope_id: options.scope_id }) },
    });
  }

  deleteMemory(name: string, options: ScopeOptions = {}): Promise<StatusResponse> {
    return this.transport.send({
      method: "DELETE", path: namePath(MEMORIES, name),
      query: { scope: options.scope ?? "global", ...given({ scope_id: options.scope_id }) },
    });
  }
}
