/** Interactive exec over a WebSocket: the query that starts it, and the client's control frames. */
import { z } from 'zod';

const flag = z.enum(['1', '0', 'true', 'false']).transform((v) => v === '1' || v === 'true');
const dim = z.coerce.number().int().min(1).max(1000);

export const wsExecQuerySchema = z.strictObject({
  argv: z.array(z.string().max(128 * 1024).refine((s) => !s.includes('\0'), 'cannot contain NUL bytes')).min(1, 'give the command: ?argv=sh&argv=-c&argv=...').max(4096),
  tty: flag.optional().describe('1: run under a terminal (stdout and stderr arrive as stdout)'),
  rows: dim.optional(),
  cols: dim.optional(),
  workdir: z.string().startsWith('/', 'must be an absolute guest path').max(4096).optional(),
});

const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGKILL', 'SIGHUP', 'SIGQUIT', 'SIGUSR1', 'SIGUSR2', 'SIGTSTP', 'SIGCONT', 'SIGWINCH'] as const;

export const wsControlSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('resize'), rows: dim, cols: dim }),
  z.object({ type: z.literal('signal'), signal: z.enum(SIGNALS) }),
  z.object({ type: z.literal('eof') }),
]);
