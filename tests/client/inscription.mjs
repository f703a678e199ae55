// Runs the SDK's inscription through the broker against a running api:
// getRegistryBrokerQuote, then inscribeViaRegistryBroker, which creates
// the job and polls it until it completes.
// Usage: node inscription.mjs <base-url> <api-key>
// Prints one JSON object: call name -> {ok: true, value} or {ok: false, error}.
import { getRegistryBrokerQuote, inscribeViaRegistryBroker } from '@hashgraphonline/standards-sdk';
import { expect, runCalls } from './calls.mjs';

const [baseUrl, apiKey] = process.argv.slice(2);
const input = {
  type: 'buffer',
  buffer: Buffer.from('# Agent notes\nwritten by the reference client\n'),
  fileName: 'notes.md',
  mimeType: 'text/markdown',
};
const options = { baseUrl, apiKey, pollIntervalMs: 100, waitTimeoutMs: 60000, logging: { level: 'error' } };

const calls = {
  quote: async () => {
    const quote = await getRegistryBrokerQuote(input, options);
    expect(quote.quoteId && quote.credits > 0 && quote.contentHash, `a quote: ${JSON.stringify(quote)}`);
    return quote;
  },
  inscribe: async () => {
    const result = await inscribeViaRegistryBroker(input, options);
    expect(result.confirmed === true && result.hrl === `hcs://1/${result.topicId}`, `confirmed: ${JSON.stringify(result)}`);
    return result;
  },
};
await runCalls(calls);
