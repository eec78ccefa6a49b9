/** One duration parser for manifests and flags, with one documented maximum (issue 31). */
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../../src/errors/index.js';
import { durationSchema, parseFlags } from '../../../src/cli/machine-options.js';
import { workerSchema } from '../../../src/cli/commands/worker.js';
import { z } from 'zod';

const flagIssues = (schema: z.ZodTypeAny, opts: unknown) => {
  try {
    parseFlags(schema, opts);
  } catch (err) {
    expect(err).toBeInstanceOf(ValidationError);
    return (err as ValidationError).issues;
  }
  throw new Error('expected a ValidationError');
};

describe('durations on the command line', () => {
  const flags = z.object({ timeout: durationSchema.optional(), bootTimeout: durationSchema.optional() });

  it('refuses a duration past 24 days, naming the flag, instead of a timer that fires at once', () => {
    expect(flagIssues(flags, { timeout: '99999999999999999999h' })).toEqual([{ path: '--timeout', message: expect.stringMatching(/at most 24d/) }]);
    expect(flagIssues(flags, { bootTimeout: '99999999999999999999' })).toEqual([{ path: '--boot-timeout', message: expect.stringMatching(/at most 24d/) }]);
    expect(flagIssues(flags, { timeout: '25d' })[0].message).toMatch(/at most 24d/);
  });

  it('keeps its forms: bare seconds, ms-style units, up to exactly 24 days', () => {
    expect(parseFlags(flags, { timeout: '1.5', bootTimeout: '24d' })).toEqual({ timeout: 1500, bootTimeout: 24 * 86_400_000 });
    expect(parseFlags(flags, { timeout: '500ms' })).toEqual({ timeout: 500 });
    expect(flagIssues(flags, { timeout: 'soon' })[0].message).toMatch(/not a duration/);
    expect(flagIssues(flags, { timeout: '0' })[0].message).toMatch(/not a duration/);
  });

  it('holds the worker\'s durations to the same maximum', () => {
    expect(flagIssues(workerSchema, { lease: '99999999999999999999h' })).toEqual([{ path: '--lease', message: expect.stringMatching(/at most 24d/) }]);
    expect(flagIssues(workerSchema, { exitWhenIdle: '30d' })[0]).toMatchObject({ path: '--exit-when-idle' });
    expect(parseFlags(workerSchema, { lease: '30s' })).toMatchObject({ lease: 30_000 });
  });
});
