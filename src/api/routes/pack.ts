/**
 * Pack create, verify and run, as the `smol pack` commands do them. Their paths are host paths the server
 * reads and writes as its own user, so these routes are exactly as trusted as the token (docs/api.md).
 */
import fs from 'node:fs';
import { packArtifact, getMachineSource, inspectArtifact, setMachineSource, verifyArtifact } from '../../artifact/index.js';
import { ConflictError, NotFoundError } from '../../errors/index.js';
import { mergeSpec } from '../../smolfile/merge.js';
import { machinePackSource } from '../../vm/api/pack.js';
import { defineRoute, type Route } from '../router.js';
import { errorSchema } from '../schemas/error.js';
import { hostPaths } from '../context.js';
import { runBuffered } from './run.js';
import { hostPathRefused } from '../host-paths.js';
import { packCreateSchema, packedSchema, packRunResultSchema, packRunSchema, packVerifiedSchema, packVerifySchema } from '../schemas/pack.js';

const failures = { 404: { description: 'no such machine or artifact', schema: errorSchema }, 409: { description: 'the output exists (pass force), or the machine is busy', schema: errorSchema }, ...hostPathRefused };

export const routes: Route[] = [
  defineRoute({
    method: 'POST', path: '/v1/pack', operationId: 'packCreate', tags: ['pack'], body: packCreateSchema,
    summary: 'Pack a machine into a .smolmachine at a host path (as trusted as the token: it writes as the server\'s user)',
    responses: { 201: { description: 'packed', schema: packedSchema }, ...failures },
    handle: async ({ ctx, body }) => {
      hostPaths(ctx).check(body.output, 'output');
      if (body.sign) hostPaths(ctx).check(body.sign, 'sign');
      if (!body.force && fs.existsSync(body.output)) throw new ConflictError(`${body.output} already exists`, { where: 'output', hint: 'Choose another path or pass force: true.' });
      setMachineSource(machinePackSource(() => ctx.svc));
      const { release, captured: _captured, ...inputs } = await getMachineSource().fromVm(body.machine, { withMemory: body.withMemory ?? false });
      try {
        const r = await packArtifact({ ...inputs, out: body.output, signKey: body.sign, force: body.force ?? false });
        return { status: 201, body: { path: r.out, digest: r.digest, bytes: r.size, signed: r.signed } };
      } finally {
        await release?.();
      }
    },
  }),
  defineRoute({
    method: 'POST', path: '/v1/pack/verify', operationId: 'packVerify', tags: ['pack'], body: packVerifySchema,
    summary: 'Check every digest of an artifact and its signature (ok: false names what failed)',
    responses: { 200: { description: 'the per-entry results', schema: packVerifiedSchema }, ...failures },
    handle: async ({ ctx, body }) => {
      hostPaths(ctx).check(body.path, 'path');
      if (body.key) hostPaths(ctx).check(body.key, 'key');
      if (!fs.existsSync(body.path)) throw new NotFoundError(`no such artifact: ${body.path}`, { where: 'path' });
      return { body: await verifyArtifact(body.path, { publicKey: body.key }) };
    },
  }),
  defineRoute({
    method: 'POST', path: '/v1/pack/run', operationId: 'packRun', tags: ['pack'], body: packRunSchema,
    summary: 'Run an artifact in a throwaway machine (its entrypoint, or argv) and answer with the exec result',
    responses: { 200: { description: 'the command ran (whatever its exit code)', schema: packRunResultSchema }, ...failures },
    handle: async ({ ctx, body, signal }) => {
      hostPaths(ctx).check(body.path, 'path');
      if (!fs.existsSync(body.path)) throw new NotFoundError(`no such artifact: ${body.path}`, { where: 'path' });
      const { manifest } = await inspectArtifact(body.path);
      const spec = mergeSpec(undefined, undefined, {
        image: body.path, cpus: manifest.resources.cpus, memory: manifest.resources.memoryMiB, env: { ...manifest.env, ...body.env }, workdir: body.workdir ?? manifest.workdir, command: manifest.entrypoint,
      });
      return { body: await runBuffered(ctx, spec, { ...body, argv: body.argv ?? spec.command ?? ['/bin/sh'], workdir: spec.workdir }, signal) };
    },
  }),
];
