import { describe, expect, it } from 'vitest';
import { ExitCode, mapFsError, NoSpaceError, NotFoundError, SmolError, ValidationError } from '../../../src/errors/index.js';

describe('error hierarchy', () => {
  it('gives each class its documented exit code', () => {
    expect(new NotFoundError('x').exitCode).toBe(ExitCode.notFound);
    expect(new ValidationError('x', []).exitCode).toBe(ExitCode.invalidInput);
    expect(new NotFoundError('x')).toBeInstanceOf(SmolError);
  });
  it('maps ENOSPC to NoSpaceError and leaves other errors alone', () => {
    const enospc = Object.assign(new Error('write'), { code: 'ENOSPC' });
    expect(mapFsError(enospc, 'writing disk')).toBeInstanceOf(NoSpaceError);
    const other = Object.assign(new Error('x'), { code: 'EACCES' });
    expect(mapFsError(other, 'writing disk')).toBe(other);
  });
  it('withHint keeps class, code, where and cause, and adds a line to the hint', () => {
    const cause = new Error('root');
    const e = new NotFoundError('gone', { where: 'x', hint: 'first', cause }).withHint('second');
    expect(e).toBeInstanceOf(NotFoundError);
    expect([e.message, e.exitCode, e.where, e.cause, e.name]).toEqual(['gone', ExitCode.notFound, 'x', cause, 'NotFoundError']);
    expect(e.hint).toBe('first\n      second');
    expect(new SmolError('m').withHint('only').hint).toBe('only');
  });
  it('keeps exit codes unique so scripts can tell failures apart', () => {
    const values = Object.values(ExitCode);
    expect(new Set(values).size).toBe(values.length);
  });
});
