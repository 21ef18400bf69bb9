/**
 * memoryd for the Vercel AI SDK (`ai` 7): a language-model middleware that puts the session's memories in
 * front of the model once per user turn, and the memory tools as AI SDK tools. `ai` is a peer dependency.
 */

export { memorydMiddleware } from "./middleware.js";
export type { MemorydMiddlewareOptions } from "./middleware.js";
export { MEMORY_TOOL_NAMES, memorydTools } from "./tools.js";
export type { MemorydTools } from "./tools.js";
