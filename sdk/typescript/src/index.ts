/**
 * memoryd's TypeScript SDK: the reference SDK's memory methods, plus sessions, the memory tool and the turn.
 * Zero runtime dependencies; `fetch` is injectable.
 */

export { MemorydConsole } from "./console.js";
export type {
  AdminListOptions, AdminSearchOptions, AsOfOptions, AuditOptions, CreateTokenRequest, CreateWorkstreamRequest,
  EditMemoryOptions, EraseOptions, ErasureSelector,
  EventsOptions, PageOptions, ProjectListOptions, ReasonOptions, SessionListOptions, TokenListOptions, UserListOptions,
  WorkstreamChange, WorkstreamListOptions,
} from "./console.js";
export type { OpenSessionRequest } from "./client.js";
export { MemorydAPIError, MemorydConnectionError } from "./errors.js";
export { MemorydServer, normalizeMemoryDescription } from "./server.js";
export type { IterOptions, ListOptions, MemoryListOptions, SaveMemoryRequest, ScopeOptions, SearchOptions } from "./server.js";
export { Session } from "./session.js";
export type { SignalRequest, ToolCall } from "./session.js";
export type { ClientOptions, Fetch } from "./transport.js";
export type * from "./types.js";
