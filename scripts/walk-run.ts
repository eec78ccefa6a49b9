/**
 * The data walk of `smol run` (issue #32's before/after): a depth-first walk of the static call graph of src/ from one
 * entry function, counting how often it crosses between files. Usage:
 *   npx tsx scripts/walk-run.ts [root] [--entry src/vm/run.ts:runEphemeral] [--within vm/] [--trace] [--top 10]
 * `root` may be a tree without node_modules: bare imports and @types then resolve from this script's checkout, so two
 * trees are read with the same libraries.
 *
 * What it counts, precisely:
 * - The walk enters a function (a "stop"), then reads its body in evaluation order: an expression's parts before the
 *   expression, so `f(g())` enters g before f and `a().b()` enters a before b. Functions written inside the body
 *   (arrows, callbacks, local helpers) are read in place, as part of it, and are never stops of their own.
 * - It follows: calls and `new` (the constructor, after the class's property initialisers), getters read, and a
 *   function passed by name as an argument (`.catch(onErr)`). The target is what the checker resolves (the signature's
 *   declaration, or the symbol through import/re-export aliases; an overload resolves to its implementation). A call
 *   on an interface or type-literal member resolves to every implementation in src/: members of classes that
 *   `implements` it and of object literals typed as it (`createQemuEngine`'s return), in file then source order.
 * - Only functions with a body in a file under root/src (under root/src/<within> with --within) are followed; each is entered once (a visited set), so a
 *   second call of a function already walked is not a stop and moves nowhere. Callbacks handed in by a caller (an
 *   `onProgress` option) and dynamic dispatch the checker cannot see are not followed.
 * - The walk's position is the file of the function it is reading; after a callee returns, the position is the
 *   caller's file again as soon as the caller reaches its next followed call. Collapsing repeats gives the file path.
 *   hops = moves between files on that path; returns = hops into a file visited before (and since left);
 *   entered = how many times the path arrives in a file (its first arrival included).
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const args = process.argv.slice(2);
const flag = (name: string) => { const i = args.indexOf(name); return i >= 0 ? args.splice(i, 2)[1] : undefined; };
const entryArg = flag('--entry') ?? 'src/vm/run.ts:runEphemeral';
const top = Number(flag('--top') ?? 10);
const within = flag('--within'); // e.g. vm/: follow only functions in files under src/vm/
const traceOn = args.includes('--trace');
const root = path.resolve(args.find((a) => !a.startsWith('--')) ?? '.');
const src = path.join(root, 'src') + path.sep;
const toolRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

function tsFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name)).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? tsFiles(p) : e.name.endsWith('.ts') && !e.name.endsWith('.d.ts') ? [p] : [];
  });
}

const cfg = ts.parseJsonConfigFileContent(ts.readConfigFile(path.join(root, 'tsconfig.json'), ts.sys.readFile).config ?? {}, ts.sys, root);
const options: ts.CompilerOptions = { ...cfg.options, noEmit: true,
  typeRoots: [path.join(root, 'node_modules/@types'), path.join(toolRoot, 'node_modules/@types')] };
const host = ts.createCompilerHost(options);
// a bare import the root cannot resolve (no node_modules there) resolves as if imported from this checkout
const stand = path.join(toolRoot, 'src', 'index.ts');
host.resolveModuleNameLiterals = (lits, containing, _redirect, opts, sf) => lits.map((lit) => {
  const mode = ts.getModeForUsageLocation(sf, lit, opts);
  const r = ts.resolveModuleName(lit.text, containing, opts, host, undefined, undefined, mode);
  if (r.resolvedModule || lit.text.startsWith('.')) return r;
  return ts.resolveModuleName(lit.text, stand, opts, host, undefined, undefined, mode);
});
const program = ts.createProgram(tsFiles(path.join(root, 'src')), options, host);
const checker = program.getTypeChecker();
const inSrc = (n: ts.Node) => path.resolve(n.getSourceFile().fileName).startsWith(src + (within ?? ''));
const rel = (n: ts.Node) => path.relative(path.join(root, 'src'), n.getSourceFile().fileName);
const line = (n: ts.Node) => n.getSourceFile().getLineAndCharacterOfPosition(n.getStart()).line + 1;

type Fn = ts.FunctionLikeDeclaration | ts.ClassLikeDeclaration;
const hasBody = (d: ts.Node): d is Fn => ts.isClassLike(d) || (ts.isFunctionLike(d) && !!(d as ts.FunctionLikeDeclaration).body);

function nameOf(d: Fn): string {
  const own = d.name && ts.isIdentifier(d.name) ? d.name.text : undefined;
  const p = d.parent;
  if (ts.isClassLike(d)) return `new ${own ?? '<class>'}`;
  if (ts.isConstructorDeclaration(d)) return `new ${(p as ts.ClassLikeDeclaration).name?.text ?? '<class>'}`;
  if ((ts.isMethodDeclaration(d) || ts.isAccessor(d)) && ts.isClassLike(p)) return `${p.name?.text ?? '<class>'}.${d.name.getText()}`;
  if (own) return own;
  if (d.name) return d.name.getText();
  if (ts.isVariableDeclaration(p) || ts.isPropertyAssignment(p) || ts.isPropertyDeclaration(p)) return p.name.getText();
  return `<anonymous>`;
}

function resolveSymbol(s: ts.Symbol | undefined): ts.Symbol | undefined {
  return s && s.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(s) : s;
}

// interface or type-literal node -> the class and object-literal nodes that implement it (built on first need)
let impls: Map<ts.Node, ts.Node[]> | undefined;
function implementers(container: ts.Node): ts.Node[] {
  if (!impls) {
    impls = new Map();
    const add = (t: ts.Type | undefined, impl: ts.Node) => {
      for (const s of [t?.aliasSymbol, t?.getSymbol()]) for (const d of resolveSymbol(s)?.declarations ?? []) {
        if (!impls!.has(d)) impls!.set(d, []);
        if (!impls!.get(d)!.includes(impl)) impls!.get(d)!.push(impl);
      }
    };
    for (const sf of program.getSourceFiles().filter(inSrc).sort((a, b) => a.fileName.localeCompare(b.fileName))) {
      const visit = (n: ts.Node): void => {
        if (ts.isClassLike(n)) for (const h of n.heritageClauses ?? []) for (const t of h.types) add(checker.getTypeAtLocation(t), n);
        if (ts.isObjectLiteralExpression(n)) add(checker.getContextualType(n), n);
        ts.forEachChild(n, visit);
      };
      visit(sf);
    }
  }
  return impls.get(container) ?? [];
}

/** The walkable functions a declaration stands for. */
function targets(d: ts.Declaration | undefined, viaImpl = true): Fn[] {
  if (!d || !inSrc(d)) return [];
  if (hasBody(d)) return [d];
  if (ts.isVariableDeclaration(d) && d.initializer && (ts.isArrowFunction(d.initializer) || ts.isFunctionExpression(d.initializer))) return [d.initializer];
  if (ts.isFunctionLike(d) && d.name) {
    // an overload signature: its implementation; an interface member: every implementation's member of that name
    const own = checker.getSymbolAtLocation(d.name)?.declarations?.filter(hasBody) ?? [];
    if (own.length) return own.slice(0, 1);
  }
  const member = (ts.isMethodSignature(d) || ts.isPropertySignature(d)) ? d : ts.isFunctionTypeNode(d) && ts.isPropertySignature(d.parent) ? d.parent : undefined;
  if (!member || !viaImpl || !ts.isIdentifier(member.name)) return [];
  const name = member.name.text;
  return implementers(member.parent).flatMap((impl) => {
    const members = ts.isClassLike(impl) ? impl.members : ts.isObjectLiteralExpression(impl) ? impl.properties : [];
    const m = members.find((x) => x.name && ts.isIdentifier(x.name) && x.name.text === name);
    if (!m) return [];
    if (ts.isPropertyAssignment(m) || ts.isPropertyDeclaration(m)) return m.initializer ? targets(resolveValue(m.initializer), false) : [];
    return hasBody(m) ? [m] : [];
  });
}

