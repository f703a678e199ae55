// A wallet, played by the Hiero JavaScript SDK (@hashgraph/sdk, what
// Hedera wallets build on): it opens the transaction of an HBAR payment
// intent, checks that it is the transfer the intent describes, and signs
// it with the purchaser's key.
//
// node wallet.mjs INTENT_JSON PRIVATE_KEY_DER
// prints {ok: true, value: {signed: base64, read: what the SDK read}} under
// "sign", as the other client scripts do.

import { Transaction, TransferTransaction, PrivateKey } from '@hashgraph/sdk';
import { expect, runCalls } from './calls.mjs';

const [intentJson, privateKey] = process.argv.slice(2);
const intent = JSON.parse(intentJson);

await runCalls({
  sign: async () => {
    const tx = Transaction.fromBytes(Buffer.from(intent.transaction, 'base64'));
    expect(tx instanceof TransferTransaction, 'a TransferTransaction');
    const transfers = {};
    for (const [account, amount] of tx.hbarTransfers) {
      transfers[account.toString()] = amount.toTinybars().toString();
    }
    const read = {
      transactionId: tx.transactionId.toString(),
      nodes: tx.nodeAccountIds.map((n) => n.toString()),
      memo: tx.transactionMemo,
      maxFee: tx.maxTransactionFee.toTinybars().toString(),
      validSeconds: tx.transactionValidDuration,
      transfers,
    };
    expect(read.transactionId === intent.transactionId, `transaction id ${intent.transactionId}, got ${read.transactionId}`);
    expect(read.memo === intent.memo, 'the memo of the intent');
    expect(transfers[intent.accountId] === String(-intent.tinybarAmount), 'the purchaser pays the amount');
    expect(transfers[intent.treasuryAccountId] === String(intent.tinybarAmount), 'the treasury receives it');
    const key = PrivateKey.fromStringDer(privateKey);
    const signed = await tx.sign(key);
    expect(key.publicKey.verifyTransaction(signed), 'the signature verifies');
    return { signed: Buffer.from(signed.toBytes()).toString('base64'), read };
  },
});
