/** `npm run test:reliability`: the slower scenarios that restart, kill and flap things. */
const base = require('./jest.config');

module.exports = {
  ...base,
  testRegex: 'test/reliability/.*\\.rel-spec\\.ts$',
  testPathIgnorePatterns: ['/node_modules/', '/dist/', '/.test-build/'],
  maxWorkers: 1,
  testTimeout: 180_000,
};
