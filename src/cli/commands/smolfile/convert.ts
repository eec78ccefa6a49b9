import path from 'node:path';
import type { Command } from 'commander';
import { ValidationError } from '../../../errors/index.js';

/** `smol smolfile convert Smolfile.toml`: the YAML equivalent on stdout; nothing is written. */
export function register(parent: Command): void {
  parent.command('convert')
    .description('print the YAML Smolfile equivalent to a smolvm TOML Smolfile (every key smol cannot map is named, exit 65)')
    .argument('<file>', 'smolvm Smolfile (TOML)')
    .addHelpText('after', `
Examples:
  $ smol smolfile convert Smolfile.toml > Smolfile     # then: smol machine create dev -s Smolfile
  $ smol run -s Smolfile.toml -- uname -a             # a TOML Smolfile also loads as it is
`)
    .action(async (file: string) => {
      const [{ isTomlSmolfile, parseSmolvmToml }, { parseTomlSmolfile, readSmolfileText }, { createRequire }] = await Promise.all([
        import('../../../smolfile/toml.js'), import('../../../smolfile/load.js'), import('node:module')]);
      const text = readSmolfileText(file, 'Pass the path of a smolvm Smolfile (TOML).');
      const yaml = createRequire(import.meta.url)('yaml') as typeof import('yaml');
      const name = path.basename(file);
      if (!isTomlSmolfile(name, text, () => yaml.isMap(yaml.parseDocument(text).contents))) {
        throw new ValidationError(`${file} is not a TOML Smolfile`, [], { where: file, hint: 'It already reads as YAML: use it with -s as it is.' });
      }
      const shape = parseSmolvmToml(text, name);
      parseTomlSmolfile(text, name); // the same checks as loading it: values smol would refuse fail here too
      process.stdout.write(`# Converted from ${name} by \`smol smolfile convert\`; fields: Smolfile.example\n`);
      process.stdout.write(Object.keys(shape).length ? yaml.stringify(shape) : '{}\n');
    });
}
