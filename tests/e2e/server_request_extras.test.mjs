// vLLM's request extras through the official openai client (tiny-v3): allowed_token_ids
// (only those come back), bad_words (a banned word disappears from a greedy text that had
// it), truncate_prompt_tokens (the prompt's last N tokens), return_tokens_as_token_ids, and
// cache_salt (prefix-cache hits only between requests with the same salt), usage's
// prompt_tokens_details.cached_tokens (--enable-prompt-tokens-details); bad values are
// 400s naming the field. Engine side: tests/unit/test_engine_token_lists.c, test_blocks.c.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { APIError } from 'openai';
import { idPrompt, metric, startServer, waitIdle } from './server_lib.mjs';

let srv, client;
const MODEL = 'tiny-v3';

before(async () => {
  srv = await startServer(['--served-model-name', MODEL, '--dtype', 'float32', '--enable-prompt-tokens-details']);
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
  for (const [field, value] of [['allowed_token_ids', [5000]], ['allowed_token_ids', 'x'], ['bad_words', [3]], ['bad_words', ['']],
    ['truncate_prompt_tokens', 0], ['truncate_prompt_tokens', 100000], ['cache_salt', ''], ['priority', 2]]) {
    await assert.rejects(
      client.completions.create({ model: MODEL, prompt: 'x', max_tokens: 1, [field]: value }),
      (e) => e instanceof APIError && e.status === 400 && e.param === field,
      `${field}: ${JSON.stringify(value)}`,
    );
  }
});

test('truncate_prompt_tokens keeps the last N prompt tokens', async () => {
  const ids = idPrompt(5, 40);
  const a = await client.completions.create({ model: MODEL, prompt: ids, max_tokens: 6, temperature: 0, truncate_prompt_tokens: 10 });
  const b = await client.completions.create({ model: MODEL, prompt: ids.slice(-10), max_tokens: 6, temperature: 0 });
  assert.equal(a.usage.prompt_tokens, 10);
  assert.equal(a.choices[0].text, b.choices[0].text);
  // echo shows the prompt that ran: a text prompt cut to its last 4 tokens echoes those
  const text = 'the quick brown fox jumps over the lazy dog';
  const tok = await (await fetch(`${srv.base}/tokenize`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: MODEL, prompt: text }) })).json();
  const cut = await client.completions.create({ model: MODEL, prompt: text, max_tokens: 0, echo: true, truncate_prompt_tokens: 4 });
  const whole = await client.completions.create({ model: MODEL, prompt: tok.tokens.slice(-4), max_tokens: 0, echo: true });
  assert.equal(cut.choices[0].text, whole.choices[0].text);
  assert.ok(text.endsWith(cut.choices[0].text.trimStart()), JSON.stringify(cut.choices[0].text));
});

test('return_tokens_as_token_ids names tokens by id', async () => {
  const r = await client.completions.create({ model: MODEL, prompt: 'hello', max_tokens: 4, logprobs: 1, return_tokens_as_token_ids: true });
  for (const t of r.choices[0].logprobs.tokens) assert.match(t, /^token_id:\d+$/);
});

test('cache_salt: prefix-cache hits only under the same salt', async () => {
  const prompt = idPrompt(31, 70); // four full blocks of 16
  const hits = async () => metric(await waitIdle(srv.base), 'vllm:prefix_cache_hits_total');
  // two tokens, so each request spans two engine steps: /metrics is updated after a step, and
  // a one-step request can answer before the counters that waitIdle reads have moved
  const ask = (salt) => client.completions.create({ model: MODEL, prompt, max_tokens: 2, ...(salt ? { cache_salt: salt } : {}) });
  await ask('tenant-a');
  const h0 = await hits();
  await ask('tenant-b');
  await ask(null);
  assert.equal(await hits(), h0, 'another salt and no salt miss');
  await ask('tenant-a');
  assert.ok((await hits()) >= h0 + 64, 'the same salt hits');
});

