// Prompt logprobs through the official openai client (float32 server on tiny-v3): the way
// evaluation harnesses score a text (lm-evaluation-harness's local-completions sends token
// ids with echo, logprobs 1 and max_tokens 1, and sums token_logprobs[ctxlen:-1]) gets every
// prompt token's logprob, equal to the log-softmax of the golden logits of an independent
// implementation; vLLM's prompt_logprobs field on both endpoints; streaming echo; 400s.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { APIError } from 'openai';
import { repoRoot, startServer } from './server_lib.mjs';

let srv, client;
const MODEL = 'tiny-v3';
const golden = JSON.parse(fs.readFileSync(path.join(repoRoot, 'tests/fixtures/tiny-v3/golden/prompts.json'), 'utf8'));

before(async () => {
  srv = await startServer(['--served-model-name', MODEL, '--dtype', 'float32']);
  client = srv.client();
});
after(async () => {
  const r = await srv.stop();
  assert.equal(r.code, 0, `exit status ${JSON.stringify(r)}\n${srv.log().slice(-2000)}`);
});

// log-softmax of golden row i at token t
function goldenLogprob(p, i, t) {
  const buf = fs.readFileSync(path.join(repoRoot, 'tests/fixtures/tiny-v3/golden', p.logits_file));
  const V = golden.vocab_size;
  const row = new Float32Array(buf.buffer, buf.byteOffset + i * V * 4, V);
  let mx = -Infinity;
  for (const x of row) mx = Math.max(mx, x);
  let z = 0;
  for (const x of row) z += Math.exp(x - mx);
  return row[t] - mx - Math.log(z);
}

test('echo with logprobs scores the prompt as evaluation harnesses read it', async () => {
  for (const name of ['len17', 'len64']) {
    const p = golden.prompts.find((x) => x.name === name);
    const r = await client.completions.create({ model: MODEL, prompt: p.tokens, max_tokens: 1, logprobs: 1, echo: true, temperature: 0, seed: 1234 });
    const lp = r.choices[0].logprobs;
    const n = p.tokens.length;
    assert.equal(lp.token_logprobs.length, n + 1);
    assert.equal(lp.tokens.length, n + 1);
    assert.equal(lp.token_logprobs[0], null);
    assert.equal(lp.top_logprobs[0], null);
    for (let i = 1; i < n; i++) {
      const want = goldenLogprob(p, i - 1, p.tokens[i]);
      assert.ok(Math.abs(lp.token_logprobs[i] - want) < 1e-3, `${name} position ${i}: ${lp.token_logprobs[i]} vs golden ${want}`);
      // the token's own entry and the top-1 one
      assert.ok(Object.keys(lp.top_logprobs[i]).length >= 1 && Object.keys(lp.top_logprobs[i]).length <= 2);
      assert.ok(Math.max(...Object.values(lp.top_logprobs[i])) >= lp.token_logprobs[i]);
    }
    for (let i = 1; i < lp.text_offset.length; i++) assert.ok(lp.text_offset[i] >= lp.text_offset[i - 1]);
    // the harness's sum over the continuation: finite and the golden's
    const ctxlen = 5;
    const sum = lp.token_logprobs.slice(ctxlen, -1).reduce((a, b) => a + b, 0);
    let want = 0;
    for (let i = ctxlen; i < n; i++) want += goldenLogprob(p, i - 1, p.tokens[i]);
    assert.ok(Math.abs(sum - want) < 1e-2, `${sum} vs ${want}`);
    assert.equal(r.usage.prompt_tokens, n);
  }
});

