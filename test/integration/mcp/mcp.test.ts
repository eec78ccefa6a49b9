/**
 * `smol mcp` driven by the MCP SDK's own client over a real stdio pipe, on real QEMU: one throwaway run, one
 * machine kept for the file (written, read, exec'd in, forked once) and removed at the end.
 */
import fs from 'node:fs';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliEnv, killQemuMentioning, qemuProcessesMentioning, scratchHome, smolBin } from '../../helpers/cli.js';

let home: string;
let client: Client;
let transport: StdioClientTransport;
let stderr = '';
/** Anything on the server's stdout that is not a JSON-RPC message lands here (the client cannot parse it). */
const protocolErrors: Error[] = [];

const text = (r: CallToolResult) => r.content.map((c) => (c.type === 'text' ? c.text : '')).join('');
const call = async (name: string, args: Record<string, unknown>) => (await client.callTool({ name, arguments: args })) as CallToolResult;

beforeAll(async () => {
  home = scratchHome('mcp');
  transport = new StdioClientTransport({
    command: process.execPath, args: [smolBin, 'mcp'], stderr: 'pipe',
    env: Object.fromEntries(Object.entries(cliEnv({ home })).filter((e): e is [string, string] => e[1] !== undefined)),
  });
  transport.stderr?.on('data', (d: Buffer) => { stderr += d.toString(); });
  client = new Client({ name: 'smol-test', version: '0' });
  client.onerror = (err) => protocolErrors.push(err);
  await client.connect(transport);
});

afterAll(async () => {
  await client?.close();
  killQemuMentioning(home);
  fs.rmSync(home, { recursive: true, force: true });
});

