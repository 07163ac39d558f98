// The vendored uPlot files (web/vendor/) must be byte-identical to the uplot package that
// package-lock.json pins (installed by `npm ci`), so the embedded copy cannot drift.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { VENDORED } from '../scripts/vendor.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const lock = JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8'));
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const installed = join(root, 'node_modules', 'uplot');

test('uplot is pinned to one exact version in package.json and the lockfile', () => {
  const wanted = pkg.dependencies.uplot;
  assert.match(wanted, /^\d+\.\d+\.\d+$/, 'package.json pins an exact version');
  const locked = lock.packages['node_modules/uplot'];
  assert.ok(locked, 'package-lock.json has uplot');
  assert.equal(locked.version, wanted);
  assert.match(locked.integrity || '', /^sha512-/, 'the lockfile records its integrity');
});

test('node_modules/uplot is the locked version (run `npm ci` first)', () => {
  assert.ok(existsSync(installed), 'node_modules/uplot is missing: run `npm ci` in dashboard/');
  const version = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')).version;
  assert.equal(version, lock.packages['node_modules/uplot'].version);
});

for (const [src, dst] of VENDORED) {
  test(`web/vendor/${dst} is byte-identical to node_modules/uplot/${src}`, () => {
    const a = readFileSync(join(root, 'web', 'vendor', dst));
    const b = readFileSync(join(installed, src));
    assert.ok(a.equals(b), `web/vendor/${dst} differs from the locked package: run \`npm run vendor\``);
  });
}

test('the vendored script is the version the lockfile pins', () => {
  const head = readFileSync(join(root, 'web', 'vendor', 'uPlot.iife.min.js'), 'utf8').slice(0, 200);
  assert.ok(head.includes(`(v${lock.packages['node_modules/uplot'].version})`), head);
});
