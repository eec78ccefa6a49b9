/**
 * The MCP server in process, through the SDK's client over an in-memory transport, with a machine service that
 * must never be reached: what these calls check is refused before any machine is touched.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NotFoundError } from '../../../src/errors/index.js';
import { CappedSink } from '../../../src/mcp/capture.js';
import { errorResult, guarded } from '../../../src/mcp/results.js';
import { createMcpServer } from '../../../src/mcp/server.js';
import { argvOf } from '../../../src/mcp/tools/commands.js';
import type { ToolContext } from '../../../src/mcp/tools/context.js';

let client: Client;
let touched = 0;
const text = (r: CallToolResult) => r.content.map((c) => (c.type === 'text' ? c.text : '')).join('');
const call = async (name: string, args: Record<string, unknown>) => (await client.callTool({ name, arguments: args })) as CallToolResult;

beforeAll(async () => {
  const ctx: ToolContext = {
    svc: () => { touched++; throw new NotFoundError('no machine named "ghost"', { hint: 'List machines with: smol machine ls' }); },
    call: guarded,
    signal: (s) => s,
    progress: () => undefined,
  };
  const server = createMcpServer(ctx, '0.0.0-test');
  const [a, b] = InMemoryTransport.createLinkedPair();
  client = new Client({ name: 'unit', version: '0' });
  await Promise.all([server.connect(a), client.connect(b)]);
});
afterAll(async () => { await client.close(); });

describe('mcp tool arguments', () => {
  it.each([
    ['read_file', { machine: 'm', path: 'relative/file' }, /absolute guest path/],
    ['write_file', { machine: 'm', path: '/tmp/x\0y', content: '' }, /NUL/],
    ['write_file', { machine: 'm', path: '/tmp/x', content: 'not base64!', encoding: 'base64' }, /not valid base64[\s\S]*content/],
    ['exec', { machine: '../etc', argv: ['true'] }, /machine name/],
    ['exec', { machine: 'm', argv: ['true'], timeout: 601 }, /at most 600 seconds/],
    ['exec', { machine: 'm', argv: [] }, /argv/],
    ['exec', { machine: 'm', argv: ['true'], env: { 'BAD-NAME': 'x' } }, /env\.BAD-NAME/],
    ['run', { argv: ['true'], command: 'true' }, /argv or command, not both[\s\S]*hint:/],
    ['run', {}, /no command given/],
    ['run', { command: 'true', memory: 'lots' }, /not a size/],
    ['fork', { machine: 'm', count: 65 }, /at most 64 clones/],
    ['read_file', { machine: 'm', path: '/x', encoding: 'latin1' }, /encoding/],
  ])('%s %j is refused before any machine is touched', async (tool, args, message) => {
    const before = touched;
    const r = await call(tool, args);
    expect(r.isError, text(r)).toBe(true);
    expect(text(r)).toMatch(message);
    expect(touched).toBe(before);
  });

  it('a smol error from the service comes back as text with its hint and exit code, and the server goes on', async () => {
    const r = await call('exec', { machine: 'ghost', argv: ['true'] });
    expect(r.isError).toBe(true);
    expect(text(r)).toBe('error: no machine named "ghost"\nhint: List machines with: smol machine ls\n(NotFoundError, smol exit code 66)');
    expect((await client.listTools()).tools.length).toBe(8);
  });
});

describe('mcp pieces', () => {
  it('CappedSink keeps the cap, counts the rest, and says it cut', async () => {
    const s = new CappedSink(5);
    await new Promise<void>((resolve) => { s.write('abc'); s.write('defgh', () => resolve()); });
    expect([s.text(), s.total, s.truncated]).toEqual(['abcde', 8, true]);
    const exact = new CappedSink(3);
    await new Promise<void>((resolve) => exact.write('abc', () => resolve()));
    expect(exact.truncated).toBe(false);
  });

  it('argv runs as given; a command string goes to /bin/sh -c', () => {
    expect(argvOf({ argv: ['ls', '-l'] }, 'run')).toEqual(['ls', '-l']);
    expect(argvOf({ command: 'a | b' }, 'run')).toEqual(['/bin/sh', '-c', 'a | b']);
  });

  it('an error smol did not classify is reported as a bug, never thrown', () => {
    const r = errorResult(new TypeError('boom'));
    expect(r.isError).toBe(true);
    expect(text(r)).toMatch(/^internal error: boom\nThis is a bug in smol \(exit code 70\)/);
  });
});
