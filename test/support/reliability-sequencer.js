// The reliability suite's order on its two workers: the burst test (the longest, and the one whose answers and pace
// are timed) starts first on one worker, while the other goes through the short fault scenarios; the heavy stock
// Postgres scenario and the pacing test come after, once the burst is past its answering phase and only drains its
// queue at 10 requests/s. A file not listed runs last.
const Sequencer = require('@jest/test-sequencer').default;

const ORDER = [
  'burst-while-tokens-expire',
  'bad-input',
  'gateway-killed-during-refresh',
  'sandbox-flapping',
  'postgres-restart',
  'pacing',
  'stock-postgres',
];

const rank = (test) => {
  const i = ORDER.findIndex((name) => test.path.includes(`/${name}.rel-spec.ts`));
  return i === -1 ? ORDER.length : i;
};

class ReliabilitySequencer extends Sequencer {
  sort(tests) {
    return [...tests].sort((a, b) => rank(a) - rank(b));
  }
}

module.exports = ReliabilitySequencer;
