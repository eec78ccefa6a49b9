import type { Command } from 'commander';
import { z } from 'zod';
import { inspectArtifact } from '../../../artifact/index.js';
import { formatBytes, printJson, printTable } from '../../output.js';

export const inspectSchema = z.object({ json: z.boolean().default(false) }).strict();

export function register(parent: Command): void {
  parent.command('inspect')
    .description('show an artifact\'s manifest, entries, sizes, digests and signature status (reads only the footer and manifest)')
    .argument('<file>', '.smolmachine file')
    .option('--json', 'print as JSON')
    .action(async (file: string, raw: Record<string, unknown>) => {
      const o = inspectSchema.parse(raw);
      const r = await inspectArtifact(file);
      if (o.json) return printJson(r);
      const m = r.manifest;
      const lines = [
        `file       ${r.file} (${formatBytes(r.size)})`,
        `digest     ${r.digest}`,
        `format     v${m.formatVersion}, smol ${m.smolVersion}, created ${m.createdAt}`,
        `guest      ${m.guest.platform}/${m.guest.arch}, ${m.resources.cpus} vCPU, ${m.resources.memoryMiB} MiB`,
        `kernel     ${m.kernel.identity}${m.kernel.cmdline ? ` (${m.kernel.cmdline})` : ''}`,
        `image      ${m.image.identity}`,
        `signature  ${r.signed ? `ed25519, key ${r.keyId} (run \`smol pack verify --key\` to check it)` : 'unsigned'}`,
        `resume     ${m.resume ? `${m.resume.memoryBytes / 2 ** 20} MiB memory state for QEMU ${m.resume.qemuBuild} (${m.resume.accelerator}, cpu ${m.resume.cpuModel}, ${m.resume.machineType}${m.resume.net ? ', networking' : ''})` : 'none: cold boot'}`,
      ];
      if (m.entrypoint) lines.push(`entrypoint ${JSON.stringify(m.entrypoint)}`);
      process.stdout.write(lines.join('\n') + '\n\n');
      printTable(['ENTRY', 'KIND', 'FORMAT', 'SIZE', 'STORED', 'SHA256'],
        m.entries.map((e) => [e.name, e.kind, e.format, formatBytes(e.size), formatBytes(e.stored.size), e.sha256.slice(0, 16)]));
    });
}
