/** Guest images: pull, list and remove, as `smol image` does them (the service loads on first use). */
import { assetsHome } from '../../util/paths.js';
import { defineRoute, type Route } from '../router.js';
import { errorSchema } from '../schemas/error.js';
import { imageListSchema, imagePulledSchema, imagePullSchema, imageRefParamsSchema, imageRemovedSchema, imageRemoveQuerySchema } from '../schemas/pack.js';

const images = () => import('../../vm/api/images.js');

export const routes: Route[] = [
  defineRoute({
    method: 'GET', path: '/v1/images', operationId: 'listImages', tags: ['images'], summary: 'Cached images (smol image ls --json)',
    responses: { 200: { description: 'the images', schema: imageListSchema } },
    handle: async () => ({ body: { images: await (await images()).listImages() } }),
  }),
  defineRoute({
    method: 'POST', path: '/v1/images/pull', operationId: 'pullImage', tags: ['images'], body: imagePullSchema,
    summary: 'Pull an image from an OCI registry into the cache and build its disk',
    responses: { 200: { description: 'pulled', schema: imagePulledSchema }, 404: { description: 'no such image', schema: errorSchema } },
    handle: async ({ body }) => {
      const { image, ...rest } = await (await images()).pullImage(body.ref, assetsHome(), { offline: body.offline ?? false });
      return { body: { ...rest, basePath: image?.basePath } };
    },
  }),
  defineRoute({
    method: 'DELETE', path: '/v1/images/{ref}', operationId: 'removeImage', tags: ['images'],
    summary: 'Remove a cached image (refused while a machine uses it, unless force=true); URL-encode the reference',
    params: imageRefParamsSchema, query: imageRemoveQuerySchema,
    responses: { 200: { description: 'removed', schema: imageRemovedSchema }, 404: { description: 'no such image', schema: errorSchema }, 409: { description: 'a machine uses it', schema: errorSchema } },
    handle: async ({ params, query }) => ({ body: await (await images()).removeImage(params.ref, { force: query.force === 'true' || query.force === '1' }) }),
  }),
];
