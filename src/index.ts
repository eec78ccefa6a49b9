/** The programmatic API: everything the CLI does is a function here (DESIGN.md §1). */
export * from './errors/index.js';
export { smolHome, dataPaths } from './util/paths.js';
