/** The admin API: every scope, by memory id; projects, workstreams, sessions' receipts, the audit log and the log itself. */

import { Client } from "./client.js";
import { given, namePath } from "./transport.js";
import type { ListOptions } from "./server.js";
import type {
  AuditPage, AuditRecord, ChainPage, ClosedSessions, CreatedToken, ErasureCertificate, ErasurePreview, EventPage,
  ListMemoriesResponse, LoggedEvent, MemoryHistory, MemoryInfo, ProjectInfo, ProjectPage, ReceiptList, ReceiptPage,
  SessionPage, StatusResponse, TokenInfo, TokenPage, UserInfo, UserPage, WorkstreamInfo, WorkstreamPage,
} from "./types.js";

const ADMIN = "/v1/api/admin";

export interface AsOfOptions {
  /**
   * Answer as at this log position, or this time (ISO 8601, e.g. "2026-12-01T10:00:00Z", or a `Date`), built from
   * the log; left out: as memoryd stands now.
   */
  as_of?: number | string | Date;
}

export interface AdminListOptions extends ListOptions, AsOfOptions {
  /** Memories to skip, newest first: a page's start (0 to 10,000). */
  offset?: number;
}

export interface AdminSearchOptions extends ListOptions, AsOfOptions {
  q: string;
}

export interface AuditOptions {
  action?: string;
  actor?: string;
  memory_id?: string;
  project_id?: string;
  after?: number;
  /** Only records from this time on (ISO 8601). */
  since?: string;
  /** Records fetched per request (default 100). */
  page?: number;
}

export interface EventsOptions {
  /** The log position to read after (default 0: from the start). */
  after?: number;
  /** Events fetched per request (default 100). */
  page?: number;
}

export interface EraseOptions {
  /** Why (a request's reference, say): it stays in the log. */
  reason: string;
  /** Name exactly one: a user (every memory of theirs), a memory, or a namespace (`scope` and `scope_id`). */
  user_id?: string;
  memory_id?: string;
  scope?: string;
  scope_id?: string;
}

export interface EditMemoryOptions {
  content?: string;
  description?: string;
  type?: string;
  /** Write only at this version (If-Match): a 412 naming the current one otherwise. */
  if_match?: number;
}

export type ErasureSelector = Omit<EraseOptions, "reason">;

export interface CreateWorkstreamRequest {
  name: string;
  owner?: string | null;
  project_id?: string | null;
  memory?: boolean;
}

export interface WorkstreamChange {
  /** A project id attaches it, null detaches; leave it out to keep the attachment. */
  project_id?: string | null;
  memory?: boolean;
}

/** A list's paging: pass the previous page's `next_after` as `after` ('' or left out: the first page). */
export interface PageOptions {
  after?: string;
  /** Default 100, at most 1000. */
  limit?: number;
}

export interface ProjectListOptions extends PageOptions {
  owner?: string;
  member?: string;
  state?: "active" | "archived";
}

export interface WorkstreamListOptions extends PageOptions {
  owner?: string;
  /** Attached to a project this user is in. */
  member?: string;
  project_id?: string;
}

export interface UserListOptions extends PageOptions {
  state?: "active" | "deactivated";
  name?: string;
}

export interface TokenListOptions extends PageOptions {
  user_id?: string;
  state?: "active" | "revoked" | "expired";
}

export interface SessionListOptions extends PageOptions {
  user_id?: string;
  workstream_id?: string;
  state?: "open" | "closed";
}

export interface CreateTokenRequest {
  user_id: string;
  /** Some of read, write (implies read), service (implies write). */
  scopes: string[];
  permissions?: string[];
  /** What the token is for. */
  name?: string;
  /** ISO 8601; not with `expires_in_days`. Neither: the server's `[auth] default_token_days`. */
  expires_at?: string;
  expires_in_days?: number;
}

export interface ReasonOptions {
  /** Why (kept in the audit trail); optional. */
  reason?: string;
}

/** A list's query: its filters left out when empty, then `after` and `limit`. */
function paged(options: PageOptions & Record<string, string | number | undefined>): Record<string, string | number> {
  const { after, limit, ...filters } = options;
  return { ...given({ ...filters, after }), limit: limit ?? 100 };
}

