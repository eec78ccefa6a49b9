/** What every tool handler shares: the machine service, built on first use, and the server's lifetime. */
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { MachineService } from '../../vm/api/machines.js';

export interface ToolContext {
  svc(): MachineService;
  /** Runs one tool call: a throw becomes an `isError` result, and shutdown waits for the call to clean up. */
  call(fn: () => Promise<CallToolResult>): Promise<CallToolResult>;
  /** The call's own cancellation joined with the server's shutdown: either ends what the call started. */
  signal(call: AbortSignal): AbortSignal;
  /** Boot and fork steps, for the operator's stderr (never stdout, which carries the protocol). */
  progress(msg: string): void;
}
