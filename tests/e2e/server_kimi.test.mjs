// A Kimi K2 checkpoint as Moonshot ships it, served through the official openai client:
// tests/fixtures/tiny-kimi-k2 has no tokenizer.json, only tiktoken.model + tokenizer_config.json
// (Kimi's tokenizer, src/tok/tiktoken.c) and K2-Thinking's chat_template.jinja. Checked: the
// prompt the server tokenizes is `mlaserve chat-template`'s rendering tokenized by `mlaserve
// tokenize` (role tags as their special ids), greedy answers whole = streamed (the incremental
// detokenizer on byte-level tokens that split characters), usage counts, tools rendered in the
// tool_declare turn with their keys sorted, and a /v1/completions prompt with special-token text.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { binary, repoRoot, startServer, tokenize } from './server_lib.mjs';

const MODEL = 'tiny-kimi-k2';
const FIX = path.join(repoRoot, 'tests/fixtures/tiny-kimi-k2');
const MSG = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: '你好, who are you? 🙂' }];
const TOOLS = [{
  type: 'function',
  function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } },
}];
let srv, client, tmp;

function cli(args) {
  const r = spawnSync(binary, args, { cwd: repoRoot, encoding: 'utf8' });
  assert.equal(r.status, 0, `mlaserve ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

before(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kimi-serve-'));
  srv = await startServer([FIX, '--served-model-name', MODEL, '--max-num-seqs', '4', '--max-model-len', '1024']);
  client = srv.client();
});
after(async () => {
  const r = await srv.stop();
  fs.rmSync(tmp, { recursive: true, force: true });
  assert.equal(r.code, 0, `exit status ${JSON.stringify(r)}\n${srv.log().slice(-2000)}`);
});

test('the fixture is tokenizer.json-free and the server loads Kimi\'s tokenizer', () => {
  assert.ok(!fs.existsSync(path.join(FIX, 'tokenizer.json')));
  assert.ok(fs.existsSync(path.join(FIX, 'tiktoken.model')));
  assert.deepEqual(JSON.parse(cli(['tokenize', FIX, '--text', '<|im_user|>user<|im_middle|>'])).slice(0, 1), [771]);
});

test('the chat prompt is the template\'s rendering, tokenized with the special ids', async () => {
  const file = path.join(tmp, 'm.json');
  fs.writeFileSync(file, JSON.stringify(MSG));
  const text = cli(['chat-template', FIX, '--messages', file, '--add-generation-prompt']);
  assert.ok(text.startsWith('<|im_system|>system<|im_middle|>Be brief.<|im_end|><|im_user|>user<|im_middle|>'));
  assert.ok(text.endsWith('<|im_assistant|>assistant<|im_middle|>'));
  const want = JSON.parse(cli(['tokenize', FIX, '--file', (fs.writeFileSync(path.join(tmp, 'p.txt'), text), path.join(tmp, 'p.txt'))]));
  const got = await tokenize(srv.base, MODEL, { messages: MSG });
  assert.deepEqual(got, want);
  assert.equal(got[0], 778); // <|im_system|>: 768 + 10, as 163594 = 163584 + 10
  assert.equal(got.filter((id) => id === 770).length, 2); // <|im_end|>
  const r = await client.chat.completions.create({ model: MODEL, messages: MSG, max_tokens: 1, temperature: 0 });
  assert.equal(r.usage.prompt_tokens, want.length);
});

test('greedy chat: whole = streamed, usage counted', async () => {
  const params = { model: MODEL, messages: MSG, max_tokens: 24, temperature: 0 };
  const whole = await client.chat.completions.create(params);
  let text = '', usage = null;
  for await (const chunk of await client.chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } })) {
    text += chunk.choices[0]?.delta?.content ?? '';
    usage = chunk.usage ?? usage;
  }
  const m = whole.choices[0].message;
  assert.equal(text, m.content);
  assert.ok(m.content.length > 0);
  assert.equal(usage.completion_tokens, whole.usage.completion_tokens);
  assert.equal(usage.prompt_tokens, whole.usage.prompt_tokens);
});

test('tools go in the tool_declare turn, keys sorted as tokenization_kimi.py sorts them', async () => {
  const ids = await tokenize(srv.base, MODEL, { messages: MSG, tools: TOOLS });
  const res = await fetch(`${srv.base}/detokenize`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: MODEL, tokens: ids }),
  });
  const prompt = (await res.json()).prompt;
  assert.ok(prompt.startsWith('<|im_system|>tool_declare<|im_middle|>[{"function": {"name": "get_weather", '
    + '"parameters": {"properties": {"city": {"type": "string"}}, "type": "object"}}, "type": "function"}]<|im_end|>'), prompt);
  const r = await client.chat.completions.create({ model: MODEL, messages: MSG, tools: TOOLS, max_tokens: 4, temperature: 0 });
  assert.equal(r.choices[0].message.role, 'assistant');
});

test('a completions prompt with special-token text counts them as one id each', async () => {
  const prompt = '<|im_user|>user<|im_middle|>hi<|im_end|><|im_assistant|>assistant<|im_middle|>';
  const want = JSON.parse(cli(['tokenize', FIX, '--text', prompt]));
  assert.deepEqual(want.filter((id) => id >= 768), [771, 785, 770, 772, 785]);
  const r = await client.completions.create({ model: MODEL, prompt, max_tokens: 3, temperature: 0 });
  assert.equal(r.usage.prompt_tokens, want.length);
});

test('an answer forced to CJK and emoji text: byte-level tokens split characters, whole = streamed', async () => {
  const want = '你好世界，模型推理。🙂👍🏽 naïve';
  const params = { model: MODEL, messages: MSG, max_tokens: 60, temperature: 0,
    structured_outputs: { regex: want.replace(/[.*+?^${}()|[\]\\]/g, '\\$&') } };
  const whole = await client.chat.completions.create(params);
  assert.equal(whole.choices[0].message.content, want);
  // the ids spell it with byte tokens: more of them than characters
  assert.ok(whole.usage.completion_tokens > Array.from(want).length, `${whole.usage.completion_tokens} tokens`);
  const deltas = [];
  for await (const chunk of await client.chat.completions.create({ ...params, stream: true }))
    deltas.push(chunk.choices[0]?.delta?.content ?? '');
  assert.equal(deltas.join(''), want);
  assert.ok(deltas.every((d) => !d.includes('\ufffd')));
});
