// ESLint flat config: the browser modules in web/ (plus uPlot's global), Node for the
// tests, scripts and the development server. web/vendor/ is third-party and not linted.
import js from '@eslint/js';
import globals from 'globals';

export default [
  { ignores: ['node_modules/', 'web/vendor/', 'grafana/'] },
  js.configs.recommended,
  {
    files: ['web/**/*.js'],
    languageOptions: {
      ecmaVersion: 2022,
      sourceType: 'module',
      globals: { ...globals.browser, uPlot: 'readonly' },
    },
  },
  {
    // The one classic (non-module) script.
    files: ['web/boot.js'],
    languageOptions: { sourceType: 'script' },
  },
  {
    files: ['**/*.mjs', 'eslint.config.js'],
    languageOptions: {
      ecmaVersion: 2022,
      sourceType: 'module',
      globals: { ...globals.node },
    },
  },
  {
    // Playwright runs these callbacks in the page.
    files: ['e2e/**/*.mjs'],
    languageOptions: { globals: { ...globals.node, document: 'readonly', localStorage: 'readonly', window: 'readonly', MutationObserver: 'readonly' } },
  },
  {
    rules: {
      'no-unused-vars': ['error', { argsIgnorePattern: '^_', caughtErrors: 'none' }],
      eqeqeq: ['error', 'always'],
      'no-var': 'error',
      'prefer-const': 'error',
    },
  },
];
