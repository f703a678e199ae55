// Runs the reference broker client's ledger sign-in against a running api
// with real keys: Hedera ed25519 and ECDSA (hederaPrivateKey, DER hex) and
// EVM (evmPrivateKey), then reads a balance with the issued key.
// Usage: node live.mjs <base-url> <ed25519 DER> <ecdsa DER> <evm hex>
// Prints one JSON object: call name -> {ok: true, value} or {ok: false, error}.
import { RegistryBrokerClient } from '@hashgraphonline/standards-sdk';
import { runCalls } from './calls.mjs';
import { privateKeyToAccount } from 'viem/accounts';

const [base, ed25519, ecdsa, evm] = process.argv.slice(2);
const signIn = (accountId, network, key) => async () => {
  const client = new RegistryBrokerClient({ baseUrl: base });
  const verified = await client.authenticateWithLedgerCredentials({ accountId, network, ...key });
  // The issued key now travels as x-api-key, and x-account-id is set.
  const balance = await fetch(`${base.replace(/\/$/, '')}/api/v1/credits/balance`, {
    headers: { 'x-api-key': verified.key },
  }).then((r) => r.json());
  if (balance.accountId !== verified.accountId) {
    throw new Error(`balance of ${balance.accountId}, signed in as ${verified.accountId}`);
  }
  return verified;
};
const calls = {
  ed25519: signIn('0.0.1001', 'hedera:testnet', { hederaPrivateKey: ed25519 }),
  ecdsa: signIn('0.0.1004', 'hedera-testnet', { hederaPrivateKey: ecdsa }),
  evm: signIn(privateKeyToAccount(evm).address, 'eip155:84532', { evmPrivateKey: evm }),
};
await runCalls(calls);