/** A `reason` body, or none. */
function reasoned(options: ReasonOptions): { reason: string } | undefined {
  return options.reason ? { reason: options.reason } : undefined;
}

/** `as_of` as the wire takes it: a position or a time, as text (a `Date` in ISO 8601, UTC). */
function asOf(options: AsOfOptions): string | undefined {
  const value = options.as_of;
  if (value instanceof Date) return value.toISOString();
  return value === undefined || value === null ? undefined : String(value);
}

export class MemorydConsole extends Client {
  /** Every scope's memories; with `as_of`, as the list was then. */
  listMemories(options: AdminListOptions = {}): Promise<ListMemoriesResponse> {
    return this.transport.send({
      method: "GET", path: `${ADMIN}/memories`, read: true,
      query: { ...given({ type: options.type, scope: options.scope, scope_id: options.scope_id }), limit: options.limit ?? 100,
               ...given({ as_of: asOf(options), offset: options.offset || undefined }) },
    });
  }

  /** Search every scope; with `as_of`, over the memories as they were then, ranked as they were then. */
  searchMemories(options: AdminSearchOptions): Promise<ListMemoriesResponse> {
    return this.transport.send({
      method: "GET", path: `${ADMIN}/memories/search`, read: true,
      query: { q: options.q, limit: options.limit ?? 20,
               ...given({ type: options.type, scope: options.scope, scope_id: options.scope_id, as_of: asOf(options) }) },
    });
  }

  /** A memory by id; with `as_of`, as it was then (a 404 if it did not exist then). */
  getMemory(memoryId: string, options: AsOfOptions = {}): Promise<MemoryInfo> {
    return this.transport.send({
      method: "GET", path: namePath(`${ADMIN}/memories`, memoryId), read: true, query: given({ as_of: asOf(options) }),
    });
  }

  deleteMemory(memoryId: string): Promise<StatusResponse> {
    return this.transport.send({ method: "DELETE", path: namePath(`${ADMIN}/memories`, memoryId) });
  }

  /** Bring a version back (as its history lists it), as a new write audited like any save. */
  restoreMemory(memoryId: string, version: number): Promise<MemoryInfo> {
    return this.transport.send({
      method: "POST", path: `${namePath(`${ADMIN}/memories`, memoryId)}/restore`, body: { version },
    });
  }

  /**
   * Change a memory's content, description or type (those given), in whichever scope it is: at `if_match`, else at
   * the version memoryd reads.
   */
  editMemory(memoryId: string, options: EditMemoryOptions): Promise<MemoryInfo> {
    return this.transport.send({
      method: "PATCH", path: namePath(`${ADMIN}/memories`, memoryId), ifMatch: options.if_match,
      body: { content: options.content, description: options.description, type: options.type },
    });
  }

  /** What `erase` with the same selector would take now: the memories and the log positions. */
  previewErasure(selector: ErasureSelector): Promise<ErasurePreview> {
    return this.transport.send({
      method: "GET", path: `${ADMIN}/erasures/preview`,
      query: given({ user_id: selector.user_id, memory_id: selector.memory_id, scope: selector.scope,
                     scope_id: selector.scope_id }),
    });
  }

  /**
   * Walk the log's hash chain `page` events a request, yielding each page (its `reached` position is the progress);
   * the last one is `complete`, or names where the chain is `broken`.
   */
  async *verifyChain(options: { page?: number } = {}): AsyncGenerator<ChainPage> {
    let after = 0;
    let hash = "";
    for (;;) {
      const found = await this.transport.send<ChainPage>({
        method: "GET", path: `${ADMIN}/audit/chain`, query: { after, limit: options.page ?? 2000, ...given({ hash }) },
      });
      yield found;
      if (found.complete || found.broken) return;
      ({ position: after, hash } = found.reached);
    }
  }

