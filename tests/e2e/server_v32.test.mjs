// DeepSeek-V3.2 served end to end through the official openai client: tiny-v32 (sparse
// attention, index_topk 16) without a chat_template, so its prompts are rendered by the
// native port of DeepSeek's encoding_dsv32.py; --reasoning-parser deepseek_v3 splits exactly
// the requests that ask for thinking. Checked: the rendered prompts (chat and thinking mode)
// token for token, a prompt past index_topk whose whole and streamed greedy outputs agree
// and equal /v1/completions on the same token ids, the thinking split, and that the sparse
// backend served it.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, test } from 'node:test';
import { fixtureWithoutTemplate, startServer, tokenize as tokenizeOn } from './server_lib.mjs';

let srv, client, dir;
const MODEL = 'tiny-v32';
// long enough (> 16 tokens) that the indexer selects
const MSG = [{ role: 'user', content: 'who is there, and what do they want from us at this late hour of the night?' }];

before(async () => {
  dir = fixtureWithoutTemplate('tiny-v32'); // as DeepSeek ships it: the server's own encoder renders
  srv = await startServer([dir, '--served-model-name', MODEL, '--reasoning-parser', 'deepseek_v3']);
  client = srv.client();
});
after(async () => {
  const r = await srv.stop();
  fs.rmSync(dir, { recursive: true, force: true });
  assert.equal(r.code, 0, `exit status ${JSON.stringify(r)}\n${srv.log().slice(-2000)}`);
});

const tokenize = (body) => tokenizeOn(srv.base, MODEL, body);

test('the V3.2 encoder renders the prompts, the sparse backend serves them', async () => {
  assert.match(srv.log(), /prompts are rendered by the deepseek_v32 encoder/);
  assert.match(srv.log(), /attention backend FLASHMLA_SPARSE/);
  const bos = '<｜begin▁of▁sentence｜>';
  const text = `${bos}<｜User｜>${MSG[0].content}<｜Assistant｜>`;
  assert.deepEqual(await tokenize({ messages: MSG }),
    await tokenize({ prompt: `${text}</think>`, add_special_tokens: false }));
  assert.deepEqual(await tokenize({ messages: MSG, chat_template_kwargs: { thinking: true } }),
    await tokenize({ prompt: `${text}<think>`, add_special_tokens: false }));
});

test('greedy chat past index_topk: whole = streamed = completions on the same tokens', async () => {
  const ids = await tokenize({ messages: MSG });
  assert.ok(ids.length > 16, `${ids.length} prompt tokens`);
  const params = { model: MODEL, messages: MSG, max_tokens: 12, temperature: 0 };
  const whole = await client.chat.completions.create(params);
  assert.equal(whole.usage.prompt_tokens, ids.length);
  const text = whole.choices[0].message.content ?? '';
  assert.equal(whole.choices[0].message.reasoning_content ?? null, null); // chat mode: no split
  let streamed = '';
  for await (const chunk of await client.chat.completions.create({ ...params, stream: true }))
    streamed += chunk.choices[0]?.delta?.content ?? '';
  assert.equal(streamed, text);
  const raw = await client.completions.create({ model: MODEL, prompt: ids, max_tokens: 12, temperature: 0 });
  assert.equal(raw.choices[0].text, text);
});

test('thinking mode: the output goes to reasoning_content up to </think>', async () => {
  const kw = { chat_template_kwargs: { thinking: true } };
  const ids = await tokenize({ messages: MSG, ...kw });
  const r = await client.chat.completions.create({ model: MODEL, messages: MSG, max_tokens: 12, temperature: 0, ...kw });
  const raw = await client.completions.create({ model: MODEL, prompt: ids, max_tokens: 12, temperature: 0 });
  const out = raw.choices[0].text;
  const i = out.indexOf('</think>');
  const m = r.choices[0].message;
  assert.equal(m.reasoning_content ?? '', i < 0 ? out : out.slice(0, i));
  assert.equal(m.content ?? '', i < 0 ? '' : out.slice(i + '</think>'.length));
});
