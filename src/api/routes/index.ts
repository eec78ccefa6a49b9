/**
 * Every route group of `smol serve`. A new group is one file under routes/ exporting `routes` (built with
 * defineRoute, its schemas registered in schemas/) and one line here; the OpenAPI document follows.
 */
import type { Route } from '../router.js';
import { routes as health } from './health.js';
import { routes as exec } from './exec.js';
import { routes as lifecycle } from './lifecycle.js';
import { routes as machines } from './machines.js';
import { routes as files } from './files.js';
import { routes as wsExec } from './ws-exec.js';
import { routes as logs } from './logs.js';
import { routes as events } from './events.js';
import { routes as fork } from './fork.js';
import { routes as pack } from './pack.js';
import { routes as images } from './images.js';
import { routes as run } from './run.js';

export const allRoutes: readonly Route[] = [...health, ...machines, ...lifecycle, ...exec, ...files, ...wsExec, ...logs, ...events, ...fork, ...pack, ...images, ...run];
