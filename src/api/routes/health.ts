/** Liveness, readiness and metrics: what probes and Prometheus ask. */
import { PrerequisiteError } from '../../errors/index.js';
import { dataPaths } from '../../util/paths.js';
import { runChecks } from '../../vm/api/host.js';
import { defineRoute, type Route } from '../router.js';
import { errorSchema } from '../schemas/error.js';
import { healthSchema, readySchema } from '../schemas/health.js';

export const routes: Route[] = [
  defineRoute({
    method: 'GET', path: '/v1/health', operationId: 'health', tags: ['health'], public: true,
    summary: 'The server is up (no token needed)',
    responses: { 200: { description: 'up', schema: healthSchema } },
    handle: async ({ ctx }) => ({ body: { ok: true, version: ctx.version } }),
  }),
  defineRoute({
    method: 'GET', path: '/v1/readyz', operationId: 'ready', tags: ['health'],
    summary: 'The machine database opens and what `smol doctor` requires is present',
    responses: { 200: { description: 'ready', schema: readySchema }, 503: { description: 'not ready', schema: errorSchema } },
    handle: async ({ ctx }) => {
      ctx.svc.store.list(); // throws when the database cannot be read
      // what `smol doctor` requires (QEMU, the kernel, the agent): a server without them cannot boot anything
      const missing = (await runChecks(ctx.home)).filter((c) => c.required && c.status === 'missing');
      if (missing.length) {
        throw new PrerequisiteError(`not ready: missing ${missing.map((c) => c.name).join(', ')}`, { where: missing[0].name, hint: missing[0].fix ? `Fix: ${missing[0].fix} (smol doctor lists every check).` : 'Run `smol doctor`.' });
      }
      return { body: { ok: true, machineDb: dataPaths(ctx.home).machineDb } };
    },
  }),
  defineRoute({
    method: 'GET', path: '/v1/openapi.json', operationId: 'openapi', tags: ['health'], public: true,
    summary: 'This server\'s OpenAPI 3.1 document (the same as `smol serve openapi` and docs/openapi.json)',
    responses: { 200: { description: 'the document', contentType: 'application/json' } },
    handle: async ({ ctx }) => {
      // lazily: the route table imports this file
      const [{ allRoutes }, { openApiDocument }] = await Promise.all([import('./index.js'), import('../openapi.js')]);
      return { body: openApiDocument(allRoutes, ctx.version) };
    },
  }),
  defineRoute({
    method: 'GET', path: '/metrics', operationId: 'metrics', tags: ['health'],
    summary: 'Prometheus metrics (text exposition format)',
    responses: { 200: { description: 'metrics', contentType: 'text/plain' } },
    handle: async ({ ctx, res }) => {
      const text = await ctx.metrics.registry.metrics();
      res.writeHead(200, { 'content-type': ctx.metrics.registry.contentType });
      res.end(text);
    },
  }),
];
