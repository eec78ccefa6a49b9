/** Machines an agent keeps across calls: create (and start), list, remove, and fork into clones. */
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import { ForkError } from '../../errors/index.js';
import { mergeSpec } from '../../smolfile/merge.js';
import { resolveImageRef } from '../../util/image-ref.js';
import { forkMachine } from '../../vm/api/fork.js';
import type { MachineRecord } from '../../vm/api/machines.js';
import { jsonResult } from '../results.js';
import { createMachineInputSchema, forkInputSchema, machineInputSchema } from '../schemas.js';
import type { ToolContext } from './context.js';

const machineSchema = z.object({
  name: z.string(), state: z.string(), image: z.string(), cpus: z.number(), memoryMiB: z.number(),
  forkable: z.boolean(), parent: z.string().nullable(), createdAt: z.string(), labels: z.record(z.string(), z.string()),
});

function view(rec: MachineRecord, nameOf: (id: string) => string | null): z.output<typeof machineSchema> {
  return {
    name: rec.name, state: rec.state, image: rec.spec.image, cpus: rec.spec.cpus, memoryMiB: rec.spec.memory,
    forkable: rec.spec.fork.enabled, parent: rec.parent ? nameOf(rec.parent) : null, createdAt: new Date(rec.createdAt).toISOString(), labels: rec.labels,
  };
}

export function registerMachineTools(server: McpServer, ctx: ToolContext): void {
  server.registerTool('create_machine', {
    title: 'Create and start a machine',
    description: 'Create a persistent Linux microVM and start it; it keeps its files and processes until remove_machine. Use its name with exec, read_file, write_file and fork.',
    inputSchema: createMachineInputSchema,
    outputSchema: z.object({ machine: machineSchema }),
    annotations: { destructiveHint: false, idempotentHint: false, openWorldHint: false },
  }, (a) => ctx.call(async () => {
    const svc = ctx.svc();
    const spec = mergeSpec(undefined, undefined, {
      image: a.image && resolveImageRef(a.image, process.cwd()), cpus: a.cpus, memory: a.memory, net: a.net,
      env: a.env, workdir: a.workdir, forkable: a.forkable ?? true,
    });
    const made = await svc.create(spec, { name: a.name, onProgress: ctx.progress });
    let rec: MachineRecord;
    try {
      rec = await svc.start(made.id, { onProgress: ctx.progress });
    } catch (err) {
      // a machine that never ran is of no use to the agent and would only hold its name
      await svc.remove(made.id, { force: true }).catch(() => undefined);
      throw err;
    }
    const m = view(rec, () => null);
    return jsonResult(`created and started machine "${m.name}" (${m.image}, ${m.cpus} CPU, ${m.memoryMiB} MiB${m.forkable ? ', forkable' : ''})`, { machine: m });
  }));

  server.registerTool('list_machines', {
    title: 'List machines',
    description: 'The machines on this host with their state (running, stopped, crashed…), image, size and parent (for clones).',
    inputSchema: z.object({}),
    outputSchema: z.object({ machines: z.array(machineSchema) }),
    annotations: { readOnlyHint: true, openWorldHint: false },
  }, () => ctx.call(async () => {
    const recs = await ctx.svc().list();
    const byId = new Map(recs.map((r) => [r.id, r.name]));
    const machines = recs.map((r) => view(r, (id) => byId.get(id) ?? null));
    const text = machines.length
      ? machines.map((m) => `${m.name}\t${m.state}\t${m.image}\t${m.cpus} CPU\t${m.memoryMiB} MiB${m.parent ? `\tclone of ${m.parent}` : ''}`).join('\n')
      : 'no machines';
    return jsonResult(text, { machines });
  }));

  server.registerTool('remove_machine', {
    title: 'Remove a machine',
    description: 'Stop a machine (if running) and delete it with its disk. A machine with clones must have them removed first.',
    inputSchema: machineInputSchema,
    outputSchema: z.object({ removed: z.array(z.string()) }),
    annotations: { destructiveHint: true, idempotentHint: false, openWorldHint: false },
  }, (a) => ctx.call(async () => {
    const removed = await ctx.svc().remove(a.machine, { force: true });
    return jsonResult(`removed ${removed.join(', ')}`, { removed });
  }));

  server.registerTool('fork', {
    title: 'Fork a machine',
    description: 'Clone a running forkable machine into new running machines that continue from this moment: same files, same memory, same processes. Returns the clones\' names, for exec and the other tools.',
    inputSchema: forkInputSchema,
    outputSchema: z.object({ parent: z.string(), clones: z.array(z.string()) }),
    annotations: { destructiveHint: false, idempotentHint: false, openWorldHint: false },
  }, (a) => ctx.call(async () => {
    const r = await forkMachine(ctx.svc(), a.machine, { count: a.count ?? 1, onProgress: ctx.progress });
    const ok = r.clones.filter((c) => c.ok).map((c) => c.name);
    const failed = r.clones.filter((c) => !c.ok);
    if (failed.length) {
      throw new ForkError(`${failed.length} of ${r.clones.length} clones failed to start: ${failed.map((c) => `${c.name}: ${c.error ?? 'unknown'}`).join('; ')}`, {
        where: r.parent, hint: ok.length ? `These clones are running: ${ok.join(', ')}; remove them with remove_machine when done.` : undefined,
      });
    }
    return jsonResult(`forked ${r.parent} into ${ok.join(', ')}`, { parent: r.parent, clones: ok });
  }));
}
