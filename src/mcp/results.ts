/** Tool results as an agent reads them: text first (what a chat client shows), the same data structured beside it. */
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { ZodError } from 'zod';
import { ExitCode, SmolError, ValidationError, mapFsError } from '../errors/index.js';

/** The error as the CLI prints it (message, where, issues, hint) plus its exit-code class, never a stack. */
export function errorResult(err: unknown): CallToolResult {
  err = mapFsError(err, 'writing smol\'s data');
  if (err instanceof ZodError) {
    err = new ValidationError('invalid arguments', err.issues.map((i) => ({ path: i.path.join('.') || '(root)', message: i.message })));
  }
  const lines: string[] = [];
  if (err instanceof SmolError) {
    lines.push(`error: ${err.message}${err.where ? ` (${err.where})` : ''}`);
    if (err instanceof ValidationError) for (const i of err.issues) lines.push(`  ${i.path}: ${i.message}`);
    if (err.hint) lines.push(`hint: ${err.hint}`);
    lines.push(`(${err.name}, smol exit code ${err.exitCode})`);
  } else {
    // an error smol did not classify is a bug in smol; the server goes on serving the next call
    const e = err as Error;
    lines.push(`internal error: ${e?.message ?? String(err)}`, `This is a bug in smol (exit code ${ExitCode.internal}); please report it with the tool call that caused it.`);
  }
  // text only: clients check structuredContent against the tool's output schema even on an error result
  return { content: [{ type: 'text', text: lines.join('\n') }], isError: true };
}

export interface CommandOutput {
  exitCode: number; timedOut: boolean; stdout: string; stderr: string; stdoutTruncated: boolean; stderrTruncated: boolean;
  [key: string]: unknown;
}

/** A command that ran is a result whatever its exit code: a failing test is information, not a broken tool. */
export function commandResult(out: CommandOutput): CallToolResult {
  const head = out.timedOut ? `exit code ${out.exitCode} (timed out)` : `exit code ${out.exitCode}`;
  const parts = [head];
  const section = (name: string, text: string, cut: boolean) => {
    if (!text && !cut) return;
    parts.push(`--- ${name}${cut ? ' (truncated)' : ''} ---`, text.endsWith('\n') ? text.slice(0, -1) : text);
  };
  section('stdout', out.stdout, out.stdoutTruncated);
  section('stderr', out.stderr, out.stderrTruncated);
  return { content: [{ type: 'text', text: parts.join('\n') }], structuredContent: out };
}

export function jsonResult(text: string, data: Record<string, unknown>): CallToolResult {
  return { content: [{ type: 'text', text }], structuredContent: data };
}

/** Runs a handler, and any throw becomes an `isError` result: no input may end the server. */
export async function guarded(fn: () => Promise<CallToolResult>): Promise<CallToolResult> {
  try {
    return await fn();
  } catch (err) {
    return errorResult(err);
  }
}
