/** `npm run test:reliability`: the slower scenarios that restart, kill and flap things. */
const base = require('./jest.config');

module.exports = {
  ...base,
  testRegex: 'test/reliability/.*\\.rel-spec\\.ts$',
  testPathIgnorePatterns: ['/node_modules/', '/dist/', '/.test-build/'],
  // Two at a time, in the order of test/support/reliability-sequencer.js: the burst alongside the short scenarios.
  maxWorkers: 2,
  testSequencer: '<rootDir>/test/support/reliability-sequencer.js',
  testTimeout: 180_000,
};