test("vLLM's prompt_logprobs field on completions (each choice) and chat (top level)", async () => {
  const p = golden.prompts.find((x) => x.name === 'len17');
  const r = await client.completions.create({ model: MODEL, prompt: p.tokens, max_tokens: 2, n: 2, temperature: 1, seed: 3, prompt_logprobs: 2 });
  assert.equal(r.choices.length, 2);
  for (const c of r.choices) {
    const plp = c.prompt_logprobs;
    assert.equal(plp.length, p.tokens.length);
    assert.equal(plp[0], null);
    for (let i = 1; i < plp.length; i++) {
      const e = plp[i][String(p.tokens[i])];
      assert.ok(e, `position ${i}: the prompt token is in the entry`);
      assert.ok(Math.abs(e.logprob - goldenLogprob(p, i - 1, p.tokens[i])) < 1e-3);
      assert.ok(Number.isInteger(e.rank) && e.rank >= 1 && typeof e.decoded_token === 'string');
      const ranks = Object.values(plp[i]).map((x) => x.rank);
      assert.ok(ranks.includes(1) && ranks.includes(2), JSON.stringify(plp[i]));
    }
  }
  const chat = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hello there' }], max_tokens: 2, prompt_logprobs: 0 });
  assert.equal(chat.prompt_logprobs[0], null);
  assert.equal(chat.prompt_logprobs.length, chat.usage.prompt_tokens);
  const plain = await client.completions.create({ model: MODEL, prompt: 'hi', max_tokens: 1 });
  assert.equal(plain.choices[0].prompt_logprobs, null);
});

test('streamed echo with logprobs equals the whole answer', async () => {
  const p = golden.prompts.find((x) => x.name === 'len17');
  const req = { model: MODEL, prompt: p.tokens, max_tokens: 6, logprobs: 2, echo: true, temperature: 0 };
  const whole = (await client.completions.create(req)).choices[0];
  const stream = await client.completions.create({ ...req, stream: true });
  let text = '';
  const lps = [];
  for await (const c of stream) {
    text += c.choices[0].text;
    if (c.choices[0].logprobs) lps.push(...c.choices[0].logprobs.token_logprobs);
  }
  assert.equal(text, whole.text);
  assert.deepEqual(lps, whole.logprobs.token_logprobs);
});

test('out-of-range prompt_logprobs is a 400 naming the field', async () => {
  for (const v of [21, -1]) {
    await assert.rejects(
      client.completions.create({ model: MODEL, prompt: 'x', max_tokens: 1, prompt_logprobs: v }),
      (e) => e instanceof APIError && e.status === 400 && /prompt_logprobs/.test(e.message),
    );
  }
});

test('streamed prompt_logprobs ride on each choice\'s first chunk', async () => {
  const p = golden.prompts.find((x) => x.name === 'len17');
  const req = { model: MODEL, prompt: p.tokens, max_tokens: 3, temperature: 0, prompt_logprobs: 1 };
  const whole = (await client.completions.create(req)).choices[0].prompt_logprobs;
  const stream = await client.completions.create({ ...req, stream: true });
  const seen = [];
  for await (const c of stream) if (c.choices[0]?.prompt_logprobs) seen.push(c.choices[0].prompt_logprobs);
  assert.equal(seen.length, 1);
  assert.deepEqual(seen[0], whole);
  const chat = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, prompt_logprobs: 0, stream: true });
  let n = 0;
  for await (const c of chat) if (c.prompt_logprobs) n++, assert.equal(c.prompt_logprobs[0], null);
  assert.equal(n, 1);
});

test('echo with max_tokens 0 answers the prompt alone (scoring), whole and streamed', async () => {
  const p = golden.prompts.find((x) => x.name === 'len17');
  const req = { model: MODEL, prompt: p.tokens, max_tokens: 0, echo: true, logprobs: 1, temperature: 0 };
  const r = await client.completions.create(req);
  const c = r.choices[0];
  assert.equal(c.logprobs.token_logprobs.length, p.tokens.length);
  assert.equal(c.logprobs.token_logprobs[0], null);
  for (let i = 1; i < p.tokens.length; i++)
    assert.ok(Math.abs(c.logprobs.token_logprobs[i] - goldenLogprob(p, i - 1, p.tokens[i])) < 1e-3);
  assert.equal(c.text, c.logprobs.tokens.join(''));
  assert.equal(r.usage.completion_tokens, 0);
  const s = await client.completions.create({ ...req, stream: true });
  let text = '';
  for await (const ch of s) text += ch.choices[0]?.text ?? '';
  assert.equal(text, c.text);
  await assert.rejects(
    client.completions.create({ model: MODEL, prompt: 'x', max_tokens: 0 }),
    (e) => e instanceof APIError && e.status === 400 && e.param === 'max_tokens',
  );
});
