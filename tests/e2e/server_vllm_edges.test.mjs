// vLLM-compatible edges that client libraries and dashboards rely on (issue 26): "\u0000" in
// a message is valid JSON and reaches the model; an assistant message with tool_calls and no
// content is rendered as empty content; malformed tools are a 400 whatever the tool_choice;
// /metrics under vLLM's own names (vllm:...); CORS as vLLM's defaults have it (every origin,
// preflight before authentication) and under --allowed-origins / --allowed-methods /
// --allowed-headers / --allow-credentials; continuous_usage_stats puts usage on the first
// (role) chunk too, with completion_tokens 0.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { parseSSE, startServer } from './server_lib.mjs';

let srv, strict;
before(async () => {
  [srv, strict] = await Promise.all([
    startServer(['--disable-log-requests', '--api-key', 'k']),
    startServer(['--disable-log-requests', '--allowed-origins', '["http://a.example"]', '--allowed-methods', '["POST"]',
      '--allowed-headers', '["X-Custom", "authorization"]', '--allow-credentials']),
  ]);
});
after(async () => {
  for (const s of [srv, strict]) if (s) assert.equal((await s.stop()).code, 0, s.log().slice(-2000));
});

const auth = { 'Content-Type': 'application/json', Authorization: 'Bearer k' };
const post = (s, path, body, headers = auth) =>
  fetch(`${s.base}${path}`, { method: 'POST', headers, body: typeof body === 'string' ? body : JSON.stringify(body) });

test('"\\u0000" in a message is accepted and reaches the model as a character', async () => {
  const usage = async (content) => {
    const r = await post(srv, '/v1/chat/completions', `{"messages":[{"role":"user","content":"${content}"}],"max_tokens":1}`);
    assert.equal(r.status, 200, await r.clone().text());
    return (await r.json()).usage.prompt_tokens;
  };
  const plain = await usage('ab');
  assert.ok(await usage('a\\u0000b') > plain, 'the NUL is part of the prompt');
  const c = await post(srv, '/v1/completions', '{"prompt":"a\\u0000b","max_tokens":1}');
  assert.equal(c.status, 200);
});

test('an assistant message with tool_calls and no content renders as empty content', async () => {
  const call = { id: 'call_1', type: 'function', function: { name: 'f', arguments: '{}' } };
  const msgs = (assistant) => [{ role: 'user', content: 'hi' }, assistant, { role: 'tool', tool_call_id: 'call_1', content: '1' }];
  const prompt = async (assistant) => {
    const r = await post(srv, '/v1/chat/completions', { messages: msgs(assistant), max_tokens: 1 });
    assert.equal(r.status, 200, await r.clone().text());
    return (await r.json()).usage.prompt_tokens;
  };
  const missing = await prompt({ role: 'assistant', tool_calls: [call] });
  assert.equal(await prompt({ role: 'assistant', content: null, tool_calls: [call] }), missing);
  assert.equal(await prompt({ role: 'assistant', content: '', tool_calls: [call] }), missing);
});

test('malformed tools are a 400 whatever the tool_choice', async () => {
  for (const tools of [[{}], [{ type: 'function' }], [{ function: { description: 'x' } }], [{ type: 'x', function: { name: 'f' } }],
    [{ function: { name: 'f', parameters: 'no' } }], [1], 'f']) {
    for (const choice of [undefined, 'none', 'auto']) {
      const body = { messages: [{ role: 'user', content: 'x' }], max_tokens: 1, tools, ...(choice ? { tool_choice: choice } : {}) };
      const r = await post(srv, '/v1/chat/completions', body);
      assert.equal(r.status, 400, `${JSON.stringify(tools)} ${choice}`);
      const e = (await r.json()).error;
      assert.equal(e.type, 'BadRequestError');
    }
  }
  const ok = await post(srv, '/v1/chat/completions', {
    messages: [{ role: 'user', content: 'x' }], max_tokens: 1, tools: [{ function: { name: 'f' } }], tool_choice: 'none',
  });
  assert.equal(ok.status, 200);
});

test('/metrics serves vLLM\'s names', async () => {
  const text = await (await fetch(`${srv.base}/metrics`)).text();
  for (const name of ['num_requests_running', 'num_requests_waiting', 'kv_cache_usage_perc', 'prompt_tokens_total',
    'generation_tokens_total', 'request_success_total', 'time_to_first_token_seconds', 'e2e_request_latency_seconds'])
    assert.match(text, new RegExp(`^# TYPE vllm:${name} `, 'm'), name);
  assert.doesNotMatch(text, /^mlaserve:/m);
});

