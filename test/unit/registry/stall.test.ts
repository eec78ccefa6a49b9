/**
 * Registries that go quiet: in the TLS handshake, before or in the middle of the response headers, and
 * in the middle of a manifest or a blob body. Each must fail the request with 75, naming the registry and
 * the URL, instead of hanging the pull. Deadlines are set short through the documented variables.
 */
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { SmolError, UserError } from '../../../src/errors/index.js';
import { getBlob } from '../../../src/registry/blob-get.js';
import { httpRequest } from '../../../src/registry/http-get.js';
import { RegistryClient } from '../../../src/registry/index.js';
import { DEFAULT_TIMEOUTS, StallError, registryTimeouts } from '../../../src/registry/timeouts.js';
import { startHostile, startSilent, type HostileServer } from '../../helpers/registry-hostile.js';

const tmp = mkdtempSync(path.join(os.tmpdir(), 'stall-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
let servers: HostileServer[] = [];
afterEach(async () => { await Promise.all(servers.map((s) => s.stop())); servers = []; });
const keep = (s: HostileServer) => { servers.push(s); return s; };

/** One phase short, the others long, so the error names the phase that stalled. */
const only = (phase: 'RESPONSE' | 'IDLE') => ({ SMOL_HOME: tmp, SMOL_REGISTRY_RESPONSE_TIMEOUT: phase === 'RESPONSE' ? '0.3' : '30', SMOL_REGISTRY_IDLE_TIMEOUT: phase === 'IDLE' ? '0.3' : '30' });
const short = { connectMs: 300, responseMs: 30_000, idleMs: 30_000 };
const client = (host: string, phase: 'RESPONSE' | 'IDLE' = 'RESPONSE') => RegistryClient.open(host, host, { plainHttp: true, credentials: null, env: only(phase) });
const DIGEST = `sha256:${'ab'.repeat(32)}`;

async function failure(p: Promise<unknown>): Promise<SmolError> {
  const e = await p.then(() => null, (err: unknown) => err);
  expect(e).toBeInstanceOf(SmolError);
  return e as SmolError;
}

describe('registry deadlines', () => {
  it('fails a manifest whose body never ends', async () => {
    const s = keep(await startHostile((_req, res) => { res.writeHead(200, { 'content-type': 'application/json', 'content-length': '1000' }); res.write('{"schemaVersion":'); }));
    const e = await failure((await client(s.host)).getManifest('x', 'latest', ['application/json'], 'pull x'));
    expect(e.exitCode).toBe(75);
    expect(e.message).toContain(`pull x failed: ${s.host}`);
    expect(e.message).toContain(`http://${s.host}/v2/x/manifests/latest`);
    expect(e.hint).toContain('SMOL_REGISTRY_RESPONSE_TIMEOUT');
  });

  it('fails a registry that never answers, or stops in the middle of its headers', async () => {
    for (const s of [keep(await startSilent()), keep(await startSilent('HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n'))]) {
      const e = await failure((await client(s.host)).getManifest('x', 'latest', ['application/json'], 'pull x'));
      expect(e.exitCode).toBe(75);
      expect(e.message).toMatch(/did not answer within 0\.3 s/);
    }
  });

  it('fails a blob whose headers never come, and one that stops halfway; no file is left', async () => {
    const half = keep(await startHostile((_req, res) => { res.writeHead(200, { 'content-length': String(1 << 20) }); res.write(Buffer.alloc(100)); }));
    const silent = keep(await startSilent());
    for (const [s, phase, why] of [[half, 'IDLE', /sent nothing within 0\.3 s after 100 body bytes/], [silent, 'RESPONSE', /did not answer within 0\.3 s/]] as const) {
      const dir = mkdtempSync(path.join(tmp, 'blobs-'));
      const e = await failure((await client(s.host, phase)).downloadBlob('x', DIGEST, 1 << 20, path.join(dir, 'b'), { what: 'pull x: blob' }));
      expect(e.exitCode).toBe(75);
      expect(e.message).toMatch(why);
      expect(e.message).toContain(`/v2/x/blobs/${DIGEST}`);
      expect(e.hint).toContain(`SMOL_REGISTRY_${phase}_TIMEOUT`);
      expect(readdirSync(dir)).toEqual([]);
    }
  });

  it('fails a TLS handshake that never completes', async () => {
    const s = keep(await startSilent());
    const url = new URL(`https://${s.host}/v2/`);
    const e1 = await httpRequest(url, { timeouts: short }).catch((e: unknown) => e);
    const e2 = await getBlob(url, { headers: {}, onBody: () => {}, timeouts: short }).catch((e: unknown) => e);
    for (const e of [e1, e2]) {
      expect(e).toBeInstanceOf(StallError);
      expect((e as StallError).phase).toBe('connect');
    }
  });

  it('reads the deadlines from the environment', () => {
    expect(registryTimeouts({})).toEqual(DEFAULT_TIMEOUTS);
    expect(registryTimeouts({ SMOL_REGISTRY_IDLE_TIMEOUT: '2.5' }).idleMs).toBe(2500);
    expect(() => registryTimeouts({ SMOL_REGISTRY_CONNECT_TIMEOUT: '0' })).toThrow(UserError);
    expect(() => registryTimeouts({ SMOL_REGISTRY_RESPONSE_TIMEOUT: 'soon' })).toThrow(/SMOL_REGISTRY_RESPONSE_TIMEOUT must be a number of seconds/);
    expect(existsSync(tmp)).toBe(true);
  });
});
