// Runs the reference broker client's encryption-key and feedback calls
// against a running api: registerKey for the signed-in account (twice: the
// client re-registers on every start), ensureAgentKey for an agent the
// account registered, and feedback eligibility and submission for a chat
// session in the store.
// Usage: node keys.mjs <base-url> <api-key> <agent uaid> <erc-8004 uaid> <session id>
// Prints one JSON object: call name -> {ok: true, value} or {ok: false, error}.
import { RegistryBrokerClient } from '@hashgraphonline/standards-sdk';
import { expect, runCalls } from './calls.mjs';

const [base, apiKey, agent, erc, sessionId] = process.argv.slice(2);
const client = new RegistryBrokerClient({ baseUrl: base, apiKey });
const publicKey = '02b4632d08485ff1df2db55b9dafd23347d1c47a457072a1e87be26896549a8737';

let first;
const calls = {
  registerKey: async () => {
    first = await client.encryption.registerKey({ keyType: 'secp256k1', publicKey, email: 'ops@example.org' });
    expect(first.id && first.publicKey === publicKey, 'the key as registered');
    return first;
  },
  registerKeyAgain: async () => {
    const again = await client.encryption.registerKey({ keyType: 'secp256k1', publicKey });
    expect(again.id === first.id && again.updatedAt === first.updatedAt, 'the same record, unchanged');
    return again;
  },
  ensureAgentKey: async () => {
    const key = await client.encryption.ensureAgentKey({ uaid: agent, privateKey: '07'.repeat(32) });
    expect(key.publicKey && key.publicKey.length === 66, 'a compressed public key');
    return key;
  },
  eligibility: async () => {
    const verdict = await client.checkAgentFeedbackEligibility(erc, { sessionId });
    expect(verdict.eligible === true, `an eligible session: ${JSON.stringify(verdict)}`);
    return verdict;
  },
  submit: async () => {
    const given = await client.submitAgentFeedback(erc, { sessionId, score: 90, tag1: 'fast' });
    expect(given.score === 90 && typeof given.agentId === 'number', 'the entry as recorded');
    return given;
  },
};
await runCalls(calls);
