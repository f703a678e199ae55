// Runs the reference broker client's adapter-registry writes against a
// running api: createAdapterRegistryCategory (operator key),
// submitAdapterRegistryAdapter and adapterRegistrySubmissionStatus until
// the submission settles, then the listings.
// Usage: node adapters.mjs <base-url> <operator key> <api key>
// Prints one JSON object: call name -> {ok: true, value} or {ok: false, error}.
import { RegistryBrokerClient } from '@hashgraphonline/standards-sdk';
import { expect, runCalls } from './calls.mjs';

const [base, operatorKey, apiKey] = process.argv.slice(2);
const operator = new RegistryBrokerClient({ baseUrl: base, apiKey: operatorKey });
const client = new RegistryBrokerClient({ baseUrl: base, apiKey });
const manifest = {
  meta: { name: 'Tide Bridge', description: 'bridges tide tables' },
  adapter: { id: 'tide-bridge' },
  package: { registry: 'npm', name: '@almanac/tide-bridge', version: '1.0.0' },
  runtime: { node: '>=20' },
  capabilities: ['discovery'],
  consensus: { mode: 'hcs' },
};

let submission;
const calls = {
  category: async () => {
    const category = await operator.createAdapterRegistryCategory({ name: 'Client Bridges', type: 'custom' });
    expect(Number.isInteger(category.id) && category.slug === 'client-bridges', 'the category');
    return category;
  },
  submit: async () => {
    submission = await client.submitAdapterRegistryAdapter({
      adapterId: 'client-tide-bridge',
      adapterName: 'Client Tide Bridge',
      entity: 'agent',
      package: { registry: 'npm', name: '@almanac/tide-bridge', version: '1.0.0', integrity: 'sha512-abc' },
      config: { type: 'hcs', threshold: 1 },
      manifest,
      keywords: ['tides'],
      categorySlug: 'client-bridges',
    });
    expect(submission.submissionId, 'a submission id');
    return submission;
  },
  status: async () => {
    for (let i = 0; i < 100; i += 1) {
      const status = await client.adapterRegistrySubmissionStatus(submission.submissionId);
      if (status.submission.status !== 'pending' && status.submission.status !== 'processing') {
        expect(status.submission.status === 'completed', `completed, not ${JSON.stringify(status)}`);
        return status;
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    throw new Error('the submission never settled');
  },
  categories: async () => {
    const { categories } = await client.adapterRegistryCategories();
    expect(categories.some((c) => c.slug === 'client-bridges'), 'the new category listed');
    return categories.length;
  },
  adapters: async () => {
    const listed = await client.adapterRegistryAdapters({ category: 'client-bridges' });
    expect(listed.adapters.some((a) => a.adapterId === 'client-tide-bridge'), 'the new adapter listed');
    return listed;
  },
};
await runCalls(calls);
