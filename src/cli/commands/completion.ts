import type { Command } from 'commander';
import { UserError } from '../../errors/index.js';

const shells = ['bash', 'zsh', 'fish'] as const;

/** `smol completion bash|zsh|fish`: print a completion script made from the full command tree. */
export function register(program: Command): void {
  program.command('completion')
    .description('print a shell completion script (bash, zsh or fish)')
    .argument('<shell>', shells.join(' | '))
    .addHelpText('after', `
Examples:
  $ source <(smol completion bash)                          # this shell; or save it in /etc/bash_completion.d/smol
  $ smol completion zsh > "\${fpath[1]}/_smol"                # zsh, then start a new shell
  $ smol completion fish > ~/.config/fish/completions/smol.fish
`)
    .action(async (shell: string) => {
      if (!(shells as readonly string[]).includes(shell)) {
        throw new UserError(`unknown shell "${shell}"`, { where: '<shell>', hint: `Pick one of: ${shells.join(', ')}` });
      }
      // the whole tree, not just this command: smol loads only the command named on its command line
      const [{ buildProgram }, gen] = await Promise.all([import('../main.js'), import('../completion.js')]);
      const nodes = gen.completionTree(await buildProgram());
      const script = shell === 'bash' ? gen.bashCompletion(nodes) : shell === 'zsh' ? gen.zshCompletion(nodes) : gen.fishCompletion(nodes);
      process.stdout.write(script);
    });
}
