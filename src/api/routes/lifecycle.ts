/** Creating, starting, stopping, updating, pausing and removing machines, as `smol machine *` does. */
import path from 'node:path';
import { inspectArtifact } from '../../artifact/index.js';
import { UserError } from '../../errors/index.js';
import { mergeSpec } from '../../smolfile/merge.js';
import { parseSmolfile } from '../../smolfile/load.js';
import { checkPortsFree, checkVolumes, flagLabel, parseVolumeFlag, pauseMachine, resumeMachine, updateMachine } from '../../vm/api/machines.js';
import { hostPaths } from '../context.js';
import { hostPathRefused } from '../host-paths.js';
import { machineView } from '../machine-view.js';
import { defineRoute, type Route } from '../router.js';
import { errorSchema } from '../schemas/error.js';
import { machineNameParamsSchema, machineSchema } from '../schemas/machines.js';
import { createMachineSchema, pauseMachineSchema, removedSchema, removeQuerySchema, stopMachineSchema, updateMachineSchema } from '../schemas/machines-write.js';

const notFound = { 404: { description: 'no such machine', schema: errorSchema } };
const conflict = { 409: { description: 'the machine is in the wrong state, or locked', schema: errorSchema } };
const machine = (description: string) => ({ description, schema: machineSchema });

export const routes: Route[] = [
  defineRoute({
    method: 'POST', path: '/v1/machines', operationId: 'createMachine', tags: ['machines'],
    summary: 'Create a machine (the options of `smol machine create`, or a Smolfile), and start it with start: true',
    body: createMachineSchema,
    responses: { 201: machine('the machine made'), 400: { description: 'invalid options', schema: errorSchema }, ...hostPathRefused, ...conflict },
    handle: async ({ ctx, body }) => {
      const base = body.smolfile === undefined ? undefined : parseSmolfile(typeof body.smolfile === 'string' ? body.smolfile : JSON.stringify(body.smolfile), 'body.smolfile');
      if (body.from && body.image) throw new UserError('from and image both name the image; pass one', { where: 'from' });
      if (body.from) hostPaths(ctx).check(body.from, 'from'); // before the artifact is opened
      // as `machine create --from`: the artifact's recorded shape is the default (a memory-carrying artifact
      // resumes only into a machine of the shape it was packed from); the body's fields, or a Smolfile, override
      const art = body.from && !base ? (await inspectArtifact(path.resolve(body.from))).manifest : undefined;
      const volumes = (body.volumes ?? []).map((v) => parseVolumeFlag(v));
      const spec = mergeSpec(base, undefined, {
        image: body.from ?? body.image, cpus: body.cpus ?? art?.resources.cpus, memory: body.memory ?? art?.resources.memoryMiB, net: body.net, forkable: body.forkable, ports: body.ports,
        env: art?.env || body.env ? { ...art?.env, ...body.env } : undefined, workdir: body.workdir ?? art?.workdir, volumes, labels: body.labels,
      });
      hostPaths(ctx).checkSpec(spec, body.smolfile === undefined ? 'body' : 'smolfile');
      checkVolumes(spec.volumes, flagLabel(spec.volumes));
      if (body.start) await checkPortsFree(spec.ports, body.name ?? 'the machine'); // a taken host port: nothing made
      let rec = await ctx.svc.create(spec, { name: body.name });
      if (body.start) {
        ctx.metrics.boots.inc();
        rec = await ctx.metrics.time(ctx.metrics.bootSeconds, () => ctx.svc.start(rec.id));
      }
      return { status: 201, body: machineView(ctx.svc, rec) };
    },
  }),
  defineRoute({
    method: 'POST', path: '/v1/machines/{name}/start', operationId: 'startMachine', tags: ['machines'],
    summary: 'Start a stopped machine (a paused one resumes)', params: machineNameParamsSchema,
    responses: { 200: machine('running'), ...notFound, ...conflict },
    handle: async ({ ctx, params }) => {
      ctx.metrics.boots.inc();
      const rec = await ctx.metrics.time(ctx.metrics.bootSeconds, () => ctx.svc.start(params.name));
      return { body: machineView(ctx.svc, rec) };
    },
  }),
  defineRoute({
    method: 'POST', path: '/v1/machines/{name}/stop', operationId: 'stopMachine', tags: ['machines'],
    summary: 'Stop a machine (guest shutdown, or kill with force)', params: machineNameParamsSchema, body: stopMachineSchema,
    responses: { 200: machine('stopped'), ...notFound, ...conflict },
    handle: async ({ ctx, params, body }) => ({ body: machineView(ctx.svc, await ctx.svc.stop(params.name, body)) }),
  }),
  defineRoute({
    method: 'PATCH', path: '/v1/machines/{name}', operationId: 'updateMachine', tags: ['machines'],
    summary: 'Change a stopped machine\'s cpus and memory, or any machine\'s labels', params: machineNameParamsSchema, body: updateMachineSchema,
    responses: { 200: machine('updated'), ...notFound, ...conflict },
    handle: async ({ ctx, params, body }) => {
      const r = await updateMachine(ctx.svc, params.name, { cpus: body.cpus, memory: body.memory }, body.labels ?? {});
      return { body: machineView(ctx.svc, r.machine) };
    },
  }),
  defineRoute({
    method: 'DELETE', path: '/v1/machines/{name}', operationId: 'removeMachine', tags: ['machines'],
    summary: 'Remove a machine (a running one only with force=true)', params: machineNameParamsSchema, query: removeQuerySchema,
    responses: { 200: { description: 'the machines removed', schema: removedSchema }, ...notFound, ...conflict },
    handle: async ({ ctx, params, query }) => ({ body: { removed: await ctx.svc.remove(params.name, { force: query.force === 'true' || query.force === '1' }) } }),
  }),
  defineRoute({
    method: 'POST', path: '/v1/machines/{name}/pause', operationId: 'pauseMachine', tags: ['machines'],
    summary: 'Pause a running machine (vCPUs stopped, memory kept; toDisk: saved and QEMU ended)', params: machineNameParamsSchema, body: pauseMachineSchema,
    responses: { 200: machine('paused'), ...notFound, ...conflict },
    handle: async ({ ctx, params, body }) => ({ body: machineView(ctx.svc, await pauseMachine(ctx.svc, params.name, body)) }),
  }),
  defineRoute({
    method: 'POST', path: '/v1/machines/{name}/resume', operationId: 'resumeMachine', tags: ['machines'],
    summary: 'Resume a paused machine', params: machineNameParamsSchema,
    responses: { 200: machine('running'), ...notFound, ...conflict },
    handle: async ({ ctx, params }) => {
      ctx.metrics.restores.inc();
      return { body: machineView(ctx.svc, await resumeMachine(ctx.svc, params.name)) };
    },
  }),
];
