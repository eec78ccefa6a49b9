/** Machines: list, look up, create, start, stop, update and remove (the services `smol machine *` uses). */
import { matchesLabels, parseFilters } from '../../smolfile/labels.js';
import { machineView } from '../machine-view.js';
import { defineRoute, type Route } from '../router.js';
import { errorSchema } from '../schemas/error.js';
import { machineListQuerySchema, machineListSchema, machineNameParamsSchema, machineSchema } from '../schemas/machines.js';

const notFound = { description: 'no such machine', schema: errorSchema };

export const routes: Route[] = [
  defineRoute({
    method: 'GET', path: '/v1/machines', operationId: 'listMachines', tags: ['machines'],
    summary: 'List machines, optionally by label and state',
    query: machineListQuerySchema,
    responses: { 200: { description: 'the machines', schema: machineListSchema }, 400: { description: 'bad filter', schema: errorSchema } },
    handle: async ({ ctx, query }) => {
      const filters = parseFilters(query.label?.map((l) => `label=${l}`));
      const recs = (await ctx.svc.list()).filter((r) => matchesLabels(r.labels, filters) && (!query.state || r.state === query.state));
      return { body: { machines: recs.map((r) => machineView(ctx.svc, r)) } };
    },
  }),
  defineRoute({
    method: 'GET', path: '/v1/machines/{name}', operationId: 'getMachine', tags: ['machines'],
    summary: 'One machine by name or id',
    params: machineNameParamsSchema,
    responses: { 200: { description: 'the machine', schema: machineSchema }, 404: notFound },
    handle: async ({ ctx, params }) => {
      const rec = ctx.svc.refresh(ctx.svc.store.get(params.name));
      return { body: machineView(ctx.svc, rec) };
    },
  }),
];
