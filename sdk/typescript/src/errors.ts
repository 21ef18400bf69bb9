/** Errors: one for every answer memoryd refused, one for a server that could not be reached. */

export class MemorydAPIError extends Error {
  readonly statusCode: number;
  readonly errorMessage: string;
  readonly body: unknown;
  /** memoryd's name for the answer, when it gave one: `request_in_progress` (409), `database_unavailable` (503). */
  readonly code: string | undefined;

  constructor(statusCode: number, errorMessage: string, body: unknown = undefined) {
    super(`HTTP ${statusCode}: ${errorMessage}`);
    this.name = "MemorydAPIError";
    this.statusCode = statusCode;
    this.errorMessage = errorMessage;
    this.body = body;
    const code = body !== null && typeof body === "object" ? (body as { code?: unknown }).code : undefined;
    this.code = typeof code === "string" ? code : undefined;
  }
}

/** memoryd could not be reached, or did not answer in time (after the retries). */
export class MemorydConnectionError extends Error {
  readonly timedOut: boolean;

  constructor(message: string, timedOut = false, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "MemorydConnectionError";
    this.timedOut = timedOut;
  }
}

/** The error for an answer, its message taken as the reference SDK takes it: `error`, else `detail`, else the text. */
export function apiError(statusCode: number, body: unknown, text: string): MemorydAPIError {
  let message = "";
  if (body !== null && typeof body === "object") {
    const fields = body as { error?: unknown; detail?: unknown };
    message = String(fields.error ?? fields.detail ?? "");
  }
  return new MemorydAPIError(statusCode, message || text.slice(0, 200), body);
}
