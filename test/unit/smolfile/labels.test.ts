import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../../src/errors/index.js';
import { matchesLabels, parseFilters, parseLabelFlags } from '../../../src/smolfile/labels.js';
import { parseSmolfile } from '../../../src/smolfile/load.js';

describe('labels', () => {
  it('parses K=V flags, later ones winning; a bare K is an empty value (as in Docker); values may hold =', () => {
    expect(parseLabelFlags(['team=infra', 'team=ml', 'canary', 'url=a=b'])).toEqual({ team: 'ml', canary: '', url: 'a=b' });
    expect(parseLabelFlags(undefined)).toEqual({});
  });

  it('rejects bad keys and newlines in values, naming the flag', () => {
    for (const bad of ['=x', 'has space=1', '-lead=1', 'k=a\nb']) {
      const e = (() => { try { parseLabelFlags([bad]); } catch (err) { return err; } })();
      expect(e, bad).toBeInstanceOf(ValidationError);
      expect((e as ValidationError).issues[0].path).toBe('--label');
    }
  });

  it('filters: label=K matches any value, label=K=V that value; several must all match', () => {
    const f = parseFilters(['label=team', 'label=tier=web']);
    expect(f).toEqual([{ key: 'team' }, { key: 'tier', value: 'web' }]);
    expect(matchesLabels({ team: 'x', tier: 'web' }, f)).toBe(true);
    expect(matchesLabels({ team: 'x', tier: 'db' }, f)).toBe(false);
    expect(matchesLabels({ tier: 'web' }, f)).toBe(false);
    expect(matchesLabels({ a: '' }, parseFilters(['label=a=']))).toBe(true);
    expect(matchesLabels({}, [])).toBe(true);
  });

  it('refuses filters other than label, and bad keys in them', () => {
    expect(() => parseFilters(['status=running'])).toThrow(ValidationError);
    expect(() => parseFilters(['label='])).toThrow(ValidationError);
    expect(() => parseFilters(['label'])).toThrow(ValidationError);
  });

  it('reads Smolfile labels, numbers and booleans as strings, and rejects bad keys with the line', () => {
    expect(parseSmolfile('labels: {team: infra, replicas: 3, canary: true}\n').labels).toEqual({ team: 'infra', replicas: '3', canary: 'true' });
    const e = (() => { try { parseSmolfile('cpus: 1\nlabels:\n  "bad key": 1\n'); } catch (err) { return err as ValidationError; } })();
    expect(e?.issues[0]?.path).toMatch(/^Smolfile:3 labels/);
  });
});
