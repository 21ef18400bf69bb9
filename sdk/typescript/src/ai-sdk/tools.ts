/** The session's memory tool as five AI SDK tools, one per action, named as `memoryd mcp` names them. */

import { jsonSchema, tool, type Tool } from "ai";

import type { Session, ToolCall } from "../session.js";
import type { ToolResult } from "../types.js";

type MemoryType = "user" | "general" | "feedback" | "reference";
type Scope = "global" | "workstream" | "user" | "coordinator" | "project";

interface SaveInput { name: string; content: string; description: string; type?: MemoryType; scope?: Scope;
                      expected_version?: number }
interface NamedInput { name: string; scope?: Scope; expected_version?: number }
interface ListInput { type?: MemoryType; scope?: Scope; limit?: number }
interface SearchInput extends ListInput { query: string }

/** What the turn's hint names: the tools `memorydTools` returns. */
export const MEMORY_TOOL_NAMES = {
  save: "memory_save", get: "memory_get", search: "memory_search", list: "memory_list", delete: "memory_delete",
} as const;

export interface MemorydTools {
  memory_save: Tool<SaveInput, ToolResult>;
  memory_get: Tool<NamedInput, ToolResult>;
  memory_search: Tool<SearchInput, ToolResult>;
  memory_list: Tool<ListInput, ToolResult>;
  memory_delete: Tool<NamedInput, ToolResult>;
}

const TYPE = { type: "string", enum: ["user", "general", "feedback", "reference"] } as const;
const SCOPE = {
  type: "string", enum: ["global", "workstream", "user", "coordinator", "project"],
  description: "Leave out for the session's default (the attached project, else global).",
} as const;
const LIMIT = { type: "integer", minimum: 1, maximum: 50 } as const;
const VERSION = {
  type: "integer", minimum: 1, description: "Only if the memory is still at this version (a get shows it).",
} as const;

/**
 * The memory tools for `generateText`/`streamText`/`ToolLoopAgent`: `{ tools: { ...memorydTools(session) } }`.
 * A refusal (scope rules, limits, a memory that is not there) is thrown, so the model gets it as a tool error
 * it can read and act on; the tool's output is the session tool's whole answer, the model sees its text.
 */
export function memorydTools(session: Session): MemorydTools {
  return {
    memory_save: memoryTool<SaveInput>(session, "save",
      "Save a memory, or update the one of this name in its scope. The description is a one-line relevance " +
      "summary; save a correction as type 'feedback'.",
      { name: { type: "string" }, content: { type: "string" }, description: { type: "string" }, type: TYPE,
        scope: SCOPE, expected_version: VERSION }, ["name", "content", "description"]),
    memory_get: memoryTool<NamedInput>(session, "get",
      "A memory's full content, by the name (and scope) a search or list showed.",
      { name: { type: "string" }, scope: SCOPE }, ["name"]),
    memory_search: memoryTool<SearchInput>(session, "search",
      "The memories that best match the query (BM25), across every scope this session sees unless one is given.",
      { query: { type: "string" }, type: TYPE, scope: SCOPE, limit: LIMIT }, ["query"]),
    memory_list: memoryTool<ListInput>(session, "list",
      "The most recently updated memories this session sees (limit: default 20, at most 50).",
      { type: TYPE, scope: SCOPE, limit: LIMIT }, []),
    memory_delete: memoryTool<NamedInput>(session, "delete",
      "Delete a memory by name (and scope). It stays in memoryd's audit log.",
      { name: { type: "string" }, scope: SCOPE, expected_version: VERSION }, ["name"]),
  };
}

function memoryTool<INPUT extends object>(session: Session, action: ToolCall["action"], description: string,
                                          properties: Record<string, object>, required: string[]): Tool<INPUT, ToolResult> {
  return tool({
    description,
    inputSchema: jsonSchema<INPUT>({ type: "object", properties, required, additionalProperties: false }),
    execute: async (input) => {
      const given = Object.entries(input).filter(([, value]) => value !== undefined && value !== null);
      const result = await session.memory({ action, ...Object.fromEntries(given) });
      if (!result.ok) throw new Error(result.error ?? result.text);  // the model reads "Error: <the refusal>"
      return result;
    },
    toModelOutput: ({ output }) => ({ type: "text", value: output.text }),
  });
}
