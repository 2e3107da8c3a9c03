import react from '@vitejs/plugin-react';
import { defineConfig } from 'vitest/config';

// `npm run dev` proxies the API to a `toolgate serve` on :8080; the built
// page is served by toolgate itself, so every URL in the app is relative.
// The page's Host stays on the proxied request (no `changeOrigin`), so
// toolgate sees the dev server's origin as the request's own.
const target = process.env.TOOLGATE_URL ?? 'http://127.0.0.1:8080';
const api = { target, changeOrigin: false };

export default defineConfig({
  plugins: [react()],
  publicDir: false,
  build: { outDir: 'dist', emptyOutDir: true, sourcemap: false },
  server: {
    proxy: {
      '/stream': api,
      '/api': api,
      '/live': { ...api, ws: true },
    },
  },
  test: {
    environment: 'happy-dom',
    include: ['src/**/*.test.tsx'],
  },
});
