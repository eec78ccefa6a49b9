/** Forks and fork points, through the service calls `smol fork` and `smol snapshot` make. */
import { forkFromPoint, forkMachine, saveForkPoint, type CloneOutcome } from '../../vm/api/fork.js';
import { listPoints, removePoint, type MachineService } from '../../vm/api/machines.js';
import { machineView } from '../machine-view.js';
import { defineRoute, type Route } from '../router.js';
import { errorSchema } from '../schemas/error.js';
import { forkResultSchema, forkSchema, pointForkSchema, pointListSchema, pointParamsSchema, pointRemovedSchema, pointRemoveQuerySchema, savedPointSchema, savePointSchema } from '../schemas/fork.js';
import { machineNameParamsSchema } from '../schemas/machines.js';
import type { ApiContext } from '../context.js';

const notFound = { 404: { description: 'no such machine or point', schema: errorSchema } };
const conflict = { 409: { description: 'not running, not forkable, or a name taken', schema: errorSchema } };

/** Running clones as Machines; failed ones by name and reason (a partial fork still made the others). */
function outcome(svc: MachineService, clones: CloneOutcome[], totalMs: number) {
  return {
    clones: clones.filter((c) => c.ok).map((c) => machineView(svc, svc.store.get(c.id))),
    failed: clones.filter((c) => !c.ok).map((c) => ({ name: c.name, error: c.error ?? 'failed' })),
    totalMs: Math.round(totalMs),
  };
}

const timed = <T>(ctx: ApiContext, n: number, f: () => Promise<T>) => {
  ctx.metrics.forks.inc(n);
  return ctx.metrics.time(ctx.metrics.forkSeconds, f);
};

export const routes: Route[] = [
  defineRoute({
    method: 'POST', path: '/v1/machines/{name}/fork', operationId: 'forkMachine', tags: ['fork'],
    summary: 'Clone a running forkable machine into count machines that continue from this moment',
    params: machineNameParamsSchema, body: forkSchema,
    responses: { 200: { description: 'the clones', schema: forkResultSchema }, ...notFound, ...conflict },
    handle: async ({ ctx, params, body }) => {
      const r = await timed(ctx, body.count ?? 1, () => forkMachine(ctx.svc, params.name, { count: body.count ?? 1, namePrefix: body.namePrefix, env: body.env, labels: body.labels, waitReady: body.waitReady, hold: body.hold }));
      return { body: outcome(ctx.svc, r.clones, r.totalMs) };
    },
  }),
  defineRoute({
    method: 'GET', path: '/v1/points', operationId: 'listPoints', tags: ['fork'], summary: 'Saved fork points (smol snapshot ls --json)',
    responses: { 200: { description: 'the points', schema: pointListSchema } },
    handle: async ({ ctx }) => ({ body: { points: listPoints(ctx.svc) } }),
  }),
  defineRoute({
    method: 'POST', path: '/v1/machines/{name}/points', operationId: 'savePoint', tags: ['fork'],
    summary: 'Save a running forkable machine as a named fork point (one pause)', params: machineNameParamsSchema, body: savePointSchema,
    responses: { 201: { description: 'saved', schema: savedPointSchema }, ...notFound, ...conflict },
    handle: async ({ ctx, params, body }) => ({ status: 201, body: await saveForkPoint(ctx.svc, params.name, body.name) }),
  }),
  defineRoute({
    method: 'DELETE', path: '/v1/points/{point}', operationId: 'removePoint', tags: ['fork'],
    summary: 'Remove a fork point (refused while clones use it, unless force)', params: pointParamsSchema, query: pointRemoveQuerySchema,
    responses: { 200: { description: 'removed; freed: its files went now', schema: pointRemovedSchema }, ...notFound, ...conflict },
    handle: async ({ ctx, params, query }) => ({ body: { point: params.point, ...removePoint(ctx.svc, params.point, { force: query.force === 'true' || query.force === '1' }) } }),
  }),
  defineRoute({
    method: 'POST', path: '/v1/points/{point}/fork', operationId: 'forkPoint', tags: ['fork'],
    summary: 'Start clones from a saved fork point (the machine it came from is not touched)', params: pointParamsSchema, body: pointForkSchema,
    responses: { 200: { description: 'the clones', schema: forkResultSchema }, ...notFound, ...conflict },
    handle: async ({ ctx, params, body }) => {
      const count = body.names?.length ?? body.count ?? 1;
      const r = await timed(ctx, count, () => forkFromPoint(ctx.svc, params.point, { count, names: body.names, namePrefix: body.namePrefix, env: body.env, labels: body.labels }));
      return { body: outcome(ctx.svc, r.clones, r.totalMs) };
    },
  }),
];
