/** @type {import('jest').Config} */
module.exports = {
  rootDir: '.',
  moduleFileExtensions: ['js', 'json', 'ts'],
  testRegex: '(src|test)/.*\\.(spec|e2e-spec)\\.ts$',
  testPathIgnorePatterns: ['/node_modules/', '/dist/', '/.test-build/', '/test/reliability/'],
  transform: { '^.+\\.ts$': ['ts-jest', { diagnostics: false }] },
  testEnvironment: 'node',
  globalSetup: '<rootDir>/test/support/global-setup.mjs',
  globalTeardown: '<rootDir>/test/support/global-teardown.mjs',
  // Three files at a time on the 2-core CI machine: the suite waits on Postgres, child processes and the sandbox more
  // than it computes (2 workers: ~200 s, 3: ~150 s, 4: ~135 s with twice the peak connections; measured 2026-11-26).
  maxWorkers: 3,
  testTimeout: 60_000,
  forceExit: false,
};