describe('smol mcp', () => {
  it('lists its tools, each with a described input schema', async () => {
    const { tools } = await client.listTools();
    const byName = new Map(tools.map((t) => [t.name, t]));
    expect([...byName.keys()].sort()).toEqual(['create_machine', 'exec', 'fork', 'list_machines', 'read_file', 'remove_machine', 'run', 'write_file']);
    const run = byName.get('run')!;
    expect(run.description).toMatch(/throwaway|fresh/);
    expect(Object.keys(run.inputSchema.properties ?? {})).toEqual(expect.arrayContaining(['argv', 'command', 'image', 'timeout', 'env', 'workdir']));
    expect((run.inputSchema.properties as Record<string, { description?: string }>).timeout.description).toMatch(/seconds/);
    expect(byName.get('read_file')!.inputSchema.required).toEqual(expect.arrayContaining(['machine', 'path']));
  });

  it('run: echo hi in a throwaway machine, then a failing command reported as its exit code', async () => {
    const ok = await call('run', { argv: ['echo', 'hi'] });
    expect(ok.isError, text(ok)).toBeFalsy();
    expect(ok.structuredContent).toMatchObject({ exitCode: 0, stdout: 'hi\n', timedOut: false, stdoutTruncated: false });
    expect(text(ok)).toContain('hi');
    // the throwaway machine is gone
    expect((await call('list_machines', {})).structuredContent).toEqual({ machines: [] });

    const bad = await call('run', { command: 'echo oops >&2; exit 3' });
    expect(bad.isError, text(bad)).toBeFalsy();
    expect(bad.structuredContent).toMatchObject({ exitCode: 3, stderr: 'oops\n' });
    expect(text(bad)).toMatch(/exit code 3/);
  });

  it('a kept machine: write_file, read_file, exec, fork one clone, remove', async () => {
    const made = await call('create_machine', { name: 'box', workdir: '/tmp' });
    expect(made.isError, text(made)).toBeFalsy();
    expect(made.structuredContent).toMatchObject({ machine: { name: 'box', state: 'running', forkable: true } });

    const payload = 'line one\nünïcode ✓\n';
    const w = await call('write_file', { machine: 'box', path: '/tmp/note.txt', content: payload });
    expect(w.structuredContent, text(w)).toEqual({ path: '/tmp/note.txt', size: Buffer.byteLength(payload) });
    const r = await call('read_file', { machine: 'box', path: '/tmp/note.txt' });
    expect(r.structuredContent, text(r)).toMatchObject({ content: payload, encoding: 'utf8', mode: 0o644 });

    const bin = Buffer.from([0, 255, 1, 254, 10]);
    await call('write_file', { machine: 'box', path: '/tmp/b.bin', content: bin.toString('base64'), encoding: 'base64', mode: 0o755 });
    const rb = await call('read_file', { machine: 'box', path: '/tmp/b.bin', encoding: 'base64' });
    expect(rb.structuredContent).toMatchObject({ content: bin.toString('base64'), size: 5, mode: 0o755 });
    const notText = await call('read_file', { machine: 'box', path: '/tmp/b.bin' });
    expect(notText.isError).toBe(true);
    expect(text(notText)).toMatch(/not UTF-8[\s\S]*base64/);

    // exec sees the file, runs in the machine's workdir, takes env
    const e = await call('exec', { machine: 'box', command: 'pwd; cat note.txt | head -1; echo "$GREETING"', env: { GREETING: 'hello' } });
    expect(e.structuredContent, text(e)).toMatchObject({ exitCode: 0, stdout: '/tmp\nline one\nhello\n' });

    // bounds: output past 1 MiB is dropped and flagged; a timeout is exit 124
    const big = await call('exec', { machine: 'box', command: 'yes | head -c 3000000; echo done >&2' });
    expect(big.structuredContent, text(big)).toMatchObject({ exitCode: 0, stdoutTruncated: true, stderrTruncated: false, stderr: 'done\n' });
    expect((big.structuredContent as { stdout: string }).stdout).toBe('y\n'.repeat(512 * 1024));
    const slow = await call('exec', { machine: 'box', argv: ['sleep', '30'], timeout: 1 });
    expect(slow.structuredContent, text(slow)).toMatchObject({ exitCode: 124, timedOut: true });

    // a call the client cancels ends its guest command
    const ctl = new AbortController();
    const cancelled = client.callTool({ name: 'exec', arguments: { machine: 'box', argv: ['sleep', '77'] } }, undefined, { signal: ctl.signal }).catch((err: Error) => err);
    const sleeping = async () => ((await call('exec', { machine: 'box', command: 'ps -o args | grep -c "^sleep 77"' })).structuredContent as { stdout: string }).stdout.trim();
    for (let i = 0; i < 50 && await sleeping() !== '1'; i++) await sleep(100);
    expect(await sleeping()).toBe('1');
    ctl.abort();
    expect(await cancelled).toBeInstanceOf(Error);
    for (let i = 0; i < 50 && await sleeping() !== '0'; i++) await sleep(100);
    expect(await sleeping()).toBe('0');

    const f = await call('fork', { machine: 'box', count: 1 });
    expect(f.isError, text(f)).toBeFalsy();
    const clones = (f.structuredContent as { clones: string[] }).clones;
    expect(clones).toHaveLength(1);
    const c = await call('exec', { machine: clones[0], argv: ['cat', '/tmp/note.txt'] });
    expect(c.structuredContent, text(c)).toMatchObject({ exitCode: 0, stdout: payload });

    const list = (await call('list_machines', {})).structuredContent as { machines: { name: string; parent: string | null }[] };
    expect(list.machines.map((m) => [m.name, m.parent]).sort()).toEqual([['box', null], [clones[0], 'box']].sort());

    expect((await call('remove_machine', { machine: clones[0] })).structuredContent).toEqual({ removed: [clones[0]] });
    expect((await call('remove_machine', { machine: 'box' })).structuredContent).toEqual({ removed: ['box'] });
    expect(qemuProcessesMentioning(home)).toEqual([]);
  });

  it('bad arguments come back as isError results with smol\'s message, and the server goes on', async () => {
    const rel = await call('read_file', { machine: 'box', path: 'etc/passwd' });
    expect(rel.isError).toBe(true);
    expect(text(rel)).toMatch(/absolute guest path/);

    const missing = await call('exec', { machine: 'nope', argv: ['true'] });
    expect(missing.isError).toBe(true);
    expect(text(missing)).toMatch(/nope/);
    expect(text(missing)).toMatch(/exit code 66/);

    const both = await call('exec', { machine: 'nope', argv: ['true'], command: 'true' });
    expect(both.isError).toBe(true);
    expect(text(both)).toMatch(/argv or command, not both/);

    const tooLong = await call('run', { argv: ['true'], timeout: 3600 });
    expect(tooLong.isError).toBe(true);
    expect(text(tooLong)).toMatch(/at most 600 seconds/);

    // still serving
    expect((await call('list_machines', {})).isError).toBeFalsy();
  });

  it('wrote nothing but JSON-RPC on stdout', () => {
    expect(protocolErrors, stderr).toEqual([]);
  });

  // last: it ends the server
  it('a client that goes away mid-run ends the server and leaves no machine behind', async () => {
    const pid = transport.pid!;
    const pending = call('run', { command: 'sleep 60' }).catch((err: Error) => err);
    for (let i = 0; i < 600 && !qemuProcessesMentioning(home).length; i++) await sleep(100);
    expect(qemuProcessesMentioning(home).length).toBeGreaterThan(0);
    await client.close();
    expect(await pending).toBeInstanceOf(Error);
    for (let i = 0; i < 100 && (alive(pid) || qemuProcessesMentioning(home).length); i++) await sleep(100);
    expect(alive(pid)).toBe(false);
    expect(qemuProcessesMentioning(home)).toEqual([]);
    expect(fs.readdirSync(path.join(home, 'machines'))).toEqual([]);
  });
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
