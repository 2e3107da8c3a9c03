import react from '@vitejs/plugin-react';
import { defineConfig } from 'vitest/config';

// `npm run dev` proxies the API to a `toolgate serve` on :8080; the built
// page is served by toolgate itself, so every URL in the app is relative.
const target = process.env.TOOLGATE_URL ?? 'http://127.0.0.1:8080';

export default defineConfig({
  plugins: [react()],
  publicDir: false,
  build: { outDir: 'dist', emptyOutDir: true, sourcemap: false },
  server: {
    proxy: {
      '/stream': target,
      '/api': target,
      '/live': { target, ws: true },
    },
  },
  test: {
    environment: 'happy-dom',
    include: ['src/**/*.test.tsx'],
  },
});
