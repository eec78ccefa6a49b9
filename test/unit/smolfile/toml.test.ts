import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { stringify } from 'yaml';
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../../src/errors/index.js';
import { loadSmolfile, parseSmolfile, parseTomlSmolfile } from '../../../src/smolfile/load.js';
import { isTomlSmolfile, parseSmolvmToml } from '../../../src/smolfile/toml.js';

// the keys smolvm documents (its README reference and its Smolfile struct), each once
const FULL = `
image = "./rootfs"
entrypoint = ["sh", "-c"]
cmd = ["echo hi"]
env = ["A=1", "B=x=y"]
workdir = "/srv"
cpus = 2
memory = 1024
net = true
gpu = false
overlay = 4
ports = ["8080:80"]
volumes = ["./data:/data"]
init = ["echo one"]

[dev]
volumes = ["./src:/app:ro"]
env = ["B=dev"]
init = ["echo two"]
ports = ["127.0.0.1:9000:9000/udp"]

[network]
allow_hosts = ["pypi.org:443"]
allow_cidrs = ["10.0.0.0/8"]
`;

function refusal(text: string): string[] {
  try {
    parseSmolvmToml(text, 'S.toml');
  } catch (err) {
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as ValidationError).exitCode).toBe(65);
    return (err as ValidationError).issues.map((i) => `${i.path}: ${i.message}`);
  }
  throw new Error('expected a refusal');
}

describe('smolvm TOML Smolfile → smol YAML schema', () => {
  it('maps every documented key, [dev] after the top level', () => {
    expect(parseSmolvmToml(FULL)).toEqual({
      image: './rootfs', workdir: '/srv', cpus: 2, memory: 1024, net: true, disk: '4G',
      command: ['sh', '-c', 'echo hi'],
      env: { A: '1', B: 'dev' },
      ports: ['8080:80', '127.0.0.1:9000:9000/udp'],
      volumes: [{ host: './data', guest: '/data', readonly: false }, { host: './src', guest: '/app', readonly: true }],
      init: ['echo one', 'echo two'],
      network: { allow: ['pypi.org:443', '10.0.0.0/8'] },
    });
  });

  it('takes cpus and memory from a [resources] table too', () => {
    expect(parseSmolvmToml('[resources]\ncpus = 3\nmemory = 768\n')).toEqual({ cpus: 3, memory: 768 });
  });

  it('puts entrypoint before cmd whatever their order in the file', () => {
    expect(parseSmolvmToml('cmd = ["b"]\nentrypoint = ["a"]\n').command).toEqual(['a', 'b']);
  });

  it('validates the result with the same schema as YAML, and the YAML it converts to loads the same', () => {
    const spec = parseTomlSmolfile(FULL, 'S.toml');
    expect(spec.ports[1]).toMatchObject({ host: 9000, guest: 9000, protocol: 'udp', address: '127.0.0.1' });
    expect(spec.disk).toBe(4096);
    expect(parseSmolfile(stringify(parseSmolvmToml(FULL)), 'Smolfile')).toEqual(spec);
  });

  it('names every key it cannot map, with its line, in one error', () => {
    const issues = refusal('user = "app"\ngpu = true\nstorage = 40\nbogus = 1\n\n[health]\nexec = ["true"]\n\n[dev]\ncolor = "red"\n\n[network]\ndeny = ["x"]\n');
    expect(issues).toEqual([
      expect.stringMatching(/^S\.toml:1 user: cannot be mapped: smol runs guest commands as root/),
      expect.stringMatching(/^S\.toml:2 gpu: cannot be mapped: smolvm's gpu is Vulkan/),
      expect.stringMatching(/^S\.toml:3 storage: cannot be mapped/),
      expect.stringMatching(/^S\.toml:4 bogus: unknown key/),
      expect.stringMatching(/^S\.toml:6 health: cannot be mapped: smol has no health checks/),
      expect.stringMatching(/^S\.toml:10 dev\.color: unknown key/),
      expect.stringMatching(/^S\.toml:13 network\.deny: unknown key/),
    ]);
  });

  it('refuses malformed values: env without =, a volume without a guest path, lists of non-strings', () => {
    expect(refusal('env = ["NOEQUALS"]')).toEqual([expect.stringContaining('"NOEQUALS" is not KEY=VALUE')]);
    expect(refusal('volumes = ["./only"]')).toEqual([expect.stringContaining('"./only" is not HOST:GUEST[:ro]')]);
    expect(refusal('init = [1, 2]')).toEqual([expect.stringContaining('init: must be a list of strings')]);
    expect(refusal('dev = 3')).toEqual([expect.stringContaining('dev: must be a table')]);
  });

  it('reports TOML syntax errors with the line', () => {
    try {
      parseSmolvmToml('cpus = 2\n[broken\n', 'S.toml');
      throw new Error('expected an error');
    } catch (err) {
      expect((err as ValidationError).message).toMatch(/^S\.toml is not valid TOML/);
      expect((err as ValidationError).where).toBe('S.toml:2');
    }
  });

  it('reports values the schema refuses by smol\'s key', () => {
    expect(() => parseTomlSmolfile('cpus = 0\n', 'S.toml')).toThrow(ValidationError);
    try {
      parseTomlSmolfile('memory = 16\n', 'S.toml');
    } catch (err) {
      expect((err as ValidationError).issues[0]).toEqual({ path: 'S.toml memory', message: 'memory must be at least 64 MiB' });
    }
  });
});

describe('which Smolfiles are TOML', () => {
  const yamlMap = (b: boolean) => () => b;
  it('by name, else by content that is no YAML mapping but is TOML', () => {
    expect(isTomlSmolfile('Smolfile.toml', 'cpus: 2', yamlMap(true))).toBe(true);
    expect(isTomlSmolfile('Smolfile', 'cpus = 2', yamlMap(false))).toBe(true);
    expect(isTomlSmolfile('Smolfile', 'cpus: 2', yamlMap(true))).toBe(false);
    expect(isTomlSmolfile('Smolfile.yaml', 'cpus = 2', yamlMap(false))).toBe(false);
    expect(isTomlSmolfile('Smolfile', '', yamlMap(false))).toBe(false);
  });

  it('loadSmolfile reads a TOML file named Smolfile wherever a Smolfile loads', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-toml-'));
    fs.writeFileSync(path.join(dir, 'Smolfile'), 'cpus = 2\nmemory = 512\n\n[dev]\nenv = ["K=v"]\n');
    expect(loadSmolfile(path.join(dir, 'Smolfile')).spec).toMatchObject({ cpus: 2, memory: 512, env: { K: 'v' } });
    fs.writeFileSync(path.join(dir, 'Smolfile'), 'cpus: 3\n');
    expect(loadSmolfile(path.join(dir, 'Smolfile')).spec.cpus).toBe(3);
    fs.rmSync(dir, { recursive: true, force: true });
  });
});
