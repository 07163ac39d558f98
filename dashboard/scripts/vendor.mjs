// Copies uPlot's distribution files from node_modules (installed from package-lock.json by
// `npm ci`) into web/vendor/, the copies the agent embeds. Run `npm run vendor` after
// changing the pinned uplot version; unit/vendor.test.mjs checks that the committed copies
// are byte-identical to the locked package.
import { copyFileSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

/** [source inside node_modules/uplot, destination inside web/vendor] */
export const VENDORED = [
  ['dist/uPlot.iife.min.js', 'uPlot.iife.min.js'],
  ['dist/uPlot.min.css', 'uPlot.min.css'],
  ['LICENSE', 'uPlot.LICENSE'],
];

export function vendor() {
  const out = join(root, 'web', 'vendor');
  mkdirSync(out, { recursive: true });
  for (const [src, dst] of VENDORED) {
    copyFileSync(join(root, 'node_modules', 'uplot', src), join(out, dst));
    console.log(`vendor: node_modules/uplot/${src} -> web/vendor/${dst}`);
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  vendor();
}
