import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { tlsTrustError, trustFor } from '../../../src/registry/trust.js';

describe('trustFor', () => {
  let dir: string;
  let env: NodeJS.ProcessEnv;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'smol-trust-'));
    env = { SMOL_HOME: path.join(dir, 'home') };
  });
  afterEach(async () => { await rm(dir, { recursive: true, force: true }); });

  it("uses Node's defaults (no options) when nothing is configured for the host", async () => {
    expect(await trustFor(['reg.example:5000'], env)).toEqual({ options: {}, sources: [] });
  });

  it('refuses a client certificate without its key, and a certificate that is not PEM, naming the files', async () => {
    const d = path.join(env.SMOL_HOME!, 'certs.d', 'reg.example:5000');
    await mkdir(d, { recursive: true });
    await writeFile(path.join(d, 'client.cert'), 'x');
    await expect(trustFor(['reg.example:5000'], env)).rejects.toMatchObject({ exitCode: 69, message: expect.stringContaining('client.cert has no matching client.key') });
    await rm(path.join(d, 'client.cert'));
    await writeFile(path.join(d, 'ca.crt'), 'not a certificate');
    await expect(trustFor(['reg.example:5000'], env)).rejects.toMatchObject({ exitCode: 69, where: path.join(d, 'ca.crt') });
    await expect(trustFor(['other:1'], { ...env, SSL_CERT_FILE: path.join(dir, 'missing.pem') })).rejects.toThrow(/cannot read the certificate file .*missing\.pem: ENOENT/);
    // Node only warns about an unreadable NODE_EXTRA_CA_CERTS and keeps its roots; so does smol
    expect(await trustFor(['other:1'], { ...env, NODE_EXTRA_CA_CERTS: path.join(dir, 'missing.pem') })).toEqual({ options: {}, sources: [] });
  });
});

describe('tlsTrustError', () => {
  it('maps verification failures and refused client certificates to exit 69; other errors to null', () => {
    const err = (code: string) => Object.assign(new Error(code), { code });
    expect(tlsTrustError(err('SELF_SIGNED_CERT_IN_CHAIN'), 'r:1', 'pull x', { SMOL_HOME: '/h' })).toMatchObject({ exitCode: 69, hint: expect.stringContaining('/h/certs.d/r:1/ca.crt') });
    expect(tlsTrustError(err('ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED'), 'r:1', 'pull x', { SMOL_HOME: '/h' })?.message).toContain('wants a client certificate');
    expect(tlsTrustError(err('ECONNREFUSED'), 'r:1', 'pull x')).toBeNull();
  });
});
