// What every reference-client script shares: a check that throws, and the
// runner that makes each named call in order and prints one JSON object,
// call name -> {ok: true, value} or {ok: false, error} (the error's stack
// and, for a RegistryBrokerError, the body the api sent).

export const expect = (value, what) => {
  if (!value) throw new Error(`expected ${what}`);
};

export async function runCalls(calls) {
  const out = {};
  for (const [name, call] of Object.entries(calls)) {
    try {
      out[name] = { ok: true, value: await call() };
    } catch (error) {
      const body = error && error.body ? ` body: ${JSON.stringify(error.body)}` : '';
      out[name] = { ok: false, error: String((error && error.stack) || error) + body };
    }
  }
  process.stdout.write(JSON.stringify(out));
}
