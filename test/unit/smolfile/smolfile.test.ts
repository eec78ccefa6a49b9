import { describe, expect, it } from 'vitest';
import { parseSmolfile } from '../../../src/smolfile/load.js';
import { mergeSpec } from '../../../src/smolfile/merge.js';
import { parseMemoryMiB } from '../../../src/smolfile/schema.js';
import { validationIssues } from '../../helpers/validation.js';

const issuesOf = (text: string) => validationIssues(() => parseSmolfile(text, 'Smolfile'));

describe('Smolfile', () => {
  it('applies defaults to an empty file', () => {
    const s = parseSmolfile('');
    expect(s).toMatchObject({ image: 'default', cpus: 1, memory: 256, net: false, env: {}, workdir: '/', init: [], gpu: false });
  });

  it('parses every field', () => {
    const s = parseSmolfile(['image: ./rootfs', 'cpus: 2', 'memory: 1G', 'net: true', 'env:', '  A: 1', 'workdir: /srv', 'init:', '  - echo hi', 'gpu: true', 'fork:', '  enabled: true'].join('\n'));
    expect(s).toMatchObject({ image: './rootfs', cpus: 2, memory: 1024, net: true, env: { A: '1' }, workdir: '/srv', init: ['echo hi'], gpu: true, fork: { enabled: true } });
  });

  it('accepts env as a K=V list', () => {
    expect(parseSmolfile('env: ["A=1", "B=x=y"]').env).toEqual({ A: '1', B: 'x=y' });
  });

  it('names an unknown key and its line', () => {
    const issues = issuesOf('cpus: 1\n\nmemroy: 512\n');
    expect(issues).toEqual([{ path: 'Smolfile:3 memroy', message: expect.stringContaining('unknown key "memroy"') }]);
  });

  it('names nested unknown keys', () => {
    expect(issuesOf('fork:\n  enable: true\n')[0].path).toBe('Smolfile:2 fork.enable');
  });

  it('reports wrong types with the field path and line', () => {
    const issues = issuesOf('cpus: two\nmemory: 0\n');
    expect(issues.map((i) => i.path)).toEqual(['Smolfile:1 cpus', 'Smolfile:2 memory']);
    expect(issues[1].message).toMatch(/at least 64/);
  });

  it('rejects relative workdirs and malformed env entries', () => {
    expect(issuesOf('workdir: srv').map((i) => i.path)).toEqual(['Smolfile:1 workdir']);
    expect(issuesOf('env: ["NOEQUALS"]')[0].message).toMatch(/NAME=value/);
  });

  it('reports invalid YAML with its line', () => {
    expect(() => parseSmolfile('cpus: [1\nmemory: 2', 'S')).toThrow(/not valid YAML/);
  });

  it('parses sizes', () => {
    expect(parseMemoryMiB('512M')).toBe(512);
    expect(parseMemoryMiB('2GiB')).toBe(2048);
    expect(parseMemoryMiB(300)).toBe(300);
    expect(parseMemoryMiB('lots')).toBeNaN();
  });
});

describe('mergeSpec', () => {
  it('lets flags override scalars and concatenates lists and env', () => {
    const base = parseSmolfile('cpus: 1\nenv: {A: a, B: b}\ninit: [one]\nimage: ./img');
    const m = mergeSpec(base, '/proj', { cpus: 2, env: { B: 'B2', C: 'c' }, init: ['two'] });
    expect(m.cpus).toBe(2);
    expect(m.env).toEqual({ A: 'a', B: 'B2', C: 'c' });
    expect(m.init).toEqual(['one', 'two']);
    expect(m.image).toBe('/proj/img');
  });

  it('keeps a registry reference a reference unless a path of that name exists (#20.7)', () => {
    expect(mergeSpec(parseSmolfile('image: debian:bookworm'), '/nonexistent-proj', {}).image).toBe('debian:bookworm');
    expect(mergeSpec(parseSmolfile('image: rootfs'), '/nonexistent-proj', {}).image).toBe('rootfs');
    expect(mergeSpec(parseSmolfile('image: rootfs'), '/', {}).image).toBe('rootfs');
    expect(mergeSpec(parseSmolfile('image: tmp'), '/', {}).image).toBe('/tmp'); // a directory there wins
  });
});
