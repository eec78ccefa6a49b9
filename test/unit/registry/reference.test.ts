import { describe, expect, it } from 'vitest';
import { isInsecureRegistry, parseImageReference, registryBaseUrl } from '../../../src/registry/index.js';

const D = `sha256:${'ab'.repeat(32)}`;

describe('parseImageReference', () => {
  it('applies Docker Hub defaults: docker.io, library/ and latest', () => {
    expect(parseImageReference('alpine')).toMatchObject({ registry: 'docker.io', repository: 'library/alpine', tag: 'latest', reference: 'latest', canonical: 'docker.io/library/alpine:latest', apiHost: 'registry-1.docker.io' });
    expect(parseImageReference('python:3.12-slim')).toMatchObject({ repository: 'library/python', tag: '3.12-slim' });
    expect(parseImageReference('bitnami/redis')).toMatchObject({ registry: 'docker.io', repository: 'bitnami/redis' });
    expect(parseImageReference('index.docker.io/library/debian:12').canonical).toBe('docker.io/library/debian:12');
  });

  it('reads registries with ports, localhost and nested repositories', () => {
    expect(parseImageReference('localhost:5000/x')).toMatchObject({ registry: 'localhost:5000', repository: 'x', reference: 'latest', apiHost: 'localhost:5000' });
    expect(parseImageReference('localhost/x:1')).toMatchObject({ registry: 'localhost', repository: 'x', tag: '1' });
    expect(parseImageReference('ghcr.io/org/team/app:v1.2')).toMatchObject({ registry: 'ghcr.io', repository: 'org/team/app', tag: 'v1.2' });
    expect(parseImageReference('127.0.0.1:5000/a/b')).toMatchObject({ registry: '127.0.0.1:5000', repository: 'a/b' });
  });

  it('takes a digest, with or without a tag, and asks for the digest', () => {
    expect(parseImageReference(`alpine@${D}`)).toMatchObject({ tag: undefined, digest: D, reference: D, canonical: `docker.io/library/alpine@${D}` });
    expect(parseImageReference(`reg.example:443/a:t@${D}`)).toMatchObject({ registry: 'reg.example:443', tag: 't', digest: D, reference: D });
  });

  it('refuses malformed references with the reason', () => {
    expect(() => parseImageReference('Upper/case')).toThrow(/component "Upper"/);
    expect(() => parseImageReference('a@sha256:xyz')).toThrow(/not a sha256/);
    expect(() => parseImageReference('a:b:c')).toThrow(/invalid image reference/);
    expect(() => parseImageReference('a b')).toThrow(/spaces/);
    expect(() => parseImageReference('x:')).toThrow(/tag/);
    expect(() => parseImageReference('reg.io/')).toThrow(/no repository|component/);
  });
});

describe('registry schemes', () => {
  it('uses plain HTTP for loopback and listed insecure hosts only', () => {
    expect(isInsecureRegistry('127.0.0.1:5000', {})).toBe(true);
    expect(isInsecureRegistry('localhost', {})).toBe(true);
    expect(isInsecureRegistry('reg.lan:5000', {})).toBe(false);
    expect(isInsecureRegistry('reg.lan:5000', { SMOL_INSECURE_REGISTRIES: 'other, reg.lan:5000' })).toBe(true);
    expect(isInsecureRegistry('reg.lan:5000', { SMOL_INSECURE_REGISTRIES: 'reg.lan' })).toBe(true);
    expect(registryBaseUrl('ghcr.io')).toBe('https://ghcr.io');
    expect(registryBaseUrl('ghcr.io', { plainHttp: true })).toBe('http://ghcr.io');
  });
});
