import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { readFileSync, statSync, writeFileSync, existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
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

async function readAll(r: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of r) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

describe('agent file transfer', () => {
  it('puts a multi-MiB file from a host path with its mode, atomically', async () => {
    const content = randomBytes(9 * 1024 * 1024 + 123);
    const src = path.join(agent.dir, 'src.bin');
    writeFileSync(src, content, { mode: 0o751 });
    const dest = path.join(agent.dir, 'guest', 'deep', 'dest.bin');
    expect(await client.putFile(src, dest, undefined, { mkdirs: true })).toEqual({ bytes: content.length });
    expect(readFileSync(dest).equals(content)).toBe(true);
    expect(statSync(dest).mode & 0o777).toBe(0o751);
    expect(readdirSync(path.dirname(dest))).toEqual(['dest.bin']); // no temp file left behind
  });

  it('puts from a stream with an explicit mode', async () => {
    const dest = path.join(agent.dir, 'from-stream.txt');
    await client.putFile(Readable.from([Buffer.from('hello '), Buffer.from('world')]), dest, 0o600);
    expect(readFileSync(dest, 'utf8')).toBe('hello world');
    expect(statSync(dest).mode & 0o777).toBe(0o600);
  });

  it('gets a multi-MiB file with size, mode and exact content', async () => {
    const content = randomBytes(7 * 1024 * 1024 + 5);
    const src = path.join(agent.dir, 'guest-file.bin');
    writeFileSync(src, content, { mode: 0o640 });
    const f = await client.getFile(src);
    expect(f.size).toBe(content.length);
    expect(f.mode).toBe(0o640);
    expect((await readAll(f.stream)).equals(content)).toBe(true);
  });

  it('round-trips put then get', async () => {
    const content = randomBytes(3 * 1024 * 1024);
    const p = path.join(agent.dir, 'rt.bin');
    await client.putFile(Readable.from([content]), p, 0o644);
    expect((await readAll((await client.getFile(p)).stream)).equals(content)).toBe(true);
  });

  it('runs transfers and execs concurrently on one connection', async () => {
    const files = Array.from({ length: 4 }, () => randomBytes(2 * 1024 * 1024));
    const ops = files.map(async (c, i) => {
      const p = path.join(agent.dir, `c${i}.bin`);
      await client.putFile(Readable.from([c]), p, 0o644);
      return (await readAll((await client.getFile(p)).stream)).equals(c);
    });
    const exec = client.run({ argv: ['sh', '-c', 'head -c 5000000 /dev/zero | wc -c'] });
    expect(await Promise.all(ops)).toEqual([true, true, true, true]);
    expect((await exec).stdout.toString().trim()).toBe('5000000');
  });

  it('reports a missing guest file as NotFoundError', async () => {
    await expect(client.getFile(path.join(agent.dir, 'nope'))).rejects.toMatchObject({ name: 'NotFoundError' });
  });

  it('reports a put into a missing directory without mkdirs as NotFoundError and leaves nothing', async () => {
    const dest = path.join(agent.dir, 'missing-dir', 'x');
    await expect(client.putFile(Readable.from([Buffer.from('x')]), dest, 0o644)).rejects.toMatchObject({ name: 'NotFoundError' });
    expect(existsSync(path.dirname(dest))).toBe(false);
  });

  it('drops the partial file when the host source fails mid-transfer', async () => {
    const dest = path.join(agent.dir, 'partial.bin');
    const src = new Readable({
      read() {
        this.push(randomBytes(512 * 1024));
        setTimeout(() => this.destroy(new Error('disk read failed')), 20);
      },
    });
    await expect(client.putFile(src, dest, 0o644)).rejects.toThrow(/disk read failed/);
    await new Promise((r) => setTimeout(r, 100));
    expect(readdirSync(agent.dir).filter((n) => n.startsWith('partial'))).toEqual([]);
  });

  it('aborts a get when the consumer destroys the stream, and the channel carries on', async () => {
    const src = path.join(agent.dir, 'big-get.bin');
    writeFileSync(src, Buffer.alloc(20 * 1024 * 1024, 1));
    const f = await client.getFile(src);
    await new Promise<void>((resolve) => f.stream.once('data', () => resolve()));
    f.stream.destroy();
    expect((await client.run({ argv: ['echo', 'still here'] })).stdout.toString()).toBe('still here\n');
  });
});
