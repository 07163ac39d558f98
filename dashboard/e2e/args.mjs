// The command line of e2e.mjs (see its header): parsed, or usage printed and exit 2.

import { readFileSync } from 'node:fs';

export function usage(msg) {
  if (msg) console.error(`e2e: ${msg}`);
  console.error('usage: node e2e/e2e.mjs --url URL [--token T | --token-file F] [--screenshots DIR] ' +
    "[--expect '{\"mtus\":{\"wg0\":1420},\"finding\":\"…\",\"cc\":\"cubic\",\"interface\":\"wg0\"}' | --expect-file F] " +
    '[--timeout S] [--diagnose-timeout S] [--no-diagnose] [--chromium PATH]');
  process.exit(2);
}

export function parseArgs(argv) {
  const o = { url: '', token: '', screenshots: '', expect: {}, timeout: 60, diagnoseTimeout: 120, diagnose: true, chromium: '/usr/bin/chromium' };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const val = () => {
      if (i + 1 >= argv.length) usage(`${a} needs a value`);
      return argv[++i];
    };
    switch (a) {
      case '--url': o.url = val(); break;
      case '--token': o.token = val(); break;
      case '--token-file': o.token = readFileSync(val(), 'utf8').trim(); break;
      case '--screenshots': o.screenshots = val(); break;
      case '--expect': try { o.expect = JSON.parse(val()); } catch (e) { usage(`--expect is not JSON: ${e.message}`); } break;
      case '--expect-file': try { o.expect = JSON.parse(readFileSync(val(), 'utf8')); } catch (e) { usage(`--expect-file: ${e.message}`); } break;
      case '--timeout': o.timeout = Number(val()); break;
      case '--diagnose-timeout': o.diagnoseTimeout = Number(val()); break;
      case '--no-diagnose': o.diagnose = false; break;
      case '--chromium': o.chromium = val(); break;
      case '-h': case '--help': usage(); break;
      default: usage(`unknown argument ${a}`);
    }
  }
  if (!o.url) usage('--url is required');
  if (!(o.timeout > 0) || !(o.diagnoseTimeout > 0)) usage('timeouts must be positive numbers of seconds');
  if (typeof o.expect !== 'object' || o.expect === null || Array.isArray(o.expect)) usage('--expect must be a JSON object');
  return o;
}
