import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ConflictError, ForkError, ExitCode, NotFoundError, TimeoutError, ValidationError } from '../../../src/errors/index.js';
import { ApiError, httpError } from '../../../src/api/errors.js';
import { expectDocumented } from '../../helpers/openapi.js';

describe('api error mapping', () => {
  it('gives each error class its status, code and the CLI\'s exit code, hint and where', () => {
    const nf = httpError(new NotFoundError('machine "x" not found', { hint: 'smol machine ls lists machines', where: 'x' }));
    expect(nf).toEqual({ status: 404, body: { error: { code: 'not_found', message: 'machine "x" not found', hint: 'smol machine ls lists machines', where: 'x', exitCode: 66 } } });
    expect(httpError(new ConflictError('busy')).status).toBe(409);
    expect(httpError(new TimeoutError('slow')).body.error).toMatchObject({ code: 'timeout', exitCode: 124 });
    // a class without its own code answers as its exit code does
    expect(httpError(new ForkError('locked', {}, ExitCode.conflict)).body.error.code).toBe('conflict');
    expect(httpError(new ApiError(401, 'unauthorized', 'no token')).status).toBe(401);
  });

  it('turns validation and zod errors into invalid_input with field paths', () => {
    const v = httpError(new ValidationError('invalid body', [{ path: 'ports.0', message: 'bad' }]));
    expect(v).toMatchObject({ status: 400, body: { error: { code: 'invalid_input', exitCode: 65, issues: [{ path: 'ports.0', message: 'bad' }] } } });
    const zr = z.object({ a: z.array(z.number()) }).safeParse({ a: ['x'] });
    expect(httpError(zr.error).body.error.issues?.[0].path).toBe('a.0');
  });

  it('answers anything else as internal, and a full disk as no_space', () => {
    expect(httpError(new Error('boom'))).toMatchObject({ status: 500, body: { error: { code: 'internal', exitCode: 70 } } });
    expect(httpError(Object.assign(new Error('write'), { code: 'ENOSPC' })).body.error).toMatchObject({ code: 'no_space', exitCode: 73 });
  });

  it('matches the documented error shape, and the checker rejects what does not', () => {
    expectDocumented('GET', '/v1/machines/{name}', 404, httpError(new NotFoundError('gone')).body);
    expect(() => expectDocumented('GET', '/v1/machines/{name}', 404, { error: { code: 'not_found' } })).toThrow(/does not match/);
    expect(() => expectDocumented('GET', '/v1/health', 200, { ok: true })).toThrow(/does not match/);
  });
});
