/** An agent session: its memory tool, its turns, its tool-loop signals and its receipts. */

import { MemorydAPIError, MemorydConnectionError } from "./errors.js";
import { namePath, type Transport } from "./transport.js";
import type { Nudge, Receipt, SessionInfo, ToolNames, ToolResult, TurnContext, TurnRequest } from "./types.js";

export interface ToolCall {
  action: "save" | "get" | "search" | "delete" | "list";
  [argument: string]: unknown;
}

export interface SignalRequest {
  event: "resume" | "tool_results";
  results?: { tool?: string; error?: boolean; denied?: boolean }[];
  /** As in a turn: the tool names the nudges use. */
  tool_names?: ToolNames;
}

export class Session {
  readonly sessionId: string;
  /** The session's own token: it acts as this session only (hand it to an MCP server or a prompt hook). */
  readonly token: string;
  readonly info: SessionInfo | undefined;
  private readonly transport: Transport;

  constructor(transport: Transport, sessionId: string, token: string, info?: SessionInfo) {
    this.transport = transport;
    this.sessionId = sessionId;
    this.token = token;
    this.info = info;
  }

  /** The session as memoryd has it (kind, user, workstream, attached project); never its token. */
  describe(): Promise<SessionInfo> {
    return this.transport.send({ method: "GET", path: "/v1/api/session" });
  }

  /** One memory tool call; a refusal is `ok: false`, not an exception. */
  memory(call: ToolCall): Promise<ToolResult> {
    return this.transport.send({ method: "POST", path: `${this.path}/memory`, body: call });
  }

  /**
   * What to put in front of the model this turn: one attempt within `timeoutMs` (default 2000). With
   * `failOpen` (the default) an unreachable or failing memoryd gives an empty context, `degraded` saying why.
   */
  async turn(request: TurnRequest = {}): Promise<TurnContext> {
    const { timeoutMs = 2000, failOpen = true, ...fields } = request;
    const body = Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== undefined));
    body["turn_id"] ??= `turn_${crypto.randomUUID().replace(/-/g, "")}`;
    try {
      return await this.transport.send<TurnContext>({
        method: "POST", path: `${this.path}/turns`, body, read: true, key: String(body["turn_id"]), timeoutMs, retries: 0,
      });
    } catch (error) {
      const serverSide = error instanceof MemorydAPIError && error.statusCode >= 500;
      if (!failOpen || !(serverSide || error instanceof MemorydConnectionError)) throw error;
      return failedTurn(body, error as Error);
    }
  }

  /** `resume`, or `tool_results` with `[{tool, error, denied}]`: the nudges it earns. */
  async signal(request: SignalRequest): Promise<Nudge[]> {
    // Not retried: a lost answer's nudges were already delivered (their cooldown taken), so a retry gets none.
    const answer = await this.transport.send<{ nudges: Nudge[] }>({
      method: "POST", path: `${this.path}/signals`, body: request, retries: 0,
    });
    return answer.nudges;
  }

  receipt(turnId: string): Promise<Receipt> {
    return this.transport.send({ method: "GET", path: `${this.path}/turns/${encodeURIComponent(turnId)}` });
  }

  private get path(): string {
    return namePath("/v1/api/sessions", this.sessionId);
  }
}

/** An empty context for a turn memoryd could not compose (fail open): the runtime's own prompt, untouched. */
function failedTurn(body: Record<string, unknown>, error: Error): TurnContext {
  const placement = typeof body["placement"] === "string" ? body["placement"] : "system";
  const system = typeof body["system"] === "string" ? body["system"] : "";
  return {
    turn_id: (body["turn_id"] as string | undefined) ?? null, turn: null, position: 0, memory_enabled: true, placement,
    block: "", hint: "", system_message: placement === "system" ? { role: "system", content: system } : null,
    tail_message: null, items: [], in_scope: 0, candidates: 0, nudges: [], receipt_id: null,
    degraded: `memoryd unavailable: ${error.message}`, dropped: { floor: 0, budget: 0 }, block_sha256: "",
    system_sha256: "", replayed: false,
  };
}
