/** What every client shares: its transport, and opening or resuming sessions. */

import { Session } from "./session.js";
import { Transport, type ClientOptions } from "./transport.js";
import type { SessionInfo, TokenInfo } from "./types.js";

export interface OpenSessionRequest {
  kind: "interactive" | "coordinator";
  workstream_id: string;
  user_id?: string;
  parent_session_id?: string;
}

export abstract class Client {
  protected readonly transport: Transport;

  constructor(options: ClientOptions = {}) {
    this.transport = new Transport(options);
  }

  /** Open an agent session (a service token or an admin); the handle acts with the session's own token. */
  async openSession(request: OpenSessionRequest): Promise<Session> {
    const info = await this.transport.send<SessionInfo>({
      method: "POST", path: "/v1/api/sessions",
      body: { kind: request.kind, workstream_id: request.workstream_id, user_id: request.user_id || null,
              parent_session_id: request.parent_session_id || null },
    });
    return new Session(this.transport.withToken(info.token), info.session_id, info.token, info);
  }

  /** The caller's own token as a list shows it (its user, scopes, expiry; never its secret). */
  currentToken(): Promise<TokenInfo> {
    return this.transport.send({ method: "GET", path: "/v1/api/token" });
  }

  /** A handle on a session opened earlier. */
  session(sessionId: string, token: string): Session {
    return new Session(this.transport.withToken(token), sessionId, token);
  }

  /** A handle on the session a session token acts as (all an MCP server or a hook may hold). */
  async sessionOf(token: string): Promise<Session> {
    const info = await new Session(this.transport.withToken(token), "", token).describe();
    return new Session(this.transport.withToken(token), info.session_id, token, info);
  }
}
