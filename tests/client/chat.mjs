// Runs the reference broker client's chat calls against a running api:
// a session with an agent by UAID, messages (the plaintext conversation
// sends both sessionId and uaid; `streaming: true` still asks for JSON),
// the history snapshot, compacting it, and ending the session.
// Usage: node chat.mjs <base-url> <agent uaid> <agent url> <api-key>
// Prints one JSON object: call name -> {ok: true, value} or {ok: false, error}.
import { RegistryBrokerClient } from '@hashgraphonline/standards-sdk';
import { expect, runCalls } from './calls.mjs';

const [base, uaid, agentUrl, apiKey] = process.argv.slice(2);
const client = new RegistryBrokerClient({ baseUrl: base, apiKey });

let session;
await runCalls({
  createSession: async () => {
    session = await client.chat.createSession({ uaid, historyTtlSeconds: 3600 });
    expect(session.sessionId && session.agent && typeof session.agent.capabilities === 'object', 'a session');
    return session;
  },
  sendMessage: async () => {
    const reply = await client.chat.sendMessage({ sessionId: session.sessionId, uaid, message: 'hello agent' });
    expect(reply.message === 'You said "hello agent" (2 words).', `the agent's reply, got ${reply.message}`);
    return reply;
  },
  sendStreamingFlag: async () => {
    const reply = await client.chat.sendMessage({ sessionId: session.sessionId, uaid, message: 'one more', streaming: true });
    expect(reply.message === 'You said "one more" (2 words).', `one JSON reply, got ${reply.message}`);
    return reply;
  },
  getHistory: async () => {
    const snapshot = await client.chat.getHistory(session.sessionId);
    expect(snapshot.history.length === 4, `four entries, got ${snapshot.history.length}`);
    expect(snapshot.history.every((e) => e.role === 'user' || e.role === 'agent'), 'roles user and agent');
    expect(snapshot.historyTtlSeconds === 3600, 'the window asked for');
    return snapshot;
  },
  sessionByUrl: async () => {
    const byUrl = await client.chat.createSession({ agentUrl });
    const reply = await client.chat.sendMessage({ sessionId: byUrl.sessionId, message: 'by url' });
    expect(reply.message === 'You said "by url" (2 words).', `the agent's reply, got ${reply.message}`);
    return reply;
  },
  compactHistory: async () => {
    const compacted = await client.compactHistory({ sessionId: session.sessionId, preserveEntries: 1 });
    expect(compacted.summaryEntry.role === 'agent' && compacted.preservedEntries.length === 1, 'a summary and one kept');
    expect(compacted.history.length === 2 && compacted.creditsDebited === 5, `two entries left, 5 credits: ${JSON.stringify(compacted)}`);
    return compacted;
  },
  endSession: async () => {
    await client.chat.endSession(session.sessionId);
    return true;
  },
});
