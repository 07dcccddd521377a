// Auto tool choice through the official openai client: a server with
// --enable-auto-tool-choice --tool-call-parser deepseek_v3 accepts tool_choice "auto" (and
// tools without a tool_choice), answers in the chat shape (the tiny model writes no calls, so
// tool_calls is empty and the content is the raw text that /v1/completions generates from the
// same prompt tokens), leaves "required" and named choices to guided decoding, and refuses to
// start without a parser. The parsing itself is tested in tests/unit/test_server_tool_calls.c.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { binary, repoRoot, startServer } from './server_lib.mjs';

let srv, client;
const MODEL = 'tiny-v3';
const MSG = [{ role: 'user', content: 'What is the weather in Paris?' }];
const TOOLS = [{
  type: 'function',
  function: { name: 'get_weather', description: 'Weather of a city', parameters: { type: 'object', properties: { city: { type: 'string' } } } },
}];

before(async () => {
  srv = await startServer(['--served-model-name', MODEL, '--enable-auto-tool-choice', '--tool-call-parser', 'deepseek_v3']);
  client = srv.client();
});
after(async () => {
  const r = await srv.stop();
  assert.equal(r.code, 0, `exit status ${JSON.stringify(r)}\n${srv.log().slice(-2000)}`);
});

async function rawOutput(maxTokens) {
  const res = await fetch(`${srv.base}/tokenize`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, messages: MSG, tools: TOOLS }),
  });
  const tok = await res.json();
  assert.equal(res.status, 200, JSON.stringify(tok));
  const raw = await client.completions.create({ model: MODEL, prompt: tok.tokens, max_tokens: maxTokens, temperature: 0 });
  return raw.choices[0];
}

describe('auto tool choice (deepseek_v3)', () => {
  for (const toolChoice of ['auto', undefined]) {
    test(`tool_choice ${toolChoice ?? 'unset'}: the chat shape, content as generated`, async () => {
      const raw = await rawOutput(16);
      const params = { model: MODEL, messages: MSG, tools: TOOLS, max_tokens: 16, temperature: 0 };
      if (toolChoice) params.tool_choice = toolChoice;
      const r = await client.chat.completions.create(params);
      const c = r.choices[0];
      assert.deepEqual(c.message.tool_calls, []);
      assert.equal(c.message.content, raw.text);
      assert.equal(c.finish_reason, raw.finish_reason);

      let content = '', finish = null, calls = 0;
      for await (const chunk of await client.chat.completions.create({ ...params, stream: true })) {
        const ch = chunk.choices[0];
        if (!ch) continue;
        content += ch.delta.content ?? '';
        calls += ch.delta.tool_calls?.length ?? 0;
        finish = ch.finish_reason ?? finish;
      }
      assert.equal(content, raw.text);
      assert.equal(calls, 0);
      assert.equal(finish, raw.finish_reason);
    });
  }

  test('"required" and named tool choices are guided, not parsed from the model\'s own format', async () => {
    // the grammar makes the output the call itself (server_structured.test.mjs tests it in depth)
    const named = await client.chat.completions.create({
      model: MODEL, messages: MSG, tools: TOOLS, max_tokens: 200, seed: 3,
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
    });
    const m = named.choices[0].message;
    assert.equal(m.tool_calls.length, 1);
    assert.equal(m.tool_calls[0].function.name, 'get_weather');
    const req = await client.chat.completions.create({
      model: MODEL, messages: MSG, tools: TOOLS, tool_choice: 'required', max_tokens: 200, seed: 3,
    });
    const c = req.choices[0];
    if (c.finish_reason === 'tool_calls') assert.ok(c.message.tool_calls.every((t) => t.function.name === 'get_weather'));
    else assert.equal(c.finish_reason, 'length');
  });

  test('--enable-auto-tool-choice without a parser, or an unknown parser, stops the server', () => {
    for (const [args, re] of [
      [['--enable-auto-tool-choice'], /--enable-auto-tool-choice needs --tool-call-parser/],
      [['--tool-call-parser', 'hermes'], /--tool-call-parser: unknown parser 'hermes'/],
    ]) {
      const p = spawnSync(binary, ['serve', '--port', '0', ...args], { cwd: repoRoot, encoding: 'utf8', timeout: 30000 });
      assert.notEqual(p.status, 0);
      assert.match(p.stderr, re);
    }
  });
});
