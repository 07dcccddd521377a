// The OpenAI API of `mlaserve serve` through the official openai client: chat and text
// completions, streaming and not, n > 1, stop strings, seeds, logprobs, usage, the small
// endpoints, and every error class (raw fetch for malformed bodies).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { readFileSync } from 'node:fs';
import { idPrompt, metric, metrics, parseSSE, repoRoot, startServer, waitIdle } from './server_lib.mjs';

let srv, client;
const MODEL = 'tiny-v3';
const MSG = [{ role: 'user', content: 'Hello, who are you?' }];

before(async () => {
  srv = await startServer(['--served-model-name', MODEL, 'alias-name']);
  client = srv.client();
});
after(async () => {
  const r = await srv.stop();
  assert.equal(r.code, 0, `exit status ${JSON.stringify(r)}\n${srv.log().slice(-2000)}`);
});

async function postRaw(path, body, headers = { 'content-type': 'application/json' }) {
  const res = await fetch(`${srv.base}${path}`, { method: 'POST', headers, body });
  const text = await res.text();
  return { status: res.status, text, json: (() => { try { return JSON.parse(text); } catch { return null; } })() };
}

function assertErrorBody(r, status, type) {
  assert.equal(r.status, status, r.text);
  assert.ok(r.json && r.json.error, `error body: ${r.text}`);
  const e = r.json.error;
  assert.equal(typeof e.message, 'string');
  assert.ok(e.message.length > 0);
  assert.equal(e.type, type);
  assert.equal(e.code, status);
  assert.ok('param' in e);
}

describe('endpoints', () => {
  test('health, ping, version, models', async () => {
    let r = await fetch(`${srv.base}/health`);
    assert.equal(r.status, 200);
    assert.equal(await r.text(), '');
    r = await fetch(`${srv.base}/ping`, { method: 'POST' });
    assert.equal(r.status, 200);
    r = await fetch(`${srv.base}/version`);
    assert.match((await r.json()).version, /^\d+\.\d+\.\d+/);
    const models = await client.models.list();
    const ids = models.data.map((m) => m.id);
    assert.deepEqual(ids, [MODEL, 'alias-name']);
    assert.equal(models.data[0].object, 'model');
    assert.equal(models.data[0].max_model_len, 512);
  });

  test('start-up log and one access-log line per request', async () => {
    const log = srv.log();
    assert.match(log, /serve: model .*tiny-v3 \(deepseek_v3\): 3 layers, hidden 128, 4 heads, kv_lora_rank 64/);
    assert.match(log, /attention backend \S+, reorder threshold \d+ \(.+\)/);
    assert.match(log, /kv cache: \d+ blocks x \d+ tokens = \d+ tokens/);
    assert.match(log, /serving "tiny-v3" \(max_model_len 512\) on http:\/\/127\.0\.0\.1:\d+\/v1/);
    const r = await client.chat.completions.create({ model: MODEL, messages: MSG, max_tokens: 3, ignore_eos: true });
    await new Promise((res) => setTimeout(res, 100));
    const line = srv.log().split('\n').find((l) => l.includes(r.id));
    assert.ok(line, 'access-log line');
    assert.match(line, new RegExp(`POST /v1/chat/completions 200 id=${r.id} prompt_tokens=${r.usage.prompt_tokens} completion_tokens=3 ttft=[0-9.]+s total=[0-9.]+s`));
  });

  test('tokenize and detokenize round trip', async () => {
    let r = await postRaw('/tokenize', JSON.stringify({ prompt: 'Hello world', return_token_strs: true }));
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.tokens[0], 0, 'completions-style tokenize adds BOS');
    assert.equal(r.json.count, r.json.tokens.length);
    assert.equal(r.json.max_model_len, 512);
    assert.equal(r.json.token_strs.length, r.json.count);
    const d = await postRaw('/detokenize', JSON.stringify({ tokens: r.json.tokens.slice(1) }));
    assert.equal(d.status, 200, d.text);
    assert.equal(d.json.prompt, 'Hello world');
    r = await postRaw('/tokenize', JSON.stringify({ messages: MSG }));
    assert.equal(r.status, 200, r.text);
    const text = (await postRaw('/detokenize', JSON.stringify({ tokens: r.json.tokens }))).json.prompt;
    assert.equal(text, '<｜begin▁of▁sentence｜><｜User｜>Hello, who are you?<｜Assistant｜>');
    assertErrorBody(await postRaw('/detokenize', JSON.stringify({ tokens: [5000] })), 400, 'BadRequestError');
    assertErrorBody(await postRaw('/tokenize', JSON.stringify({ prompt: 'x', model: 'nope' })), 404, 'NotFoundError');
  });
});

