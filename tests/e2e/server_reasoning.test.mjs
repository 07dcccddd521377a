// The deepseek_r1 reasoning parser through the official openai client: a server on the tiny
// R1 fixture with --reasoning-parser deepseek_r1 gives a chat request's output as
// reasoning_content (and what follows "</think>" as content), streaming and not, and the two
// rejoin to the raw text that /v1/completions generates from the same prompt tokens. With
// --reasoning-parser deepseek_v3 (V3.1's hybrid thinking) only requests whose
// chat_template_kwargs ask for thinking are split; with deepseek_v4 also not those whose
// reasoning_effort is "none". An unknown parser name stops the server at start-up with a
// message.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { binary, repoRoot, startServer } from './server_lib.mjs';

let srv, client;
const MODEL = 'tiny-r1';
const MSG = [{ role: 'user', content: 'What is 2 + 2?' }];
const PARAMS = { model: MODEL, messages: MSG, max_tokens: 24, temperature: 0 };

before(async () => {
  srv = await startServer(['tests/fixtures/tiny-r1', '--served-model-name', MODEL, '--reasoning-parser', 'deepseek_r1']);
  client = srv.client();
});
after(async () => {
  const r = await srv.stop();
  assert.equal(r.code, 0, `exit status ${JSON.stringify(r)}\n${srv.log().slice(-2000)}`);
});

// the split vLLM's DeepSeekR1ReasoningParser makes of a whole output
function expectedSplit(text) {
  if (text.startsWith('<think>')) text = text.slice('<think>'.length);
  const i = text.indexOf('</think>');
  if (i < 0) return { reasoning: text, content: null };
  return { reasoning: text.slice(0, i), content: text.slice(i + '</think>'.length) || null };
}

async function rawOutput(server = srv, model = MODEL) {
  const res = await fetch(`${server.base}/tokenize`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: MSG }),
  });
  const tok = await res.json();
  assert.equal(res.status, 200, JSON.stringify(tok));
  const raw = await server.client().completions.create({ model, prompt: tok.tokens, max_tokens: 24, temperature: 0 });
  return raw.choices[0].text;
}

describe('reasoning parser deepseek_r1', () => {
  test('non-streaming: reasoning_content and content rejoin to the raw output', async () => {
    const raw = await rawOutput();
    assert.ok(raw.length > 0);
    const want = expectedSplit(raw);
    const r = await client.chat.completions.create(PARAMS);
    const m = r.choices[0].message;
    assert.equal(m.reasoning_content, want.reasoning);
    assert.equal(m.reasoning, want.reasoning); // vLLM's 2026 name, sent as well
    assert.equal(m.content, want.content);
    assert.equal(r.usage.completion_tokens, 24);
  });

  test('streaming: the deltas carry the same split', async () => {
    const raw = await rawOutput();
    const want = expectedSplit(raw);
    const stream = await client.chat.completions.create({ ...PARAMS, stream: true });
    let reasoning = '', content = '', chunks = 0, roleSeen = false, finish = null;
    for await (const chunk of stream) {
      const c = chunk.choices[0];
      if (!c) continue;
      chunks++;
      if (c.delta.role) roleSeen = true;
      if (c.delta.reasoning_content) reasoning += c.delta.reasoning_content;
      if (c.delta.content) content += c.delta.content;
      if (c.finish_reason) finish = c.finish_reason;
    }
    assert.ok(roleSeen);
    assert.ok(chunks >= 2); // the role chunk, then the text (events may arrive coalesced)
    assert.equal(finish, 'length');
    assert.equal(reasoning, want.reasoning);
    assert.equal(content, want.content ?? '');
  });

  test('text completions are not split', async () => {
    const r = await client.completions.create({ model: MODEL, prompt: 'Hello', max_tokens: 4, temperature: 0 });
    assert.equal(typeof r.choices[0].text, 'string');
    assert.equal(r.choices[0].reasoning_content, undefined);
  });

  test('an unknown parser stops the server at start-up', () => {
    const p = spawnSync(binary, ['serve', 'tests/fixtures/tiny-r1', '--port', '0', '--reasoning-parser', 'nope'], {
      cwd: repoRoot,
      encoding: 'utf8',
      timeout: 30000,
    });
    assert.notEqual(p.status, 0);
    assert.match(p.stderr, /--reasoning-parser: unknown parser 'nope' \(supported: deepseek_r1, deepseek_v3, deepseek_v4, glm45, kimi_k2\)/);
  });
});

describe('reasoning parser deepseek_v3 (thinking on request)', () => {
  let v3;
  before(async () => {
    v3 = await startServer(['--served-model-name', 'tiny-v3', '--reasoning-parser', 'deepseek_v3']);
  });
  after(async () => {
    const r = await v3.stop();
    assert.equal(r.code, 0, `exit status ${JSON.stringify(r)}\n${v3.log().slice(-2000)}`);
  });

  test('without "thinking" the output is content; with it, reasoning', async () => {
    const raw = await rawOutput(v3, 'tiny-v3'); // tiny-v3's template ignores "thinking"
    const c = v3.client();
    const params = { model: 'tiny-v3', messages: MSG, max_tokens: 24, temperature: 0 };
    let m = (await c.chat.completions.create(params)).choices[0].message;
    assert.equal(m.content, raw);
    assert.equal(m.reasoning_content, null);
    m = (await c.chat.completions.create({ ...params, chat_template_kwargs: { thinking: true } })).choices[0].message;
    assert.deepEqual({ reasoning: m.reasoning_content, content: m.content }, expectedSplit(raw));
  });
});

describe('reasoning parser deepseek_v4 (thinking on request, reasoning_effort "none" off)', () => {
  let v4;
  before(async () => {
    v4 = await startServer(['--served-model-name', 'tiny-v3', '--reasoning-parser', 'deepseek_v4']);
  });
  after(async () => {
    const r = await v4.stop();
    assert.equal(r.code, 0, `exit status ${JSON.stringify(r)}\n${v4.log().slice(-2000)}`);
  });

  test('"thinking" splits; the request\'s reasoning_effort "none" (V4\'s encoder: no thinking) does not', async () => {
    const raw = await rawOutput(v4, 'tiny-v3'); // tiny-v3's template ignores both
    const c = v4.client();
    const params = { model: 'tiny-v3', messages: MSG, max_tokens: 24, temperature: 0, chat_template_kwargs: { thinking: true } };
    let m = (await c.chat.completions.create(params)).choices[0].message;
    assert.deepEqual({ reasoning: m.reasoning_content, content: m.content }, expectedSplit(raw));
    m = (await c.chat.completions.create({ ...params, reasoning_effort: 'none' })).choices[0].message;
    assert.equal(m.content, raw);
    assert.equal(m.reasoning_content, null);
  });
});
