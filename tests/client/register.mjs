// Runs the reference broker client's registration calls against a running
// api: quote, the three outcomes of registerAgent (200, 202 then progress
// polling, 207), updateAgent, the ownership call, status, and progress of
// an unknown attempt (null).
// Usage: node register.mjs <base-url> <api-key> <pending registry key> <refusing registry key>
// Prints one JSON object: call name -> {ok: true, value} or {ok: false, error}.
import { RegistryBrokerClient } from '@hashgraphonline/standards-sdk';
import { expect, runCalls } from './calls.mjs';

const [base, apiKey, stalling, refusing] = process.argv.slice(2);
const client = new RegistryBrokerClient({ baseUrl: base, apiKey });
const payload = (name, additionalRegistries = []) => ({
  profile: {
    version: '1.0',
    type: 1,
    display_name: name,
    bio: `${name}, registered by the reference client`,
    aiAgent: { type: 1, model: 'gpt-4o', capabilities: [0, 4] },
  },
  endpoint: `https://${name.toLowerCase().replace(/ /g, '-')}.example/a2a`,
  communicationProtocol: 'a2a',
  additionalRegistries,
  metadata: { provider: 'almanac-tests' },
});

let created;
const calls = {
  quote: async () => {
    const quote = await client.getRegistrationQuote(payload('Client Agent'));
    expect(quote.requiredCredits > 0, 'a price');
    return quote;
  },
  registered: async () => {
    created = await client.registerAgent(payload('Client Agent'));
    expect(created.success && created.status === 'created' && created.uaid, 'a created registration');
    return created;
  },
  pending: async () => {
    const pending = await client.registerAgent(payload('Client Waiter', [stalling]));
    expect(pending.status === 'pending' && pending.attemptId, 'a pending registration');
    const progress = await client.waitForRegistrationCompletion(pending.attemptId, {
      intervalMs: 250,
      timeoutMs: 30000,
      throwOnFailure: false,
    });
    expect(progress.status === 'partial', `the attempt to end partial, not ${progress.status}`);
    return { pending, progress };
  },
  partial: async () => {
    const partial = await client.registerAgent(payload('Client Refused', [refusing]));
    expect(partial.status === 'partial' && partial.errors.length === 1, 'a partial registration');
    return partial;
  },
  updated: async () => {
    const change = payload('Client Agent');
    change.profile.bio = 'updated by the reference client';
    const updated = await client.updateAgent(created.uaid, change);
    expect(updated.uaid === created.uaid, 'the same UAID');
    return updated;
  },
  status: async () => {
    const status = await client.getRegisterStatus(created.uaid);
    expect(status.registered, 'registered');
    return status;
  },
  ownership: async () => client.registerOwnedMoltbookAgent(created.uaid, { registered: true }),
  unknownProgress: async () => {
    const progress = await client.getRegistrationProgress('att_unknown');
    expect(progress === null, 'null for an unknown attempt');
    return progress;
  },
};
await runCalls(calls);
