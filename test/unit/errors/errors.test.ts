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
  it('keeps exit codes unique so scripts can tell failures apart', () => {
    const values = Object.values(ExitCode);
    expect(new Set(values).size).toBe(values.length);
  });
});