test('CORS by default: every origin, a preflight answered before authentication', async () => {
  const pre = await fetch(`${srv.base}/v1/chat/completions`, {
    method: 'OPTIONS',
    headers: { Origin: 'http://x.example', 'Access-Control-Request-Method': 'POST', 'Access-Control-Request-Headers': 'authorization, content-type' },
  });
  assert.equal(pre.status, 200);
  assert.equal(pre.headers.get('access-control-allow-origin'), '*');
  assert.match(pre.headers.get('access-control-allow-methods'), /\bPOST\b/);
  assert.equal(pre.headers.get('access-control-allow-headers'), 'authorization, content-type');
  assert.equal(pre.headers.get('access-control-max-age'), '600');
  const r = await post(srv, '/v1/chat/completions', { messages: [{ role: 'user', content: 'x' }], max_tokens: 1 },
    { ...auth, Origin: 'http://x.example' });
  assert.equal(r.status, 200);
  assert.equal(r.headers.get('access-control-allow-origin'), '*');
  const denied = await post(srv, '/v1/chat/completions', '{}', { 'Content-Type': 'application/json', Origin: 'http://x.example' });
  assert.equal(denied.status, 401);
  assert.equal(denied.headers.get('access-control-allow-origin'), '*', 'errors carry it too');
  const streamed = await post(srv, '/v1/completions', { prompt: 'x', max_tokens: 2, stream: true }, { ...auth, Origin: 'http://x.example' });
  assert.equal(streamed.headers.get('access-control-allow-origin'), '*');
  await streamed.text();
  const none = await fetch(`${srv.base}/health`);
  assert.equal(none.headers.get('access-control-allow-origin'), null, 'no Origin, no CORS headers');
  // an OPTIONS that is not a preflight is no route's method
  assert.equal((await fetch(`${srv.base}/v1/models`, { method: 'OPTIONS' })).status, 405);
});

test('CORS under --allowed-origins/--allowed-methods/--allowed-headers/--allow-credentials', async () => {
  const pre = (origin, method, headers) => fetch(`${strict.base}/v1/completions`, {
    method: 'OPTIONS',
    headers: { Origin: origin, 'Access-Control-Request-Method': method, ...(headers ? { 'Access-Control-Request-Headers': headers } : {}) },
  });
  const ok = await pre('http://a.example', 'POST', 'x-custom, content-type');
  assert.equal(ok.status, 200);
  assert.equal(ok.headers.get('access-control-allow-origin'), 'http://a.example');
  assert.equal(ok.headers.get('access-control-allow-credentials'), 'true');
  assert.equal(ok.headers.get('access-control-allow-methods'), 'POST');
  assert.match(ok.headers.get('vary'), /Origin/);
  for (const [o, m, h, what] of [['http://b.example', 'POST', null, 'origin'], ['http://a.example', 'DELETE', null, 'method'],
    ['http://a.example', 'POST', 'x-other', 'headers']]) {
    const r = await pre(o, m, h);
    assert.equal(r.status, 400, what);
    const e = (await r.json()).error;
    assert.match(e.message, new RegExp(`Disallowed CORS .*${what}`));
  }
  const mirrored = await post(strict, '/v1/completions', { prompt: 'x', max_tokens: 1 },
    { 'Content-Type': 'application/json', Origin: 'http://a.example' });
  assert.equal(mirrored.headers.get('access-control-allow-origin'), 'http://a.example');
  assert.equal(mirrored.headers.get('access-control-allow-credentials'), 'true');
  const other = await post(strict, '/v1/completions', { prompt: 'x', max_tokens: 1 },
    { 'Content-Type': 'application/json', Origin: 'http://b.example' });
  assert.equal(other.headers.get('access-control-allow-origin'), null);
});

test('continuous_usage_stats: the first (role) chunk carries usage with completion_tokens 0', async () => {
  const r = await post(srv, '/v1/chat/completions', {
    messages: [{ role: 'user', content: 'x' }], max_tokens: 3, stream: true,
    stream_options: { include_usage: true, continuous_usage_stats: true },
  });
  const { events, done } = parseSSE(await r.text());
  assert.ok(done);
  const first = events[0];
  assert.equal(first.choices[0].delta.role, 'assistant');
  assert.equal(first.usage.completion_tokens, 0);
  assert.ok(first.usage.prompt_tokens > 0);
  assert.equal(first.usage.total_tokens, first.usage.prompt_tokens);
  for (const e of events) assert.ok(e.usage, 'every chunk carries usage');
});
