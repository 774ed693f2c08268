/** The README's first hour as commands, for the start-up banner and the start page (`GET /`). */
export const FIRST_HOUR_TENANT = 'acme';

/** Prints one field of the JSON answer on stdin (Node is there already; `jq -r .field` does the same). */
export const pick = (field: string) => `node -p 'JSON.parse(require("fs").readFileSync(0)).${field}'`;

const json = `-H 'Content-Type: application/json'`;
const auth = (variable: string) => `-H "Authorization: Bearer $${variable}"`;

/** `export GW=…` and `export OPERATOR_KEY=…` (the key's file when it was generated; never the key itself). */
export function variables(baseUrl: string, operatorKeyFile?: string): string[] {
  return [
    `export GW=${baseUrl}`,
    operatorKeyFile
      ? `export OPERATOR_KEY=$(cat ${operatorKeyFile})`
      : 'export OPERATOR_KEY=...   # the value of OPERATOR_API_KEY',
  ];
}

export const CREATE_TENANT = [
  `curl -s -X POST $GW/v1/tenants ${auth('OPERATOR_KEY')} \\`,
  `     ${json} -d '{"id":"${FIRST_HOUR_TENANT}","name":"Acme Corp"}'`,
];

/** An API key for one of the tenant's services, kept in $API_KEY (the answer shows it once). */
export const CREATE_API_KEY = [
  `export API_KEY=$(curl -s -X POST $GW/v1/tenants/${FIRST_HOUR_TENANT}/api-keys ${auth('OPERATOR_KEY')} \\`,
  `     ${json} -d '{"name":"payments-service"}' | ${pick('key')})`,
];

/** A one-time connect link (no return_url: the gateway shows its own "Rewards account connected" page). */
export const connectSession = (keyVariable: 'API_KEY' | 'OPERATOR_KEY') => [
  `curl -s -X POST $GW/v1/tenants/${FIRST_HOUR_TENANT}/connect-sessions ${auth(keyVariable)}`,
];

export const SEND_REWARD = [
  `curl -s -X POST $GW/v1/tenants/${FIRST_HOUR_TENANT}/rewards ${auth('API_KEY')} \\`,
  `     ${json} -H 'Idempotency-Key: first-reward' \\`,
  `     -d '{"rewards":[{"recipient":{"name":"Ada","email":"ada@example.com"},"value":{"denomination":25,"currency_code":"USD"},`,
  `          "products":["PRODAMAZONUS"],"custom_fields":{"Department":"Engineering"}}]}'`,
];

export const LATEST_DISPATCH = [
  `curl -s "$GW/v1/tenants/${FIRST_HOUR_TENANT}/dispatches?limit=1" ${auth('API_KEY')}`,
];
