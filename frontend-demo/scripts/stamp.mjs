// Records which sources dist/ was built from, and what the build wrote,
// so that a test (and `npm run check-build`) can tell when the shipped
// build is stale or was changed by hand. Each digest: SHA-256 over the
// files, sorted by path, each as "<path>\n<byte length>\n<bytes>".
// tests/it/frontend.rs computes the same.
import { createHash } from 'node:crypto';
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const STAMP = join(root, 'dist-sources.sha256');
const FILES = ['index.html', 'package.json', 'package-lock.json', 'tsconfig.json', 'vite.config.ts'];

function walk(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    return entry.isDirectory() ? walk(path) : [path];
  });
}

export function sources() {
  const tree = walk(join(root, 'src')).filter((path) => !/\.test\.tsx?$/.test(path));
  return [...FILES.map((file) => join(root, file)), ...tree]
    .map((path) => relative(root, path).split('\\').join('/'))
    .sort();
}

export function built() {
  return walk(join(root, 'dist'))
    .map((path) => relative(root, path).split('\\').join('/'))
    .sort();
}

function digest(files) {
  const hash = createHash('sha256');
  for (const path of files) {
    const bytes = readFileSync(join(root, path));
    hash.update(`${path}\n${bytes.length}\n`);
    hash.update(bytes);
  }
  return hash.digest('hex');
}

const stamp = () => `${digest(sources())}  sources\n${digest(built())}  dist\n`;
const command = process.argv[2];
if (command === 'write') {
  writeFileSync(STAMP, stamp());
} else if (command === 'check') {
  const recorded = readFileSync(STAMP, 'utf8');
  if (recorded !== stamp()) {
    console.error('frontend-demo/dist does not match its sources: run `npm run build --prefix frontend-demo`');
    process.exit(1);
  }
  console.log('frontend-demo/dist is current');
} else {
  console.error('usage: node scripts/stamp.mjs write|check');
  process.exit(2);
}