describe('chat completions', () => {
  test('continue_final_message continues the assistant turn; echo prepends it', async () => {
    const msgs = [...MSG, { role: 'assistant', content: 'I am a tiny' }];
    const r = await postRaw('/tokenize', JSON.stringify({ messages: msgs, add_generation_prompt: false, continue_final_message: true }));
    assert.equal(r.status, 200, r.text);
    const text = (await postRaw('/detokenize', JSON.stringify({ tokens: r.json.tokens }))).json.prompt;
    assert.ok(text.endsWith('<｜Assistant｜>I am a tiny'), text);
    const p = { model: MODEL, messages: msgs, add_generation_prompt: false, continue_final_message: true, max_tokens: 5, temperature: 0, ignore_eos: true };
    const plain = await client.chat.completions.create(p);
    const echoed = await client.chat.completions.create({ ...p, echo: true });
    assert.equal(echoed.choices[0].message.content, 'I am a tiny' + plain.choices[0].message.content);
    const both = await postRaw('/v1/chat/completions', JSON.stringify({ ...p, add_generation_prompt: true }));
    assertErrorBody(both, 400, 'BadRequestError');
  });

  test('non-streaming response shape and usage', async () => {
    const r = await client.chat.completions.create({ model: MODEL, messages: MSG, max_tokens: 12 });
    assert.match(r.id, /^chatcmpl-[0-9a-f]{32}$/);
    assert.equal(r.object, 'chat.completion');
    assert.equal(r.model, MODEL);
    assert.ok(Math.abs(r.created - Date.now() / 1000) < 60);
    assert.equal(r.choices.length, 1);
    const c = r.choices[0];
    assert.equal(c.index, 0);
    assert.equal(c.message.role, 'assistant');
    assert.equal(typeof c.message.content, 'string');
    assert.ok(['stop', 'length'].includes(c.finish_reason));
    const tok = await postRaw('/tokenize', JSON.stringify({ messages: MSG }));
    assert.equal(r.usage.prompt_tokens, tok.json.count); // the rendered template, BOS included once
    assert.ok(r.usage.completion_tokens >= 1 && r.usage.completion_tokens <= 12);
    assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
    if (c.finish_reason === 'length') assert.equal(r.usage.completion_tokens, 12);
  });

  test('model may be omitted or an alias', async () => {
    const r = await client.chat.completions.create({ model: 'alias-name', messages: MSG, max_tokens: 2 });
    assert.equal(r.model, MODEL, 'responses name the first served name, as vLLM does');
    const raw = await postRaw('/v1/chat/completions', JSON.stringify({ messages: MSG, max_tokens: 2 }));
    assert.equal(raw.status, 200, raw.text);
    assert.equal(raw.json.model, MODEL);
  });

  test('streaming matches non-streaming (greedy), with role, finish and usage chunks', async () => {
    const params = { model: MODEL, messages: MSG, max_tokens: 40, temperature: 0, ignore_eos: true };
    const whole = await client.chat.completions.create(params);
    const stream = await client.chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } });
    let text = '';
    const chunks = [];
    for await (const ch of stream) chunks.push(ch);
    assert.equal(chunks[0].choices[0].delta.role, 'assistant');
    assert.equal(chunks[0].choices[0].delta.content, '');
    const usage = chunks.at(-1);
    assert.deepEqual(usage.choices, []);
    assert.deepEqual(usage.usage, { prompt_tokens: whole.usage.prompt_tokens, total_tokens: whole.usage.total_tokens, completion_tokens: 40 });
    const fin = chunks.at(-2).choices[0];
    assert.equal(fin.finish_reason, 'length');
    for (const ch of chunks.slice(1, -1)) {
      assert.equal(ch.object, 'chat.completion.chunk');
      assert.equal(ch.id, chunks[0].id);
      assert.equal(ch.choices[0].delta.role, undefined);
      text += ch.choices[0].delta.content;
    }
    // broken UTF-8 from the random model becomes U+FFFD identically in both modes
    assert.equal(text, whole.choices[0].message.content);
    assert.equal(whole.choices[0].finish_reason, 'length');
    assert.equal(whole.usage.completion_tokens, 40);
  });

  test('bytes that never form UTF-8 become U+FFFD, streamed and whole alike', async () => {
    // token 230 is the byte-level token of the lone byte 0xE2 (a 3-byte lead): forced three
    // times it can never complete a character
    const vocab = JSON.parse(readFileSync(`${repoRoot}/tests/fixtures/tiny-v3/tokenizer.json`, 'utf8')).model.vocab;
    assert.equal(vocab['\u00e2'], 230);
    const p = { model: MODEL, messages: MSG, max_tokens: 3, temperature: 0, ignore_eos: true, logit_bias: { 230: 100 } };
    const whole = await client.chat.completions.create(p);
    assert.equal(whole.choices[0].message.content, '\uFFFD\uFFFD\uFFFD');
    let text = '';
    for await (const ch of await client.chat.completions.create({ ...p, stream: true })) text += ch.choices[0]?.delta?.content ?? '';
    assert.equal(text, '\uFFFD\uFFFD\uFFFD');
    const c = await client.completions.create({ model: MODEL, prompt: 'x', max_tokens: 2, temperature: 0, ignore_eos: true, logit_bias: { 230: 100 }, logprobs: 0 });
    assert.equal(c.choices[0].text, '\uFFFD\uFFFD');
    assert.equal(c.choices[0].logprobs.tokens[0], '\uFFFD');
  });

  test('raw SSE framing ends with data: [DONE]', async () => {
    const res = await fetch(`${srv.base}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ messages: MSG, max_tokens: 5, stream: true }),
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type'), /^text\/event-stream/);
    const body = await res.text();
    assert.ok(body.endsWith('data: [DONE]\n\n'));
    const { events, done } = parseSSE(body);
    assert.ok(done);
    assert.ok(events.every((e) => !('usage' in e)), 'no usage chunk without stream_options');
    const last = events.at(-1).choices[0];
    assert.ok(['stop', 'length'].includes(last.finish_reason));
    assert.ok('stop_reason' in last);
  });

  test('n > 1 returns n choices (whole and streamed)', async () => {
    const r = await client.chat.completions.create({ model: MODEL, messages: MSG, n: 3, max_tokens: 8, temperature: 1, seed: 7 });
    assert.deepEqual(r.choices.map((c) => c.index), [0, 1, 2]);
    const stream = await client.chat.completions.create({ model: MODEL, messages: MSG, n: 3, max_tokens: 8, temperature: 1, seed: 7, stream: true });
    const texts = ['', '', ''];
    const finished = [null, null, null];
    for await (const ch of stream) {
      for (const c of ch.choices) {
        texts[c.index] += c.delta.content ?? '';
        if (c.finish_reason) finished[c.index] = c.finish_reason;
      }
    }
    assert.ok(finished.every((f) => f === 'stop' || f === 'length'), JSON.stringify(finished));
    // same seed: each streamed choice equals the non-streamed one
    assert.deepEqual(texts, r.choices.map((c) => c.message.content));
  });

  test('seed makes sampling reproducible', async () => {
    const p = { model: MODEL, messages: MSG, max_tokens: 24, temperature: 1.0, top_p: 1, seed: 1234, ignore_eos: true };
    const a = await client.chat.completions.create(p);
    const b = await client.chat.completions.create(p);
    assert.equal(a.choices[0].message.content, b.choices[0].message.content);
    const outs = new Set();
    for (const seed of [1, 2, 3, 4]) {
      const r = await client.chat.completions.create({ ...p, seed });
      outs.add(r.choices[0].message.content);
    }
    assert.ok(outs.size > 1, 'different seeds should give different samples');
  });

  test('stop strings cut the text and name the stop reason', async () => {
    const p = { model: MODEL, messages: MSG, max_tokens: 40, temperature: 0, ignore_eos: true };
    const full = (await client.chat.completions.create(p)).choices[0].message.content;
    // a stop string from the middle of the greedy text, without replacement characters
    let stop = null;
    for (let i = 8; i + 3 <= full.length && !stop; i++) {
      const s = full.slice(i, i + 3);
      if (!s.includes('\uFFFD') && s.trim().length === 3) stop = s;
    }
    assert.ok(stop, `no usable stop string in ${JSON.stringify(full)}`);
    const r = await client.chat.completions.create({ ...p, stop: [stop, 'zzzzzz-never'] });
    const c = r.choices[0];
    assert.equal(c.finish_reason, 'stop');
    assert.equal(c.stop_reason, stop);
    assert.equal(c.message.content, full.slice(0, full.indexOf(stop)));
    const s = await client.chat.completions.create({ ...p, stop, stream: true });
    let text = '';
    let fin = null;
    for await (const ch of s) {
      text += ch.choices[0]?.delta?.content ?? '';
      fin = ch.choices[0]?.finish_reason ?? fin;
    }
    assert.equal(text, c.message.content);
    assert.equal(fin, 'stop');
  });

  test('stop_token_ids, min_tokens and logit_bias', async () => {
    // a +100 bias makes token 500 the greedy choice at every step
    const p = { model: MODEL, messages: MSG, max_tokens: 20, temperature: 0, logit_bias: { 500: 100 } };
    const forced = await client.chat.completions.create({ ...p, ignore_eos: true, max_tokens: 4 });
    const one = (await postRaw('/detokenize', JSON.stringify({ tokens: [500] }))).json.prompt;
    assert.equal(forced.choices[0].message.content, one.repeat(4));
    const r = await client.chat.completions.create({ ...p, stop_token_ids: [500] });
    assert.equal(r.choices[0].finish_reason, 'stop');
    assert.equal(r.choices[0].stop_reason, 500);
    assert.equal(r.usage.completion_tokens, 1);
    const m = await client.chat.completions.create({ ...p, stop_token_ids: [500], min_tokens: 3 });
    assert.equal(m.usage.completion_tokens, 4, 'stop ids are masked until min_tokens outputs');
    assert.equal(m.choices[0].stop_reason, 500);
  });

  test('the text of a stop token id is not part of the output (vLLM V1 detokenizer)', async () => {
    const p = { model: MODEL, messages: MSG, max_tokens: 20, temperature: 0, logit_bias: { 500: 100 } };
    const one = (await postRaw('/detokenize', JSON.stringify({ tokens: [500] }))).json.prompt;
    // min_tokens masks the stop ids (vLLM's MinTokensLogitsProcessor): three other tokens come
    // first, then 500 stops the request and its own text is left out.
    const m = await client.chat.completions.create({ ...p, stop_token_ids: [500], min_tokens: 3 });
    const first3 = await client.chat.completions.create({ ...p, stop_token_ids: [500], min_tokens: 3, max_tokens: 3 });
    assert.equal(m.choices[0].finish_reason, 'stop');
    assert.equal(m.usage.completion_tokens, 4);
    assert.equal(first3.choices[0].finish_reason, 'length');
    assert.equal(m.choices[0].message.content, first3.choices[0].message.content);
    assert.ok(one.length > 0);
    const r = await client.chat.completions.create({ ...p, stop_token_ids: [500] });
    assert.equal(r.choices[0].message.content, '');
  });

  test('logprobs with top_logprobs', async () => {
    const r = await client.chat.completions.create({ model: MODEL, messages: MSG, max_tokens: 6, temperature: 0, ignore_eos: true, logprobs: true, top_logprobs: 3 });
    const content = r.choices[0].logprobs.content;
    assert.equal(content.length, 6);
    for (const t of content) {
      assert.equal(typeof t.token, 'string');
      assert.ok(t.logprob <= 0);
      assert.ok(Array.isArray(t.bytes));
      assert.equal(t.top_logprobs.length, 3);
      assert.ok(t.top_logprobs[0].logprob >= t.top_logprobs[1].logprob);
      assert.ok(t.top_logprobs[1].logprob >= t.top_logprobs[2].logprob);
      // greedy: the chosen token is the most likely one
      assert.equal(t.token, t.top_logprobs[0].token);
      assert.ok(Math.abs(t.logprob - t.top_logprobs[0].logprob) < 1e-5);
    }
    const plain = await client.chat.completions.create({ model: MODEL, messages: MSG, max_tokens: 3 });
    assert.equal(plain.choices[0].logprobs, null);
  });
});

describe('text completions', () => {
  test('string, token ids and a batch of prompts', async () => {
    const r = await client.completions.create({ model: MODEL, prompt: 'The quick brown fox', max_tokens: 7, temperature: 0, ignore_eos: true });
    assert.match(r.id, /^cmpl-/);
    assert.equal(r.object, 'text_completion');
    assert.equal(r.choices[0].finish_reason, 'length');
    assert.equal(r.usage.completion_tokens, 7);
    const ids = (await postRaw('/tokenize', JSON.stringify({ prompt: 'The quick brown fox' }))).json.tokens;
    assert.equal(r.usage.prompt_tokens, ids.length);
    const byIds = await client.completions.create({ model: MODEL, prompt: ids, max_tokens: 7, temperature: 0, ignore_eos: true });
    assert.equal(byIds.choices[0].text, r.choices[0].text);
    const batch = await client.completions.create({ model: MODEL, prompt: ['The quick brown fox', 'Hello'], max_tokens: 7, temperature: 0, ignore_eos: true });
    assert.equal(batch.choices.length, 2);
    assert.equal(batch.choices[0].index, 0);
    assert.equal(batch.choices[0].text, r.choices[0].text);
    assert.equal(batch.usage.completion_tokens, 14);
  });

  test('default max_tokens is 16; echo prepends the prompt', async () => {
    const r = await client.completions.create({ model: MODEL, prompt: 'abc', temperature: 0, ignore_eos: true });
    assert.equal(r.usage.completion_tokens, 16);
    const e = await client.completions.create({ model: MODEL, prompt: 'abc', temperature: 0, ignore_eos: true, echo: true });
    assert.equal(e.choices[0].text, 'abc' + r.choices[0].text);
  });

  test('streaming with usage and logprobs', async () => {
    const p = { model: MODEL, prompt: 'Once upon a time', max_tokens: 10, temperature: 0, ignore_eos: true, logprobs: 2 };
    const whole = await client.completions.create(p);
    const lp = whole.choices[0].logprobs;
    assert.equal(lp.tokens.length, 10);
    assert.equal(lp.token_logprobs.length, 10);
    assert.equal(lp.top_logprobs.length, 10);
    assert.equal(lp.text_offset[0], 0);
    const stream = await client.completions.create({ ...p, stream: true, stream_options: { include_usage: true } });
    let text = '';
    let usage = null;
    let tokens = 0;
    for await (const ch of stream) {
      assert.equal(ch.object, 'text_completion');
      if (ch.usage) usage = ch.usage;
      for (const c of ch.choices) {
        text += c.text;
        tokens += c.logprobs ? c.logprobs.tokens.length : 0;
      }
    }
    assert.equal(text, whole.choices[0].text);
    assert.equal(tokens, 10);
    assert.equal(usage.completion_tokens, 10);
    assert.equal(usage.prompt_tokens, whole.usage.prompt_tokens);
  });
});

describe('errors', () => {
  test('malformed JSON, wrong types, out of range, invalid UTF-8 -> 400', async () => {
    assertErrorBody(await postRaw('/v1/chat/completions', '{"messages": [}'), 400, 'BadRequestError');
    assertErrorBody(await postRaw('/v1/chat/completions', ''), 400, 'BadRequestError');
    assertErrorBody(await postRaw('/v1/chat/completions', '[1]'), 400, 'BadRequestError');
    assertErrorBody(await postRaw('/v1/chat/completions', JSON.stringify({ messages: MSG, temperature: 'hot' })), 400, 'BadRequestError');
    assertErrorBody(await postRaw('/v1/chat/completions', JSON.stringify({ messages: 'hi' })), 400, 'BadRequestError');
    assertErrorBody(await postRaw('/v1/completions', JSON.stringify({ prompt: 'x', max_tokens: 0 })), 400, 'BadRequestError');
    const r = await postRaw('/v1/chat/completions', JSON.stringify({ messages: MSG, top_p: 7 }));
    assertErrorBody(r, 400, 'BadRequestError');
    assert.equal(r.json.error.param, 'top_p');
    const bad = Buffer.concat([Buffer.from('{"prompt": "a'), Buffer.from([0xff, 0xfe]), Buffer.from('b"}')]);
    assertErrorBody(await postRaw('/v1/completions', bad), 400, 'BadRequestError');
    // the openai client surfaces these as BadRequestError
    await assert.rejects(client.chat.completions.create({ model: MODEL, messages: MSG, temperature: 5 }), (e) => e instanceof OpenAI.BadRequestError && e.status === 400);
  });

  test('context length: prompt + max_tokens beyond max_model_len -> 400', async () => {
    const long = idPrompt(3, 500);
    let r = await postRaw('/v1/completions', JSON.stringify({ prompt: long, max_tokens: 100 }));
    assertErrorBody(r, 400, 'BadRequestError');
    assert.match(r.json.error.message, /maximum context length is 512 tokens and your request has 500 input tokens \(100 > 512 - 500\)/);
    r = await postRaw('/v1/completions', JSON.stringify({ prompt: idPrompt(4, 512), max_tokens: 1 }));
    assertErrorBody(r, 400, 'BadRequestError');
    assert.match(r.json.error.message, /However, your request has 512 input tokens/);
    // without max_tokens a long chat prompt is capped, not rejected
    r = await postRaw('/v1/completions', JSON.stringify({ prompt: long, max_tokens: 12, ignore_eos: true, temperature: 0 }));
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.usage.completion_tokens, 12);
  });

  test('unknown model and unknown path -> 404, wrong method -> 405', async () => {
    await assert.rejects(client.chat.completions.create({ model: 'no-such-model', messages: MSG }), (e) => e instanceof OpenAI.NotFoundError && /does not exist/.test(e.message));
    const r = await postRaw('/v1/chat/completions', JSON.stringify({ model: 'no-such-model', messages: MSG }));
    assertErrorBody(r, 404, 'NotFoundError');
    assert.equal(r.json.error.message, 'The model `no-such-model` does not exist.');
    let res = await fetch(`${srv.base}/v1/nothing-here`);
    assert.equal(res.status, 404);
    assert.equal((await res.json()).error.code, 404);
    res = await fetch(`${srv.base}/v1/chat/completions`);
    assert.equal(res.status, 405);
    assert.equal(res.headers.get('allow'), 'POST');
    assert.equal((await res.json()).error.type, 'MethodNotAllowedError');
    res = await fetch(`${srv.base}/health`, { method: 'DELETE' });
    assert.equal(res.status, 405);
  });

  test('the server keeps serving after errors', async () => {
    const r = await client.chat.completions.create({ model: MODEL, messages: MSG, max_tokens: 3 });
    assert.equal(r.choices.length, 1);
  });
});

describe('metrics', () => {
  test('Prometheus exposition after traffic', async () => {
    const shared = idPrompt(9, 100); // several full KV blocks, asked twice
    for (let i = 0; i < 2; i++)
      assert.equal((await postRaw('/v1/completions', JSON.stringify({ prompt: shared, max_tokens: 2 }))).status, 200);
    const v = await waitIdle(srv.base);
    const { text } = await metrics(srv.base);
    for (const name of ['num_requests_running', 'num_requests_waiting', 'kv_cache_usage_perc', 'prefix_cache_queries_total', 'prefix_cache_hits_total', 'num_preemptions_total', 'prompt_tokens_total', 'generation_tokens_total', 'request_success_total'])
      assert.match(text, new RegExp(`# TYPE vllm:${name} (gauge|counter)\\n`));
    for (const name of ['time_to_first_token_seconds', 'inter_token_latency_seconds', 'e2e_request_latency_seconds']) {
      assert.match(text, new RegExp(`# TYPE vllm:${name} histogram\\n`));
      assert.match(text, new RegExp(`vllm:${name}_bucket\\{[^}]*le="\\+Inf"\\} `));
      assert.ok(metric(v, `vllm:${name}_count`) > 0, name);
    }
    assert.ok(metric(v, 'vllm:generation_tokens_total') > 100);
    assert.ok(metric(v, 'vllm:request_success_total', 'finished_reason="length"') > 5);
    assert.ok(metric(v, 'vllm:prefix_cache_hits_total') > 0, 'repeated prompts hit the prefix cache');
  });
});