/** What an expression used as a function value names (an identifier or property access), or the function itself. */
function resolveValue(e: ts.Expression): ts.Declaration | undefined {
  if (ts.isArrowFunction(e) || ts.isFunctionExpression(e)) return e;
  if (!ts.isIdentifier(e) && !ts.isPropertyAccessExpression(e)) return undefined;
  return resolveSymbol(checker.getSymbolAtLocation(e))?.valueDeclaration;
}

function calleesOf(n: ts.Node): Fn[] {
  if (ts.isCallExpression(n) || ts.isNewExpression(n) || ts.isDecorator(n)) {
    const sig = checker.getResolvedSignature(n as ts.CallLikeExpression);
    let found = targets(sig?.declaration as ts.Declaration | undefined);
    if (!found.length && ts.isNewExpression(n)) {
      const cls = resolveSymbol(checker.getSymbolAtLocation(n.expression))?.valueDeclaration;
      if (cls && ts.isClassLike(cls) && inSrc(cls)) found = [cls];
    } else if (!found.length && !ts.isDecorator(n)) found = targets(resolveValue(n.expression));
    if (ts.isConstructorDeclaration(found[0] ?? n)) found = [found[0].parent as ts.ClassLikeDeclaration];
    // functions handed over by name run as part of this call
    const byName = (ts.isCallExpression(n) || ts.isNewExpression(n) ? n.arguments ?? [] : [])
      .filter((a) => ts.isIdentifier(a) || ts.isPropertyAccessExpression(a)).flatMap((a) => targets(resolveValue(a)).filter((f) => !ts.isClassLike(f)));
    return [...byName, ...found];
  }
  if (ts.isPropertyAccessExpression(n) && !(ts.isCallExpression(n.parent) && n.parent.expression === n)) {
    const d = resolveSymbol(checker.getSymbolAtLocation(n))?.declarations?.find(ts.isGetAccessorDeclaration);
    return d && inSrc(d) && d.body ? [d] : [];
  }
  return [];
}

