/** The shapes memoryd answers with; field names are the wire's (snake_case). */

export interface MemoryInfo {
  memory_id: string;
  name: string;
  description: string;
  type: string;
  scope: string;
  scope_id: string;
  content: string;
  created: string;
  updated: string;
  last_accessed?: string;
  access_count?: number;
  version?: number;
  /** A search hit's BM25 score. */
  score?: number;
}

/** One write of a batch (`writeMemories`): a save or a delete. */
export type MemoryWrite =
  | { action: "save"; name: string; content: string; description: string; type?: string | null; scope?: string;
      scope_id?: string; expected_version?: number }
  | { action: "delete"; name: string; scope?: string; scope_id?: string; expected_version?: number;
      missing_ok?: boolean };

/** One write as it was applied: `created` for a save, `deleted` for a delete (false: `missing_ok` found nothing). */
export interface AppliedWrite {
  action: "save" | "delete";
  name: string;
  created?: boolean;
  deleted?: boolean;
  memory: MemoryInfo | null;
}

export interface WriteResult {
  writes: AppliedWrite[];
  /** The batch's last event (null: it changed nothing). */
  position: number | null;
}

export interface ListMemoriesResponse {
  memories: MemoryInfo[];
  total: number;
  /** The public list's: pass as `after` for the next page (null on the last page). */
  next_after?: string | null;
}

export interface StatusResponse {
  status: string;
  name?: string;
}

export interface ProjectInfo {
  project_id: string;
  name: string;
  owner: string;
  state: string;
  members: { user_id: string; access: string }[];
  created: string;
  updated: string;
}

export interface WorkstreamInfo {
  workstream_id: string;
  name: string;
  owner: string | null;
  project_id: string | null;
  persona: { memory: boolean };
}

export interface SessionInfo {
  session_id: string;
  token: string;
  kind: string;
  user_id: string | null;
  workstream_id: string;
  project_id: string | null;
  parent_session_id: string | null;
}

export interface ToolResult {
  ok: boolean;
  text: string;
  error?: string;
  memory?: MemoryInfo;
  memories?: MemoryInfo[];
}

export interface Nudge {
  type: string;
  text: string;
  deliver: "after_user" | "after_tool_results";
}

export interface TurnItem {
  memory_id: string;
  name: string;
  type: string;
  scope: string;
  score: number | null;
  position: number;
}

export interface ChatMessage {
  role: string;
  content: string | (string | { type: string; text?: string; [key: string]: unknown })[];
}

/** Each action mapped to the tool the model calls for it, e.g. `{ search: "memory_search", ... }`. */
export type ToolNames = Partial<Record<"save" | "get" | "search" | "delete" | "list", string>>;

export interface TurnRequest {
  messages?: ChatMessage[];
  query?: string;
  system?: string;
  placement?: "system" | "tail" | "none";
  turn_id?: string;
  tool_visible?: boolean;
  relevance_k?: number;
  max_chars?: number;
  min_score?: number;
  preview?: boolean;
  /** The memory tool as the model sees it, which the hint and nudges name (default: the spec's one `memory` tool). */
  tool_names?: ToolNames;
  /** One attempt within this many milliseconds (default 2000). */
  timeoutMs?: number;
  /** An unreachable or failing memoryd gives an empty context instead of throwing (default true). */
  failOpen?: boolean;
}

export interface TurnContext {
  turn_id: string | null;
  turn: number | null;
  position: number;
  memory_enabled: boolean;
  placement: string;
  block: string;
  hint: string;
  system_message: { role: string; content: string } | null;
  tail_message: { role: string; content: string } | null;
  items: TurnItem[];
  in_scope: number;
  candidates: number;
  nudges: Nudge[];
  receipt_id: string | null;
  degraded: string | null;
  dropped: { floor: number; budget: number };
  block_sha256: string;
  system_sha256: string;
  replayed: boolean;
}

export interface Receipt {
  receipt_id: string;
  session_id: string;
  turn_id: string;
  turn: number;
  created: string;
  position: number;
  placement: string;
  memory_enabled: boolean;
  tool_visible: boolean;
  in_scope: number;
  candidates: number;
  items: TurnItem[];
  nudges: Nudge[];
  degraded: string | null;
  block: string;
  /** Memories this session can no longer see, left out (the block is then empty). */
  withheld: number;
  hint: string;
  block_sha256: string;
  block_matches: boolean;
  system_sha256: string;
}

