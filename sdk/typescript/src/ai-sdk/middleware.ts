/**
 * Recall once per user turn, for `wrapLanguageModel({ model, middleware: memorydMiddleware({ session }) })`.
 *
 * Every model call of a tool loop passes through `transformParams` (under `generateText` and `streamText`
 * alike). The calls of one user turn share the prompt up to its newest user message, so that prefix is the
 * turn: the first call asks memoryd's turn endpoint, later steps reuse the answer, and a new user message is a
 * new turn. The block goes in as one message of its own, marked, so a prompt that already holds one (a model
 * wrapped twice, a prompt built from an earlier call) gets it replaced, never a second copy; an empty block
 * adds nothing. A slow or failing memoryd never fails the call: after `timeoutMs` the model runs without
 * memories and `onDegraded` is told why (a reason with no prompt or memory text in it).
 */

import type { LanguageModelMiddleware } from "ai";

import type { Session } from "../session.js";
import type { ChatMessage, ToolNames, TurnContext } from "../types.js";
import { MEMORY_TOOL_NAMES } from "./tools.js";

type CallOptions = Parameters<NonNullable<LanguageModelMiddleware["transformParams"]>>[0]["params"];
type Prompt = CallOptions["prompt"];
type PromptMessage = Prompt[number];

const MARK = "memoryd";
const TURNS_KEPT = 16;

export interface MemorydMiddlewareOptions {
  /** The memoryd session the agent runs as (`console.openSession(...)` or `client.session(id, token)`). */
  session: Session;
  /**
   * `system` (the default): a system message after the agent's own. `tail`: a user message after the newest user
   * message, marked as reference data, leaving the system prompt byte-identical for prompt caches.
   */
  placement?: "system" | "tail";
  /** How long a turn may wait for memoryd before the model runs without memories (default 2000 ms). */
  timeoutMs?: number;
  /** The memory tools as the model sees them, which the hint names (default: `memorydTools`' names). */
  toolNames?: ToolNames;
  /** Whether the model has the memory tools; without them memoryd leaves out the hint (default true). */
  toolVisible?: boolean;
  /** At most this many memories (1 to the server's `relevance_k`). */
  relevanceK?: number;
  /** A budget for the block: whole memories are dropped, lowest score first. */
  maxChars?: number;
  /** A floor on a memory's BM25 score. */
  minScore?: number;
  /** Told when a turn ran without memories because memoryd failed or was slow (default: `console.warn`). */
  onDegraded?: (reason: string) => void;
}

export function memorydMiddleware(options: MemorydMiddlewareOptions): LanguageModelMiddleware {
  const turns = new Map<string, Promise<PromptMessage | null>>();  // the latest turns, oldest first
  return {
    specificationVersion: "v4",
    transformParams: async ({ params }) => {
      const prompt = params.prompt.filter((message) => !isMemorydMessage(message));
      const newestUser = prompt.map((message) => message.role).lastIndexOf("user");
      if (newestUser < 0) return { ...params, prompt };
      const conversation = prompt.slice(0, newestUser + 1);
      const key = JSON.stringify(conversation);
      let injected = turns.get(key);
      if (injected === undefined) {
        injected = recall(options, conversation);
        turns.set(key, injected);
        if (turns.size > TURNS_KEPT) turns.delete(turns.keys().next().value as string);
      }
      const message = await injected;
      return { ...params, prompt: message ? placed(prompt, message, newestUser) : prompt };
    },
  };
}

/** This turn's memories as one marked prompt message, or null when there are none (or memoryd failed). */
async function recall(options: MemorydMiddlewareOptions, conversation: Prompt): Promise<PromptMessage | null> {
  const report = options.onDegraded ?? ((reason: string) => console.warn(`memoryd: no memories this turn (${reason})`));
  const placement = options.placement ?? "system";
  let turn: TurnContext;
  try {
    turn = await options.session.turn({
      messages: conversation.map(chatMessage), placement, tool_names: options.toolNames ?? MEMORY_TOOL_NAMES,
      tool_visible: options.toolVisible, relevance_k: options.relevanceK, max_chars: options.maxChars,
      min_score: options.minScore, timeoutMs: options.timeoutMs ?? 2000, failOpen: true,
    });
  } catch (error) {
    report(error instanceof Error ? `${error.name}: ${error.message}` : String(error));
    return null;
  }
  if (turn.degraded) report(turn.degraded);
  if (!turn.block) return null;
  const providerOptions = { [MARK]: { turn_id: turn.turn_id ?? "" } };
  if (placement === "tail") {
    return { role: "user", content: [{ type: "text", text: turn.tail_message?.content ?? "" }], providerOptions };
  }
  return { role: "system", content: turn.system_message?.content ?? "", providerOptions };
}

/** System placement: after the leading system messages. Tail: right after the newest user message. */
function placed(prompt: Prompt, message: PromptMessage, newestUser: number): Prompt {
  const at = message.role === "system" ? leadingSystemMessages(prompt) : newestUser + 1;
  return [...prompt.slice(0, at), message, ...prompt.slice(at)];
}

function leadingSystemMessages(prompt: Prompt): number {
  const first = prompt.findIndex((message) => message.role !== "system");
  return first < 0 ? prompt.length : first;
}

function isMemorydMessage(message: PromptMessage): boolean {
  return message.providerOptions?.[MARK] !== undefined;
}

/** What memoryd reads of a message: its role and its text (the context is the newest user texts). */
function chatMessage(message: PromptMessage): ChatMessage {
  if (typeof message.content === "string") return { role: message.role, content: message.content };
  const texts = message.content.flatMap((part) => (part.type === "text" ? [{ type: "text", text: part.text }] : []));
  return { role: message.role, content: texts };
}