  /**
   * Erase a user's memories, one memory, or a namespace's from the log and every read model; the certificate lists
   * what was erased and each store read back.
   */
  erase(options: EraseOptions): Promise<ErasureCertificate> {
    return this.transport.send({
      method: "POST", path: `${ADMIN}/erasures`, // the options left out are undefined: JSON leaves them out too
      body: { user_id: options.user_id, memory_id: options.memory_id, scope: options.scope,
              scope_id: options.scope_id, reason: options.reason },
    });
  }

  /** Every write of one memory, oldest first, from the log (deleted memories too). */
  memoryHistory(memoryId: string): Promise<MemoryHistory> {
    return this.transport.send({ method: "GET", path: `${namePath(`${ADMIN}/memories`, memoryId)}/history`, read: true });
  }

  /** Every audit record after `after`, oldest first, fetched `page` at a time. */
  async *iterAudit(options: AuditOptions = {}): AsyncGenerator<AuditRecord> {
    const page = options.page ?? 100;
    let after = options.after ?? 0;
    for (;;) {
      const found = await this.transport.send<AuditPage>({
        method: "GET", path: `${ADMIN}/audit`,
        query: { after, limit: page, ...given({ action: options.action, actor: options.actor,
                                                 memory_id: options.memory_id, project_id: options.project_id,
                                                 since: options.since }) },
      });
      yield* found.records;
      if (found.records.length < page) return;
      after = found.next_after;
    }
  }

  /**
   * The log itself after position `after`, oldest first, fetched `page` at a time (a change feed: resume from
   * the last `position` seen).
   */
  async *iterEvents(options: EventsOptions = {}): AsyncGenerator<LoggedEvent> {
    const page = options.page ?? 100;
    let after = options.after ?? 0;
    for (;;) {
      const found = await this.transport.send<EventPage>({
        method: "GET", path: `${ADMIN}/events`, query: { after, limit: page },
      });
      yield* found.events;
      if (found.events.length < page) return;
      after = found.next_after;
    }
  }

  createProject(request: { name: string; owner: string }): Promise<ProjectInfo> {
    return this.transport.send({ method: "POST", path: `${ADMIN}/projects`, body: request });
  }

  getProject(projectId: string): Promise<ProjectInfo> {
    return this.transport.send({ method: "GET", path: namePath(`${ADMIN}/projects`, projectId) });
  }

  /** Delete a project and every memory in its scope. */
  deleteProject(projectId: string): Promise<{ status: string; project_id: string }> {
    return this.transport.send({ method: "DELETE", path: namePath(`${ADMIN}/projects`, projectId) });
  }

  grantAccess(projectId: string, userId: string, access: "read" | "write"): Promise<ProjectInfo> {
    return this.transport.send({ method: "PUT", path: this.member(projectId, userId), body: { access } });
  }

  revokeAccess(projectId: string, userId: string): Promise<ProjectInfo> {
    return this.transport.send({ method: "DELETE", path: this.member(projectId, userId) });
  }

  archiveProject(projectId: string): Promise<ProjectInfo> {
    return this.transport.send({ method: "POST", path: `${namePath(`${ADMIN}/projects`, projectId)}/archive` });
  }

  reactivateProject(projectId: string): Promise<ProjectInfo> {
    return this.transport.send({ method: "POST", path: `${namePath(`${ADMIN}/projects`, projectId)}/reactivate` });
  }

  createWorkstream(request: CreateWorkstreamRequest): Promise<WorkstreamInfo> {
    return this.transport.send({
      method: "POST", path: `${ADMIN}/workstreams`,
      body: { name: request.name, owner: request.owner ?? null, project_id: request.project_id ?? null,
              persona: { memory: request.memory ?? true } },
    });
  }

  updateWorkstream(workstreamId: string, change: WorkstreamChange): Promise<WorkstreamInfo> {
    const body: Record<string, unknown> = {};
    if (change.project_id !== undefined) body["project_id"] = change.project_id;
    if (change.memory !== undefined) body["persona"] = { memory: change.memory };
    return this.transport.send({ method: "PATCH", path: namePath(`${ADMIN}/workstreams`, workstreamId), body });
  }

  /** A session's turn receipts in turn order, after turn `after`. */
  sessionTurns(sessionId: string, options: { after?: number; limit?: number } = {}): Promise<ReceiptPage> {
    return this.transport.send({
      method: "GET", path: `${namePath(`${ADMIN}/sessions`, sessionId)}/turns`,
      query: { after: options.after ?? 0, limit: options.limit ?? 50 },
    });
  }