test('return_token_ids: the prompt and output ids, whole and streamed', async () => {
  const prompt = idPrompt(8, 12);
  const req = { model: MODEL, prompt, max_tokens: 5, temperature: 0, ignore_eos: true, return_token_ids: true, n: 1 };
  const r = await client.completions.create(req);
  assert.deepEqual(r.choices[0].prompt_token_ids, prompt);
  assert.equal(r.choices[0].token_ids.length, 5);
  const s = await client.completions.create({ ...req, stream: true });
  const ids = [];
  let pids = null;
  for await (const c of s) {
    ids.push(...(c.choices[0]?.token_ids ?? []));
    if (c.choices[0]?.prompt_token_ids) pids = c.choices[0].prompt_token_ids;
  }
  assert.deepEqual(ids, r.choices[0].token_ids);
  assert.deepEqual(pids, prompt);
  const chat = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 3, return_token_ids: true });
  assert.equal(chat.prompt_token_ids.length, chat.usage.prompt_tokens);
  assert.equal(chat.choices[0].token_ids.length, chat.usage.completion_tokens);
  const plain = await client.completions.create({ model: MODEL, prompt, max_tokens: 2 });
  assert.equal(plain.choices[0].token_ids, undefined);
});

test('request_id names the response; best_of other than n is a 400', async () => {
  const r = await client.completions.create({ model: MODEL, prompt: 'x', max_tokens: 1, request_id: 'job-42.a' });
  assert.equal(r.id, 'cmpl-job-42.a');
  const c = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'x' }], max_tokens: 1, request_id: 'job-43' });
  assert.equal(c.id, 'chatcmpl-job-43');
  for (const [field, value] of [['best_of', 3], ['request_id', 'a b'], ['request_id', '']]) {
    await assert.rejects(
      client.completions.create({ model: MODEL, prompt: 'x', max_tokens: 1, [field]: value }),
      (e) => e instanceof APIError && e.status === 400 && e.param === field,
      `${field}: ${JSON.stringify(value)}`,
    );
  }
  const ok = await client.completions.create({ model: MODEL, prompt: 'x', max_tokens: 1, best_of: 1 });
  assert.equal(ok.choices.length, 1);
});

test('--enable-prompt-tokens-details: usage reports the prompt tokens read from the cache', async () => {
  const prompt = idPrompt(77, 50); // three full blocks of 16
  const req = { model: MODEL, prompt, max_tokens: 2, cache_salt: 'details' };
  const first = await client.completions.create(req);
  assert.deepEqual(first.usage.prompt_tokens_details, { cached_tokens: 0 });
  const again = await client.completions.create(req);
  assert.deepEqual(again.usage.prompt_tokens_details, { cached_tokens: 48 });
  const chat = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 1 });
  assert.equal(typeof chat.usage.prompt_tokens_details.cached_tokens, 'number');
});

test('priority: with --scheduling-policy priority any integer is taken, and the answer is the same', async () => {
  const prio = await startServer(['--served-model-name', MODEL, '--dtype', 'float32', '--scheduling-policy', 'priority']);
  try {
    const c = prio.client();
    const req = { model: MODEL, prompt: 'priority test', max_tokens: 8, temperature: 0 };
    const ref = (await client.completions.create(req)).choices[0].text;
    const got = await Promise.all([-3, 0, 7].map((priority) => c.completions.create({ ...req, priority })));
    for (const r of got) assert.equal(r.choices[0].text, ref);
    const chat = await c.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4, priority: 5 });
    assert.equal(chat.choices[0].finish_reason, 'length');
    await assert.rejects(c.completions.create({ ...req, priority: 1.5 }), (e) => e instanceof APIError && e.status === 400 && e.param === 'priority');
  } finally {
    assert.equal((await prio.stop()).code, 0, prio.log().slice(-2000));
  }
});
