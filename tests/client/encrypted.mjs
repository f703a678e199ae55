// Runs the reference broker client's encrypted conversation against a
// running api: a requester (signed in) opens an encrypted session with an
// agent and the agent's registrant (signed in as itself) accepts it as
// the responder, each through the handshake (ephemeral
// secp256k1 keys, polled until complete); each then sends a message
// encrypted with the shared secret, and each decrypts the other's from the
// history. The api only ever sees ciphertext.
// Usage: node encrypted.mjs <base-url> <agent uaid> <sender uaid> <api-key> <responder-api-key>
// Prints one JSON object: call name -> {ok: true, value} or {ok: false, error}.
import { RegistryBrokerClient } from '@hashgraphonline/standards-sdk';
import { expect, runCalls } from './calls.mjs';

const [base, agentUaid, senderUaid, apiKey, responderKey] = process.argv.slice(2);
const requester = new RegistryBrokerClient({ baseUrl: base, apiKey });
const responder = new RegistryBrokerClient({ baseUrl: base, apiKey: responderKey });

let requesterHandle;
let responderHandle;
await runCalls({
  handshake: async () => {
    let announce;
    const created = new Promise((resolve) => { announce = resolve; });
    [requesterHandle, responderHandle] = await Promise.all([
      requester.chat.createEncryptedSession({
        uaid: agentUaid, senderUaid, pollIntervalMs: 100, onSessionCreated: (id) => announce(id),
      }),
      created.then((sessionId) => responder.chat.acceptEncryptedSession({
        sessionId, responderUaid: agentUaid, pollIntervalMs: 100,
      })),
    ]);
    expect(requesterHandle.sessionId === responderHandle.sessionId, 'one session');
    expect(requesterHandle.summary.handshake.status === 'complete', 'a complete handshake');
    return requesterHandle.summary;
  },
  requesterSends: async () => requesterHandle.send({ plaintext: 'the harbour code is 4711' }),
  responderSends: async () => responderHandle.send({ plaintext: 'noted, thank you' }),
  responderReads: async () => {
    const history = await responderHandle.fetchHistory();
    const plaintexts = history.map((h) => h.plaintext);
    expect(plaintexts[0] === 'the harbour code is 4711', `the requester's message, got ${JSON.stringify(plaintexts)}`);
    expect(history.every((h) => h.entry.content === '[ciphertext omitted]'), 'no plaintext on the wire');
    return plaintexts;
  },
  requesterReads: async () => {
    const history = await requesterHandle.fetchHistory();
    expect(history[1].plaintext === 'noted, thank you', "the responder's message");
    return history.map((h) => h.plaintext);
  },
});