  /** The newest turns' receipts, in any session, that put this memory in front of the model. */
  turnsShowing(memoryId: string, options: { limit?: number } = {}): Promise<ReceiptList> {
    return this.transport.send({
      method: "GET", path: `${namePath(`${ADMIN}/memories`, memoryId)}/turns`, query: { limit: options.limit ?? 20 },
    });
  }

  /** Projects by id, a page at a time (pass `next_after` as `after`). */
  listProjects(options: ProjectListOptions = {}): Promise<ProjectPage> {
    return this.transport.send({ method: "GET", path: `${ADMIN}/projects`, query: paged({ ...options }) });
  }

  /** Workstreams by id, a page at a time. */
  listWorkstreams(options: WorkstreamListOptions = {}): Promise<WorkstreamPage> {
    return this.transport.send({ method: "GET", path: `${ADMIN}/workstreams`, query: paged({ ...options }) });
  }

  /** Users by id, a page at a time. */
  listUsers(options: UserListOptions = {}): Promise<UserPage> {
    return this.transport.send({ method: "GET", path: `${ADMIN}/users`, query: paged({ ...options }) });
  }

  /** A new user (a name taken is a 409). */
  createUser(request: { name: string }): Promise<UserInfo> {
    return this.transport.send({ method: "POST", path: `${ADMIN}/users`, body: { name: request.name } });
  }

  getUser(userId: string): Promise<UserInfo> {
    return this.transport.send({ method: "GET", path: namePath(`${ADMIN}/users`, userId) });
  }

  /** The user's tokens and sessions are refused at once. */
  deactivateUser(userId: string, options: ReasonOptions = {}): Promise<UserInfo> {
    return this.transport.send({
      method: "POST", path: `${namePath(`${ADMIN}/users`, userId)}/deactivate`, body: reasoned(options),
    });
  }

  /** The user's tokens and sessions work again. */
  reactivateUser(userId: string, options: ReasonOptions = {}): Promise<UserInfo> {
    return this.transport.send({
      method: "POST", path: `${namePath(`${ADMIN}/users`, userId)}/reactivate`, body: reasoned(options),
    });
  }

  /** Tokens by id (never their secret), a page at a time. */
  listTokens(options: TokenListOptions = {}): Promise<TokenPage> {
    return this.transport.send({ method: "GET", path: `${ADMIN}/tokens`, query: paged({ ...options }) });
  }

  /** A new token for a user; its secret (`token`) is in this answer only. */
  createToken(request: CreateTokenRequest): Promise<CreatedToken> {
    return this.transport.send({
      method: "POST", path: `${ADMIN}/tokens`, // expires_* left out are undefined: JSON leaves them out too
      body: { user_id: request.user_id, scopes: request.scopes, permissions: request.permissions ?? [],
              name: request.name ?? "", expires_at: request.expires_at, expires_in_days: request.expires_in_days },
    });
  }

  /** Revoke a token: its next request, to any memoryd process, is refused. */
  revokeToken(tokenId: string, options: ReasonOptions = {}): Promise<TokenInfo> {
    return this.transport.send({ method: "DELETE", path: namePath(`${ADMIN}/tokens`, tokenId), body: reasoned(options) });
  }

  /** Sessions by id (never their token), a page at a time. */
  listSessions(options: SessionListOptions = {}): Promise<SessionPage> {
    return this.transport.send({ method: "GET", path: `${ADMIN}/sessions`, query: paged({ ...options }) });
  }

  /** Close a session and a coordinator's children: their tokens are refused from then on. */
  closeSession(sessionId: string, options: ReasonOptions = {}): Promise<ClosedSessions> {
    return this.transport.send({ method: "DELETE", path: namePath("/v1/api/sessions", sessionId), body: reasoned(options) });
  }

  private member(projectId: string, userId: string): string {
    return `${namePath(`${ADMIN}/projects`, projectId)}/members/${encodeURIComponent(userId)}`;
  }
}
