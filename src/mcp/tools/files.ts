/** One file into or out of a guest, held in memory, so both ways are capped (limits.ts) and bounded in time. */
import { Readable } from 'node:stream';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import { TimeoutError, UserError, ValidationError } from '../../errors/index.js';
import type { GuestChannel } from '../../vm/api/exec.js';
import { FILE_CAP_BYTES, FILE_IDLE_MS } from '../limits.js';
import { jsonResult } from '../results.js';
import { readFileInputSchema, writeFileInputSchema } from '../schemas.js';
import type { ToolContext } from './context.js';

const MIB = 1024 * 1024;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** A transfer that goes FILE_IDLE_MS without progress fails and closes the channel, which ends it in the guest too. */
function idleGuard(what: string, ch: GuestChannel, signal: AbortSignal) {
  let fail: (err: Error) => void = () => undefined;
  const failed = new Promise<never>((_, reject) => { fail = reject; });
  failed.catch(() => undefined);
  let timer: NodeJS.Timeout | undefined;
  const stop = (err: Error) => { ch.close(); fail(err); };
  const kick = () => {
    clearTimeout(timer);
    timer = setTimeout(() => stop(new TimeoutError(`${what}: no progress for ${FILE_IDLE_MS / 1000} s`, { hint: 'The guest agent stopped answering; check the machine with list_machines, or remove it and create another.' })), FILE_IDLE_MS);
  };
  const onAbort = () => stop(new UserError(`${what}: cancelled`));
  signal.addEventListener('abort', onAbort, { once: true });
  kick();
  return { failed, kick, done: () => { clearTimeout(timer); signal.removeEventListener('abort', onAbort); } };
}

async function readBounded(ch: GuestChannel, path: string, signal: AbortSignal): Promise<{ data: Buffer; mode: number }> {
  const guard = idleGuard(`reading ${path}`, ch, signal);
  try {
    const file = await Promise.race([ch.getFile(path), guard.failed]);
    if (file.size > FILE_CAP_BYTES) {
      (file.stream as Readable).destroy();
      throw new UserError(`${path} is ${(file.size / MIB).toFixed(1)} MiB, over the ${FILE_CAP_BYTES / MIB} MiB read_file limit`, {
        where: 'read_file.path', hint: `Read part of it with exec (e.g. head -c 100000 ${path}), or copy it out with: smol machine cp MACHINE:${path} .`,
      });
    }
    const chunks: Buffer[] = [];
    let n = 0;
    const reading = (async () => {
      for await (const chunk of file.stream as AsyncIterable<Buffer>) {
        guard.kick();
        n += chunk.length;
        // the guest announced a size; one that sends more is held to the cap all the same
        if (n > FILE_CAP_BYTES) throw new UserError(`${path} grew past the ${FILE_CAP_BYTES / MIB} MiB read_file limit while it was read`, { where: 'read_file.path' });
        chunks.push(chunk);
      }
    })();
    reading.catch(() => undefined); // lost to the guard, its rejection is no one's
    await Promise.race([reading, guard.failed]);
    return { data: Buffer.concat(chunks), mode: file.mode };
  } finally {
    guard.done();
  }
}

function decodeContent(content: string, encoding: 'utf8' | 'base64'): Buffer {
  if (encoding === 'utf8') return Buffer.from(content, 'utf8');
  const compact = content.replace(/\s+/g, '');
  // Buffer.from skips what is not base64; a typo would then write a silently different file
  if (compact.length % 4 === 1 || !BASE64.test(compact)) throw new ValidationError('content is not valid base64', [{ path: 'content', message: 'only A-Z a-z 0-9 + / and trailing = padding' }], { where: 'write_file.content' });
  return Buffer.from(compact, 'base64');
}

export function registerFileTools(server: McpServer, ctx: ToolContext): void {
  server.registerTool('read_file', {
    title: 'Read a file from a machine',
    description: `Read one regular file from a running machine, as UTF-8 text or base64 (at most ${FILE_CAP_BYTES / MIB} MiB).`,
    inputSchema: readFileInputSchema,
    outputSchema: z.object({ path: z.string(), size: z.number(), mode: z.number(), encoding: z.enum(['utf8', 'base64']), content: z.string() }),
    annotations: { readOnlyHint: true, openWorldHint: false },
  }, (a, extra) => ctx.call(async () => {
    const encoding = a.encoding ?? 'utf8';
    const { ch, release } = await ctx.svc().channel(a.machine);
    try {
      const { data, mode } = await readBounded(ch, a.path, ctx.signal(extra.signal));
      let content: string;
      if (encoding === 'base64') content = data.toString('base64');
      else {
        try {
          content = new TextDecoder('utf-8', { fatal: true }).decode(data);
        } catch {
          throw new UserError(`${a.path} is not UTF-8 text`, { where: 'read_file.encoding', hint: 'Read it with encoding "base64".' });
        }
      }
      return jsonResult(content, { path: a.path, size: data.length, mode: mode & 0o7777, encoding, content });
    } finally {
      ch.close();
      release();
    }
  }));

  server.registerTool('write_file', {
    title: 'Write a file in a machine',
    description: `Write one file in a running machine from UTF-8 text or base64 (at most ${FILE_CAP_BYTES / MIB} MiB); its directory must exist (make it with exec: mkdir -p).`,
    inputSchema: writeFileInputSchema,
    outputSchema: z.object({ path: z.string(), size: z.number() }),
    annotations: { destructiveHint: true, idempotentHint: true, openWorldHint: false },
  }, (a, extra) => ctx.call(async () => {
    const data = decodeContent(a.content, a.encoding ?? 'utf8');
    if (data.length > FILE_CAP_BYTES) throw new UserError(`content is ${(data.length / MIB).toFixed(1)} MiB, over the ${FILE_CAP_BYTES / MIB} MiB write_file limit`, { where: 'write_file.content', hint: 'Write it in parts and join them with exec (cat a b > c), or copy it in with: smol machine cp FILE MACHINE:/path' });
    const { ch, release } = await ctx.svc().channel(a.machine);
    const guard = idleGuard(`writing ${a.path}`, ch, ctx.signal(extra.signal));
    try {
      await Promise.race([ch.putFile(Readable.from([data]), a.path, a.mode ?? 0o644), guard.failed]);
      return jsonResult(`wrote ${data.length} bytes to ${a.path}`, { path: a.path, size: data.length });
    } finally {
      guard.done();
      ch.close();
      release();
    }
  }));
}
