// The page has no build step: what is in web/ is what the agent embeds and serves. These
// checks catch a broken module path, a reference to a file that is not there, or anything
// loaded from another origin (the dashboard must work offline).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync, statSync, existsSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const web = join(dirname(fileURLToPath(import.meta.url)), '..', 'web');

function walk(dir) {
  return readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    return statSync(p).isDirectory() ? walk(p) : [p];
  });
}

const files = walk(web);
const ours = files.filter((f) => !f.includes(`${join(web, 'vendor')}`));
const html = readFileSync(join(web, 'index.html'), 'utf8');

test('index.html references only files that exist in web/', () => {
  const refs = [...html.matchAll(/\s(?:src|href)="([^"#]+)"/g)].map((m) => m[1]);
  assert.ok(refs.length > 0);
  for (const r of refs) {
    if (/^(api\/|metrics$)/.test(r)) continue; // served by the agent, not files
    assert.ok(!/^[a-z]+:/i.test(r) && !r.startsWith('//'), `index.html loads ${r} from elsewhere`);
    assert.ok(existsSync(join(web, r)), `index.html references ${r}, which is not in web/`);
  }
  for (const needed of ['app.js', 'style.css', 'vendor/uPlot.iife.min.js', 'vendor/uPlot.min.css', 'favicon.svg']) {
    assert.ok(refs.includes(needed), `index.html does not load ${needed}`);
  }
});

test('every relative import of every module resolves to a file in web/', () => {
  for (const f of ours.filter((x) => x.endsWith('.js'))) {
    const src = readFileSync(f, 'utf8');
    for (const m of src.matchAll(/^\s*(?:import|export)\s[^'"]*?from\s+'([^']+)'/gm)) {
      const spec = m[1];
      assert.ok(spec.startsWith('./') || spec.startsWith('../'), `${relative(web, f)} imports ${spec}: bare specifiers need a build step`);
      const target = resolve(dirname(f), spec);
      assert.ok(target.startsWith(web), `${relative(web, f)} imports ${spec}, outside web/`);
      assert.ok(existsSync(target), `${relative(web, f)} imports ${spec}, which does not exist`);
    }
  }
});

test('nothing is fetched from another origin', () => {
  for (const f of ours) {
    if (!/\.(js|css|html)$/.test(f)) continue;
    const src = readFileSync(f, 'utf8');
    for (const m of src.matchAll(/(?:url\(|fetch\(|import\(|src=|href=)\s*["']?(https?:)?\/\/[^\s"')]+/g)) {
      assert.fail(`${relative(web, f)} loads ${m[0]} from another origin`);
    }
  }
});

test('views never write markup from data (no innerHTML)', () => {
  for (const f of ours.filter((x) => x.endsWith('.js'))) {
    assert.ok(!/\.(innerHTML|outerHTML)\s*=|insertAdjacentHTML/.test(readFileSync(f, 'utf8')), `${relative(web, f)} writes HTML`);
  }
});

test('the pure modules load in Node (no DOM at import time)', async () => {
  for (const m of ['format.js', 'units.js', 'model.js', 'series.js', 'limits.js', 'peers.js', 'api.js']) {
    const mod = await import(join(web, m));
    assert.ok(Object.keys(mod).length > 0, m);
  }
});
