// Runs the reference broker client's verification calls against a running
// api: the status before, a challenge of its own, then the caller's
// challenge (whose TXT record the test published) read, verified by
// dns-txt, and the ownership, the status and the sender check after.
// Usage: node verification.mjs <base-url> <api-key> <uaid> <challenge id>
// Prints one JSON object: call name -> {ok: true, value} or {ok: false, error}.
import { RegistryBrokerClient } from '@hashgraphonline/standards-sdk';
import { expect, runCalls } from './calls.mjs';

const [base, apiKey, uaid, challengeId] = process.argv.slice(2);
const client = new RegistryBrokerClient({ baseUrl: base, apiKey });

const calls = {
  statusBefore: async () => {
    const status = await client.getVerificationStatus(uaid);
    expect(status.verified === false && status.chain === null, `not verified yet: ${JSON.stringify(status)}`);
    return status;
  },
  createChallenge: async () => {
    const created = await client.createVerificationChallenge(uaid);
    expect(created.challengeId && created.code && created.expectedHandle, 'a challenge with its code and handle');
    return created;
  },
  getChallenge: async () => {
    const challenge = await client.getVerificationChallenge(challengeId);
    expect(challenge.status === 'pending' && challenge.uaid === uaid, `a pending challenge: ${JSON.stringify(challenge)}`);
    return challenge;
  },
  verify: async () => {
    const verified = await client.verifyVerificationChallenge({ challengeId, method: 'dns-txt' });
    expect(verified.verified === true && verified.method === 'dns-txt', `verified: ${JSON.stringify(verified)}`);
    return verified;
  },
  ownership: async () => {
    const ownership = await client.getVerificationOwnership(uaid);
    expect(ownership.ownerType === 'account' && ownership.method === 'dns-txt', 'the ownership');
    return ownership;
  },
  statusAfter: async () => {
    const status = await client.getVerificationStatus(uaid);
    expect(status.verified === true && typeof status.chain === 'string', 'verified on a chain');
    return status;
  },
  verifySender: async () => {
    const sender = await client.verifySenderOwnership(uaid);
    expect(sender.verified === true, 'the caller owns it');
    return sender;
  },
};
await runCalls(calls);
