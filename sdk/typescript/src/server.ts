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

export interface SearchOptions extends ListOptions {
  query: string;
}

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
  listMemories(options: ListOptions = {}): Promise<ListMemoriesResponse> {
    return this.transport.send({
      method: "GET", path: MEMORIES, read: true,
      query: { ...given({ type: options.type, scope: options.scope, scope_id: options.scope_id }), limit: options.limit ?? 100 },
    });
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

  searchMemories(options: SearchOptions): Promise<ListMemoriesResponse> {
    return this.transport.send({
      method: "POST", path: `${MEMORIES}/search`, read: true,
      body: { query: options.query, limit: options.limit ?? 20,
              ...given({ type: options.type, scope: options.scope, scope_id: options.scope_id }) },
    });
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
