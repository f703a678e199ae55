// An A2A agent built on the official JavaScript SDK (@a2a-js/sdk, A2A
// 1.0) with its Express JSON-RPC handler, for the chat tests: the relay
// must speak to it as the SDK's defaults expect.
// Usage: node agent.mjs <port> <mode>; mode is `message` (answers with a
// Message), `task` (a Task whose artifact streams in word chunks) or
// `compat` (task, with the v0.3 compatibility layer on). Prints `ready`.
import express from 'express';
import { DefaultRequestHandler, InMemoryTaskStore, AgentEvent } from '@a2a-js/sdk/server';
import { jsonRpcHandler, agentCardHandler, UserBuilder } from '@a2a-js/sdk/server/express';
import { Role, TaskState } from '@a2a-js/sdk';

const [port, mode] = process.argv.slice(2);
const url = `http://127.0.0.1:${port}/`;
const compat = mode === 'compat';
const interfaces = [{ url, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '1.0' }];
if (compat) interfaces.push({ url, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '0.3' });
const card = {
  name: `SDK ${mode} agent`,
  description: 'An agent built on @a2a-js/sdk',
  version: '1.0.0',
  supportedInterfaces: interfaces,
  provider: { url: 'https://example.org', organization: 'almanac tests' },
  capabilities: { streaming: true, pushNotifications: false, extensions: [] },
  defaultInputModes: ['text/plain'],
  defaultOutputModes: ['text/plain'],
  skills: [{ id: 'shout', name: 'Shout', description: 'says it louder', tags: ['test'], examples: [], inputModes: [], outputModes: [] }],
  securitySchemes: {},
  securityRequirements: [],
  signatures: [],
};

const text = (value) => ({ content: { $case: 'text', value }, metadata: undefined, filename: '', mediaType: 'text/plain' });

class Executor {
  async execute(context, bus) {
    const said = context.userMessage.parts.map((p) => (p.content && p.content.$case === 'text' ? p.content.value : '')).join('');
    const reply = `${said.toUpperCase()}!`;
    if (mode === 'message') {
      bus.publish(AgentEvent.message({
        messageId: `m-${Date.now()}`, contextId: context.contextId, taskId: '', role: Role.ROLE_AGENT,
        parts: [text(reply)], metadata: undefined, extensions: [], referenceTaskIds: [],
      }));
      bus.finished();
      return;
    }
    const status = (state) => ({ state, message: undefined, timestamp: new Date().toISOString() });
    bus.publish(AgentEvent.task({
      id: context.taskId, contextId: context.contextId, status: status(TaskState.TASK_STATE_WORKING),
      artifacts: [], history: [], metadata: undefined,
    }));
    const words = reply.split(' ');
    for (let i = 0; i < words.length; i += 1) {
      await new Promise((resolve) => setTimeout(resolve, 10));
      bus.publish(AgentEvent.artifactUpdate({
        taskId: context.taskId, contextId: context.contextId,
        artifact: { artifactId: 'answer', name: 'answer', description: '', parts: [text(i ? ` ${words[i]}` : words[i])], metadata: undefined, extensions: [] },
        append: i > 0, lastChunk: i === words.length - 1, metadata: undefined,
      }));
    }
    bus.publish(AgentEvent.statusUpdate({
      taskId: context.taskId, contextId: context.contextId, status: status(TaskState.TASK_STATE_COMPLETED), metadata: undefined,
    }));
    bus.finished();
  }

  async cancelTask() {}
}

const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), new Executor());
const app = express();
app.use('/.well-known/agent-card.json', agentCardHandler({ agentCardProvider: handler, legacyCompat: { enabled: compat } }));
app.use(jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication, legacyCompat: { enabled: compat } }));
app.listen(Number(port), '127.0.0.1', () => process.stdout.write('ready\n'));
