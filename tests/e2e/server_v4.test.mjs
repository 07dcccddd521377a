// DeepSeek-V4 served end to end through the official openai client: tiny-v4 (float32, one
// process) without a chat_template, so its prompts are rendered by the native port of
// DeepSeek's V4 encoding (tok/chat_dsv4.c), with --reasoning-parser and --tool-call-parser
// deepseek_v4. Checked: the start-up log (the encoder, float32 for --dtype auto, the KV
// pool's capacity and bytes per token), the rendered prompts (chat, thinking, reasoning_effort "max"
// and "none", tools), greedy chat whole = streamed = /v1/completions on the same token ids,
// usage counts (whole and streamed), several requests at once, a tool request through the
// parser, and what V4 cannot run yet refused before the server starts (one line, exit 1).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { binary, fixtureWithoutTemplate, repoRoot, startServer, tokenize as tokenizeOn } from './server_lib.mjs';

let srv, client, dir;
const MODEL = 'tiny-v4';
const FIX = path.join(repoRoot, 'tests/fixtures/tiny-v4');
const MSG = [{ role: 'user', content: 'who is there, and what do they want from us at this late hour?' }];
const BOS = '<｜begin▁of▁sentence｜>';

before(async () => {
  dir = fixtureWithoutTemplate('tiny-v4'); // as DeepSeek ships it: the server's own encoder renders
  srv = await startServer([dir, '--served-model-name', MODEL, '--dtype', 'auto', '--max-num-seqs', '4',
    '--max-model-len', '1024', '--reasoning-parser', 'deepseek_v4', '--enable-auto-tool-choice',
    '--tool-call-parser', 'deepseek_v4']);
  client = srv.client();
});
after(async () => {
  const r = await srv.stop();
  fs.rmSync(dir, { recursive: true, force: true });
  assert.equal(r.code, 0, `exit status ${JSON.stringify(r)}\n${srv.log().slice(-2000)}`);
});

const tokenize = (body) => tokenizeOn(srv.base, MODEL, body);

test('start-up: the V4 encoder, float32 for --dtype auto, the KV pool', () => {
  const log = srv.log();
  assert.match(log, /prompts are rendered by the deepseek_v4 encoder/);
  assert.match(log, /--dtype auto: float32/);
  assert.match(log, /DeepSeek-V4 KV pool: \d+ blocks of \d+ tokens, \d+ tokens of capacity; bytes per token: compressed entries [\d.]+ \(fp8 \+ e8m0, RoPE dims f32\), indexer keys [\d.]+ \(fp4 \+ e8m0\)/);
});

test('the V4 encoder renders chat, thinking and reasoning_effort', async () => {
  const text = `${BOS}<｜User｜>${MSG[0].content}<｜Assistant｜>`;
  const chat = await tokenize({ messages: MSG });
  assert.deepEqual(chat, await tokenize({ prompt: `${text}</think>`, add_special_tokens: false }));
  const think = await tokenize({ messages: MSG, chat_template_kwargs: { thinking: true } });
  assert.deepEqual(think, await tokenize({ prompt: `${text}<think>`, add_special_tokens: false }));
  // "none" turns thinking off; "max" puts DeepSeek's maximum-effort preamble ahead of the turns
  assert.deepEqual(await tokenize({ messages: MSG, chat_template_kwargs: { thinking: true, reasoning_effort: 'none' } }),
    chat);
  const max = await tokenize({ messages: MSG, chat_template_kwargs: { thinking: true, reasoning_effort: 'max' } });
  assert.ok(max.length > think.length + 10, `${max.length} vs ${think.length} tokens`);
});

test('greedy chat: whole = streamed = completions on the same tokens; usage counts', async () => {
  const ids = await tokenize({ messages: MSG });
  const params = { model: MODEL, messages: MSG, max_tokens: 12, temperature: 0 };
  const whole = await client.chat.completions.create(params);
  const text = whole.choices[0].message.content ?? '';
  const n = whole.usage.completion_tokens;
  assert.equal(whole.usage.prompt_tokens, ids.length);
  assert.ok(n >= 1 && n <= 12, `${n} completion tokens`);
  assert.equal(whole.usage.total_tokens, ids.length + n);
  assert.equal(whole.choices[0].finish_reason, n === 12 ? 'length' : 'stop');
  assert.equal(whole.choices[0].message.reasoning_content ?? null, null); // chat mode: no split
  let streamed = '', usage = null;
  for await (const chunk of await client.chat.completions.create({ ...params, stream: true,
    stream_options: { include_usage: true } })) {
    streamed += chunk.choices[0]?.delta?.content ?? '';
    if (chunk.usage) usage = chunk.usage;
  }
  assert.equal(streamed, text);
  assert.deepEqual([usage.prompt_tokens, usage.completion_tokens, usage.total_tokens], [ids.length, n, ids.length + n]);
  const raw = await client.completions.create({ model: MODEL, prompt: ids, max_tokens: 12, temperature: 0 });
  assert.equal(raw.choices[0].text, text);
  assert.deepEqual([raw.usage.prompt_tokens, raw.usage.completion_tokens], [ids.length, n]);
});

