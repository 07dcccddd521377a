// vLLM's allowed_token_ids and bad_words through the official openai client (tiny-v3):
// only allowed tokens come back, a banned word disappears from a greedy text that had it,
// and bad lists are 400s naming the field. Engine side: tests/unit/test_engine_token_lists.c.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { APIError } from 'openai';
import { startServer } from './server_lib.mjs';

let srv, client;
const MODEL = 'tiny-v3';

before(async () => {
  srv = await startServer(['--served-model-name', MODEL, '--dtype', 'float32']);
  client = srv.client();
});
after(async () => {
  const r = await srv.stop();
  assert.equal(r.code, 0, `exit status ${JSON.stringify(r)}\n${srv.log().slice(-2000)}`);
});

test('allowed_token_ids: every token is one of them', async () => {
  const r = await client.completions.create({ model: MODEL, prompt: 'hello', max_tokens: 10, temperature: 1, seed: 2, allowed_token_ids: [500, 600, 700], ignore_eos: true, logprobs: 0 });
  assert.equal(r.usage.completion_tokens, 10);
  const { tokens } = r.choices[0].logprobs;
  const allowed = await Promise.all([500, 600, 700].map(async (id) => {
    const d = await fetch(`${srv.base}/detokenize`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: MODEL, tokens: [id] }) });
    assert.equal(d.status, 200);
    return (await d.json()).prompt;
  }));
  for (const t of tokens) assert.ok(allowed.includes(t), `${JSON.stringify(t)} not in ${JSON.stringify(allowed)}`);
});

test('bad_words: a word of the greedy text never comes back', async () => {
  const req = { model: MODEL, prompt: 'hello', max_tokens: 8, temperature: 0, logprobs: 0 };
  const base = (await client.completions.create(req)).choices[0].logprobs.tokens;
  const word = base.find((t) => /^[A-Za-z]{3,}$/.test(t));
  assert.ok(word, `a plain word in ${JSON.stringify(base)}`);
  const r = await client.completions.create({ ...req, bad_words: [word] });
  const got = r.choices[0].logprobs.tokens;
  assert.ok(!got.includes(word), `${word} in ${JSON.stringify(got)}`);
  assert.deepEqual(got.slice(0, base.indexOf(word)), base.slice(0, base.indexOf(word)));
});

test('bad lists are 400s naming the field', async () => {
  for (const [field, value] of [['allowed_token_ids', [5000]], ['allowed_token_ids', 'x'], ['bad_words', [3]], ['bad_words', ['']]]) {
    await assert.rejects(
      client.completions.create({ model: MODEL, prompt: 'x', max_tokens: 1, [field]: value }),
      (e) => e instanceof APIError && e.status === 400 && e.param === field,
      `${field}: ${JSON.stringify(value)}`,
    );
  }
});
