import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import type { Readable } from 'node:stream';
import { AgentClient } from '../../../src/vm/agent/index.js';
import { buildAgent, connect, startAgent, type RunningAgent } from './agent-harness.js';

let agent: RunningAgent;
let client: AgentClient;

beforeAll(async () => {
  await buildAgent();
  agent = await startAgent();
  client = await connect(agent);
});
afterAll(async () => {
  client?.close();
  await agent?.stop();
});

/** Resolves with the first chunk a stream produces. */
const firstChunk = (r: Readable) => new Promise<string>((resolve) => r.once('data', (c: Buffer) => resolve(c.toString())));

describe('agent exec over a unix socket', () => {
  it('handshakes with version, capabilities and limits', () => {
    expect(client.hello).toMatchObject({ version: 1, maxPayload: 256 * 1024, name: expect.stringContaining('smol-agent') });
  });

  it('reports exit codes and keeps stdout and stderr apart', async () => {
    const r = await client.run({ argv: ['sh', '-c', 'echo out; echo err >&2; exit 7'] });
    expect(r).toMatchObject({ code: 7, signal: null });
    expect(r.stdout.toString()).toBe('out\n');
    expect(r.stderr.toString()).toBe('err\n');
  });

  it('passes argv, env and cwd exactly', async () => {
    const r = await client.run({ argv: ['sh', '-c', 'printf "%s|" "$@" "$FOO" "$(pwd)"', 'x', 'a b', '', 'c"d'], env: { FOO: 'bar baz' }, cwd: '/tmp' });
    expect(r.stdout.toString()).toBe('a b||c"d|bar baz|/tmp|');
  });

  it('streams output as it is produced, before the process exits', async () => {
    const s = client.exec({ argv: ['sh', '-c', 'echo first; read line; echo "got $line"'] });
    expect(await firstChunk(s.stdout)).toBe('first\n');
    const rest = firstChunk(s.stdout);
    s.stdin.write('ping\n');
    expect(await rest).toBe('got ping\n');
    expect(await s.exit).toEqual({ code: 0, signal: null });
  });

  it('forwards stdin to cat and EOF ends it', async () => {
    const input = Buffer.alloc(3 * 1024 * 1024 + 17);
    for (let i = 0; i < input.length; i++) input[i] = (i * 31) & 0xff;
    const r = await client.run({ argv: ['cat'], stdin: input });
    expect(r.code).toBe(0);
    expect(r.stdout.equals(input)).toBe(true);
  });

  it('rejects a command that does not exist with the guest errno, and the channel stays usable', async () => {
    const s = client.exec({ argv: ['/no/such/binary'] });
    await expect(s.exit).rejects.toMatchObject({ name: 'NotFoundError', message: expect.stringContaining('/no/such/binary') });
    expect((await client.run({ argv: ['true'] })).code).toBe(0);
  });

  it('delivers signals: sleep killed by SIGINT reports the signal', async () => {
    const s = client.exec({ argv: ['sleep', '30'] });
    expect(await s.pid).toBeGreaterThan(0);
    s.signal('SIGINT');
    expect(await s.exit).toEqual({ code: null, signal: 'SIGINT' });
  });

  it('runs 8 execs concurrently on one connection', async () => {
    const runs = Array.from({ length: 8 }, (_, i) => client.run({ argv: ['sh', '-c', `head -c ${100_000 * (i + 1)} /dev/zero | tr '\\0' '${i}'; echo e${i} >&2; exit ${i}`] }));
    const results = await Promise.all(runs);
    results.forEach((r, i) => {
      expect(r.code).toBe(i);
      expect(r.stdout.length).toBe(100_000 * (i + 1));
      expect(r.stdout.every((b) => b === 48 + i)).toBe(true);
      expect(r.stderr.toString()).toBe(`e${i}\n`);
    });
  });

  it('starts every command with all signals at their default and none blocked, whatever the agent inherited', async () => {
    // The extra-port agents are started with `&` by a non-interactive sh, which ignores SIGINT and SIGQUIT.
    const ignoring = await startAgent([], ['sh', '-c', 'trap "" INT QUIT TERM USR1; exec "$0" "$@"']);
    const c = await connect(ignoring);
    try {
      const agentStatus = readFileSync(`/proc/${ignoring.proc.pid}/status`, 'utf8');
      expect(agentStatus).toMatch(/^SigIgn:\s*0*[1-9a-f][0-9a-f]*$/m); // the agent itself does ignore some
      const runs = await Promise.all([0, 1, 2].map(() => c.run({ argv: ['sh', '-c', 'grep -E "^Sig(Ign|Blk)" /proc/self/status'] })));
      for (const r of runs) {
        expect(r.code).toBe(0);
        expect(r.stdout.toString()).toBe("SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n");
      }
    } finally {
      c.close();
      await ignoring.stop();
    }
  });

  it('streams 64 MiB of stdout under flow control with bounded memory', async () => {
    const s = client.exec({ argv: ['head', '-c', String(64 * 1024 * 1024), '/dev/zero'] });
    let total = 0;
    let maxBuffered = 0;
    for await (const c of s.stdout) {
      total += (c as Buffer).length;
      maxBuffered = Math.max(maxBuffered, s.stdout.readableLength);
    }
    expect(total).toBe(64 * 1024 * 1024);
    expect(maxBuffered).toBeLessThanOrEqual(2 * 1024 * 1024);
    expect(await s.exit).toEqual({ code: 0, signal: null });
  });

  it('stalls a fast producer while nobody reads, then resumes', async () => {
    const s = client.exec({ argv: ['head', '-c', String(32 * 1024 * 1024), '/dev/zero'] });
    s.stdout.pause();
    await new Promise((r) => setTimeout(r, 500));
    // Paused: the host holds at most its window plus the stream's buffer; the rest waits in the guest pipe.
    expect(s.stdout.readableLength).toBeLessThanOrEqual(2 * 1024 * 1024);
    let total = s.stdout.readableLength;
    s.stdout.on('data', (c: Buffer) => (total += c.length));
    s.stdout.resume();
    await s.exit;
    expect(total).toBeGreaterThanOrEqual(32 * 1024 * 1024);
  });

  it('allocates a tty, merges output and applies the window size', async () => {
    const s = client.exec({ argv: ['sh', '-c', 'tty; stty size; echo to-stderr >&2'], tty: true, rows: 33, cols: 101 });
    const chunks: Buffer[] = [];
    for await (const c of s.stdout) chunks.push(c as Buffer);
    const text = Buffer.concat(chunks).toString().replace(/\r/g, '');
    expect(text).toMatch(/^\/dev\/pts\/\d+\n33 101\nto-stderr\n$/);
    expect(await s.exit).toEqual({ code: 0, signal: null });
  });

  it('forwards input and resize to a tty session', async () => {
    const s = client.exec({ argv: ['sh', '-c', 'read a; stty size; echo "a=$a"'], tty: true, rows: 10, cols: 20 });
    const chunks: Buffer[] = [];
    s.stdout.on('data', (c: Buffer) => chunks.push(c));
    await s.pid;
    s.resize(44, 132);
    await new Promise((r) => setTimeout(r, 50));
    s.stdin.write('hello\n');
    await s.exit;
    expect(Buffer.concat(chunks).toString().replace(/\r/g, '')).toContain('44 132\na=hello\n');
  });

  it('reaps orphaned grandchildren and reports only the exit of the process it started', async () => {
    const r = await client.run({ argv: ['sh', '-c', 'sleep 1 </dev/null >/dev/null 2>&1 & echo $!; exit 5'] });
    expect(r.code).toBe(5);
    const orphan = Number(r.stdout.toString().trim());
    // Still running and now the agent's child (it is a subreaper), so only the agent can reap it.
    const ppid = Number(readFileSync(`/proc/${orphan}/stat`, 'utf8').replace(/^.*\) /s, '').split(' ')[1]);
    expect(ppid).toBe(agent.proc.pid);
    for (let i = 0; i < 250 && existsSync(`/proc/${orphan}`); i++) await new Promise((res) => setTimeout(res, 20));
    expect(existsSync(`/proc/${orphan}`)).toBe(false); // gone, not a zombie: the agent reaped it
    expect((await client.run({ argv: ['true'] })).code).toBe(0);
  });

  it('leaks no file descriptors across execs, tty sessions, failures and transfers', async () => {
    const fds = () => readdirSync(`/proc/${agent.proc.pid}/fd`).length;
    const before = fds();
    for (let i = 0; i < 10; i++) {
      await client.run({ argv: ['sh', '-c', 'echo x; echo y >&2'] });
      await client.run({ argv: ['true'], tty: true });
      await client.exec({ argv: ['/no/such'] }).exit.catch(() => undefined);
      const s = client.exec({ argv: ['sleep', '10'] });
      await s.pid;
      s.abort();
      const f = await client.getFile('/etc/passwd'); // a regular file: GET holds a guest to the size it announced
      f.stream.resume();
      await new Promise((r) => f.stream.once('end', r));
    }
    await client.ping();
    expect(fds()).toBe(before);
  });

  it('answers pings', async () => {
    expect(await client.ping()).toBeGreaterThanOrEqual(0);
  });
});