test('completions: text prompt, streamed = whole; several at once as alone', async () => {
  const p = { model: MODEL, prompt: 'the quick brown fox', max_tokens: 10, temperature: 0 };
  const whole = await client.completions.create(p);
  assert.equal(whole.usage.completion_tokens, 10);
  let streamed = '';
  for await (const chunk of await client.completions.create({ ...p, stream: true }))
    streamed += chunk.choices[0]?.text ?? '';
  assert.equal(streamed, whole.choices[0].text);
  // more requests than state slots (4): batched steps and slots taken again
  const prompts = ['one', 'two three', 'four five six', 'seven', 'the quick brown fox', 'eight nine'];
  const alone = [];
  for (const q of prompts) alone.push((await client.completions.create({ ...p, prompt: q })).choices[0].text);
  const together = await Promise.all(prompts.map((q) => client.completions.create({ ...p, prompt: q })));
  assert.deepEqual(together.map((r) => r.choices[0].text), alone);
});

test('reasoning_effort is taken; thinking output goes to reasoning_content up to </think>', async () => {
  const kw = { chat_template_kwargs: { thinking: true } };
  for (const effort of ['high', 'max']) {
    const ids = await tokenize({ messages: MSG, chat_template_kwargs: { thinking: true, reasoning_effort: effort } });
    const r = await client.chat.completions.create({ model: MODEL, messages: MSG, max_tokens: 8, temperature: 0,
      reasoning_effort: effort, ...kw });
    assert.equal(r.usage.prompt_tokens, ids.length); // the field reaches the encoder as the kwarg does
    const raw = await client.completions.create({ model: MODEL, prompt: ids, max_tokens: 8, temperature: 0 });
    const out = raw.choices[0].text, i = out.indexOf('</think>');
    const m = r.choices[0].message;
    assert.equal(m.reasoning_content ?? '', i < 0 ? out : out.slice(0, i));
    assert.equal(m.content ?? '', i < 0 ? '' : out.slice(i + '</think>'.length));
  }
});

test('tools: rendered into the prompt, the reply through the deepseek_v4 tool-call parser', async () => {
  const tools = [{ type: 'function', function: { name: 'get_weather', description: 'the weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];
  const plain = await tokenize({ messages: MSG });
  const withTools = await tokenize({ messages: MSG, tools });
  assert.ok(withTools.length > plain.length + 20, `${withTools.length} vs ${plain.length}`);
  const r = await client.chat.completions.create({ model: MODEL, messages: MSG, tools, tool_choice: 'auto',
    max_tokens: 12, temperature: 0 });
  assert.equal(r.usage.prompt_tokens, withTools.length);
  const raw = await client.completions.create({ model: MODEL, prompt: withTools, max_tokens: 12, temperature: 0 });
  const m = r.choices[0].message;
  // the tiny model's random text has no DSML block: the parser hands it on as content
  if (!raw.choices[0].text.includes('tool_calls>')) {
    assert.equal(m.content ?? '', raw.choices[0].text);
    assert.deepEqual(m.tool_calls ?? [], []);
  }
});

// one line on stderr (besides INFO / WARN) and exit status 1, before any port is bound
function refused(args, want) {
  const r = spawnSync(binary, ['serve', FIX, '--host', '127.0.0.1', '--port', '0', ...args],
    { cwd: repoRoot, encoding: 'utf8', timeout: 60000 });
  const lines = r.stderr.split('\n').filter((l) => l && !/^(INFO|WARN)/.test(l));
  assert.equal(r.status, 1, r.stderr);
  assert.equal(lines.length, 1, r.stderr);
  assert.match(lines[0], want);
}

test('refused with one line: bf16', () => {
  refused(['--dtype', 'bfloat16'], /float32/);
});