export interface ReceiptPage {
  receipts: Receipt[];
  next_after: number;
}

/** Receipts, newest first. */
export interface ReceiptList {
  receipts: Receipt[];
}

export interface AuditRecord {
  position: number;
  action: string;
  actor: string;
  time: string;
  [field: string]: unknown;
}

export interface AuditPage {
  records: AuditRecord[];
  next_after: number;
}

/** One event exactly as the log stores it: its position, its stream, its payload, who wrote it, its hashes. */
export interface LoggedEvent {
  position: number;
  stream_id: string;
  stream_version: number;
  event_type: string;
  schema_version: number;
  payload: Record<string, unknown>;
  metadata: Record<string, unknown>;
  recorded_at: string;
  payload_sha256: string;
  hash: string;
}

export interface EventPage {
  events: LoggedEvent[];
  next_after: number;
  /** The log's head when the page was read. */
  head: number;
}

/** One store, read back after an erasure: `free` when nothing of the erased memories was found there. */
export interface ErasureCheck {
  store: string;
  free: boolean;
  detail: string;
}

/** What an erasure took (memories, the log positions it redacted) and what each store held afterwards. */
export interface ErasureCertificate {
  /** The memory.erase event's position in the log. */
  position: number;
  erased_at: string;
  /** The acting user's id. */
  erased_by: string;
  /** What was asked for: user_id, memory_id or scope + scope_id. */
  selector: Record<string, string>;
  reason: string;
  /** The erased memories' ids. */
  memories: string[];
  /** The log events whose payloads were redacted. */
  positions: number[];
  idempotency_keys_forgotten: number;
  snapshots_dropped: number;
  checks: ErasureCheck[];
  /** Every check found nothing of the erased memories. */
  free: boolean;
}

/** A memory an erasure would take, as its newest write left it (deleted ones too). */
export interface ErasedMemory {
  memory_id: string;
  name: string;
  scope: string;
  scope_id: string;
  type: string;
  description: string;
}

/** What an erasure would take now; nothing is changed. */
export interface ErasurePreview {
  selector: Record<string, string>;
  memories: ErasedMemory[];
  /** The log events it would redact. */
  positions: number[];
}

export interface ChainPoint {
  position: number;
  hash: string;
}

/** One page of the hash chain's walk: resume from `reached` until `complete` or `broken`. */
export interface ChainPage {
  /** Events this page checked. */
  events: number;
  reached: ChainPoint;
  /** The log's head when the page was read. */
  head: ChainPoint;
  /** The walk reached the head and it verified. */
  complete: boolean;
  /** Where the chain stops holding; null when it holds. */
  broken: { position: number; reason: string } | null;
}

/** One write of a memory: its version after it, where and when, who, and the memory it left. */
export interface MemoryVersion {
  version: number;
  position: number;
  event_type: string;
  time: string;
  actor: string;
  surface: string;
  memory: Record<string, string>;
  superseded: boolean;
}

export interface MemoryHistory {
  memory_id: string;
  versions: MemoryVersion[];
}

export interface UserInfo {
  user_id: string;
  name: string;
  created: string;
  active: boolean;
  deactivated_at: string | null;
}

export interface UserPage {
  users: UserInfo[];
  next_after: string;
}

/** A token as a list shows it: never its secret (`prefix` tells tokens apart). */
export interface TokenInfo {
  token_id: string;
  prefix: string;
  name: string;
  user_id: string;
  scopes: string[];
  permissions: string[];
  created: string;
  expires_at: string | null;
  last_used_at: string | null;
  revoked_at: string | null;
}

/** A token just created: `token` is its secret, shown only in this answer. */
export interface CreatedToken extends TokenInfo {
  token: string;
}

export interface TokenPage {
  tokens: TokenInfo[];
  next_after: string;
}

/** A session as an admin's list shows it (never its token). */
export interface SessionRecord {
  session_id: string;
  kind: string;
  user_id: string | null;
  workstream_id: string;
  parent_session_id: string | null;
  created: string;
  state: "open" | "closed";
  closed_at: string | null;
  last_active_at: string | null;
}

export interface SessionPage {
  sessions: SessionRecord[];
  next_after: string;
}

/** Closed by one request: the session, then its children. */
export interface ClosedSessions {
  closed: SessionRecord[];
}

export interface ProjectPage {
  projects: ProjectInfo[];
  next_after: string;
}

export interface WorkstreamPage {
  workstreams: WorkstreamInfo[];
  next_after: string;
}
