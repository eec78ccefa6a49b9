/**
 * What one MCP tool call may cost the host. An agent's calls arrive as JSON-RPC lines on one pipe and their
 * results go back the same way, so every result is held in memory whole: each bound keeps that finite.
 */

/** Per output stream of `run`/`exec`: beyond it the rest is read and dropped (the command never blocks on a full pipe). */
export const OUTPUT_CAP_BYTES = 1024 * 1024;
/** `read_file`/`write_file`: 4 MiB is 5.4 MiB as base64, under the SDK's 10 MiB limit on one incoming message. */
export const FILE_CAP_BYTES = 4 * 1024 * 1024;
/** A command's timeout when the call names none: long enough for a build step, short enough that a hung one ends. */
export const DEFAULT_TIMEOUT_S = 60;
/** The longest a call may ask for; a longer job belongs in `smol run -d`, not in one tool call. */
export const MAX_TIMEOUT_S = 600;
/** How long a file transfer may go without progress before it fails (a stuck guest agent). */
export const FILE_IDLE_MS = 30_000;
/** Clones per `fork` call, as `smol fork -n` allows. */
export const MAX_FORK_COUNT = 64;