const visited = new Set<ts.Node>();
const pathFiles: string[] = [];
let stops = 0;
const at = (f: string) => { if (pathFiles[pathFiles.length - 1] !== f) pathFiles.push(f); };

function enter(fn: Fn, depth: number): void {
  visited.add(fn);
  stops++;
  const file = rel(fn);
  at(file);
  if (traceOn) console.log(`${'  '.repeat(depth)}${file}:${line(fn)} ${nameOf(fn)}`);
  const read = (n: ts.Node): void => {
    if (n !== fn && ts.isClassLike(n)) return; // a class written here runs when constructed: a stop then
    if (n !== fn && ts.isFunctionLike(n)) visited.add(n); // read in place, never a stop
    ts.forEachChild(n, read);
    for (const c of calleesOf(n)) {
      if (visited.has(c)) continue;
      at(file);
      enter(c, depth + 1);
    }
  };
  if (ts.isClassLike(fn)) {
    // `new`: instance property initialisers, then the constructor
    for (const m of fn.members) if (ts.isPropertyDeclaration(m) && m.initializer && !m.modifiers?.some((x) => x.kind === ts.SyntaxKind.StaticKeyword)) read(m.initializer);
    const ctor = fn.members.find(ts.isConstructorDeclaration);
    if (ctor?.body) { visited.add(ctor); read(ctor.body); }
  } else if (fn.body) read(fn.body);
}

const [entryFile, entryName] = entryArg.split(':');
const entrySf = program.getSourceFile(path.join(root, entryFile));
if (!entrySf || !entryName) throw new Error(`entry ${entryArg}: expected FILE:NAME or FILE:Class.method under ${root}`);
let entry: Fn | undefined;
const find = (n: ts.Node): void => {
  if (!entry && hasBody(n) && !ts.isClassLike(n) && nameOf(n) === entryName) entry = n;
  ts.forEachChild(n, find);
};
find(entrySf);
if (!entry) throw new Error(`entry ${entryArg}: no function named ${entryName}`);
enter(entry, 0);

const entered = new Map<string, number>();
let returns = 0;
for (const f of pathFiles) { if (entered.has(f)) returns++; entered.set(f, (entered.get(f) ?? 0) + 1); }
if (traceOn) console.log(`\nfile path: ${pathFiles.join(' > ')}\n`);
console.log(`walk of ${entryArg} in ${root}`);
console.log(`stops ${stops}, files ${entered.size}, hops ${pathFiles.length - 1}, returns ${returns}`);
console.log('most entered:');
for (const [f, c] of [...entered].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0])).slice(0, top)) console.log(`  ${String(c).padStart(4)}  ${f}`);
