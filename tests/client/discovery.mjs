// Runs the reference broker client (RegistryBrokerClient, pinned in
// package.json) against a running api: every discovery call it offers.
// Usage: node discovery.mjs <base-url> <uaid> <erc-8004 uaid>
// Prints one JSON object: call name -> {ok: true, value} or {ok: false, error}.
// A call the client throws on (a schema it cannot parse, a non-JSON reply)
// is a failure; the Rust test reads the object and checks the values.
import { RegistryBrokerClient } from '@hashgraphonline/standards-sdk';
import { runCalls } from './calls.mjs';

const [base, uaid, ercUaid] = process.argv.slice(2);
const client = new RegistryBrokerClient({ baseUrl: base });
const calls = {
  search: () => client.search({ q: 'code', limit: 3 }),
  searchFiltered: () => client.search({ registries: ['erc-8004'], minTrust: 50, sortBy: 'trust-score', limit: 3 }),
  vectorSearch: () => client.vectorSearch({ query: 'fraud detection', limit: 3 }),
  searchStatus: () => client.searchStatus(),
  facets: () => client.facets(),
  facetsForAdapter: () => client.facets('mcp-adapter'),
  stats: () => client.stats(),
  registries: () => client.registries(),
  popularSearches: () => client.popularSearches(),
  listProtocols: () => client.listProtocols(),
  adapters: () => client.adapters(),
  adaptersDetailed: () => client.adaptersDetailed(),
  adapterRegistryCategories: () => client.adapterRegistryCategories(),
  adapterRegistryAdapters: () => client.adapterRegistryAdapters({ category: 'payments', limit: 5 }),
  registrySearchByNamespace: () => client.registrySearchByNamespace('erc-8004', 'analyst'),
  resolveUaid: () => client.resolveUaid(uaid),
  validateUaid: () => client.validateUaid(uaid),
  getAgentFeedback: () => client.getAgentFeedback(ercUaid),
  getAgentFeedbackWithRevoked: () => client.getAgentFeedback(ercUaid, { includeRevoked: true }),
  getAdditionalRegistries: () => client.getAdditionalRegistries(),
};
await runCalls(calls);
