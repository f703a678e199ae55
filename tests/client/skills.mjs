// Runs the reference broker client's skills calls against a running api:
// the config, a package quoted and published (polled until it completes),
// then the listings, the ownership, a vote and a verification request.
// Usage: node skills.mjs <base-url> <api-key> <account id>
// Prints one JSON object: call name -> {ok: true, value} or {ok: false, error}.
import { RegistryBrokerClient } from '@hashgraphonline/standards-sdk';
import { expect, runCalls } from './calls.mjs';

const [base, apiKey, accountId] = process.argv.slice(2);
const client = new RegistryBrokerClient({ baseUrl: base, apiKey });
const b64 = (text) => Buffer.from(text).toString('base64');
const manifest = {
  name: 'topic-reader',
  version: '0.1.0',
  description: 'Reads a consensus topic and summarises it',
  tags: ['hcs'],
};
const files = [
  { name: 'skill.json', base64: b64(JSON.stringify(manifest)), mimeType: 'application/json' },
  { name: 'SKILL.md', base64: b64('# Topic reader\n\nGive it a topic id.\n'), mimeType: 'text/markdown' },
];
let jobId;

const calls = {
  config: async () => {
    const config = await client.skillsConfig();
    expect(config.enabled === true && config.directoryTopicId, `enabled with a directory: ${JSON.stringify(config)}`);
    return config;
  },
  quote: async () => {
    const quote = await client.quoteSkillPublish({ files, accountId });
    expect(quote.name === 'topic-reader' && quote.credits > 0 && quote.files.length === 2, `a quote: ${JSON.stringify(quote)}`);
    return quote;
  },
  publish: async () => {
    const published = await client.publishSkill({ files, accountId });
    expect(published.jobId && published.status === 'pending', `a job: ${JSON.stringify(published)}`);
    jobId = published.jobId;
    return published;
  },
  job: async () => {
    for (let look = 0; look < 600; look += 1) {
      const job = await client.getSkillPublishJob(jobId, { accountId });
      if (job.status === 'completed') {
        expect(job.packageTopicId && job.skillJsonHrl, `completed with its topics: ${JSON.stringify(job)}`);
        return job;
      }
      expect(job.status !== 'failed', `not failed: ${JSON.stringify(job)}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    throw new Error('the job did not complete');
  },
  list: async () => {
    const list = await client.listSkills({ name: 'topic-reader', includeFiles: true, limit: 10 });
    expect(list.items.length === 1 && list.items[0].files.length === 2, `listed: ${JSON.stringify(list)}`);
    return list;
  },
  versions: async () => {
    const versions = await client.listSkillVersions({ name: 'topic-reader' });
    expect(versions.items.map((v) => v.version).join() === '0.1.0', 'one version');
    return versions;
  },
  mine: async () => {
    const mine = await client.listMySkills({ limit: 10 });
    expect(mine.items.some((s) => s.name === 'topic-reader'), 'among mine');
    return mine;
  },
  ownership: async () => {
    const ownership = await client.getSkillOwnership({ name: 'topic-reader', accountId });
    expect(ownership.exists && ownership.isOwner, 'owned by the caller');
    return ownership;
  },
  vote: async () => {
    const vote = await client.setSkillVote({ name: 'topic-reader', upvoted: true });
    expect(vote.upvotes === 1 && vote.hasUpvoted, 'one upvote');
    return vote;
  },
  voteStatus: async () => client.getSkillVoteStatus({ name: 'topic-reader' }),
  myList: async () => {
    const list = await client.getMySkillsList({ limit: 10 });
    const named = (items) => items.some((s) => s.name === 'topic-reader');
    expect(named(list.owned.items) && named(list.upvoted.items), `owned and upvoted: ${JSON.stringify(list)}`);
    return list;
  },
  requestVerification: async () => {
    const created = await client.requestSkillVerification({ name: 'topic-reader', tier: 'basic' });
    expect(created.request.status === 'pending' && created.request.creditsCharged > 0, 'a pending request');
    return created;
  },
  verificationStatus: async () => {
    const status = await client.getSkillVerificationStatus({ name: 'topic-reader' });
    expect(status.verified === false && status.pendingRequest, 'pending, not verified');
    return status;
  },
};
await runCalls(calls);
