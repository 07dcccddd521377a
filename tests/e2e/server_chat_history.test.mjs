// The chat history as the server hands it to templates, as vLLM's chat_utils does, through the
// official openai client. tiny-glm5 with GLM-4.6's published template
// (tests/fixtures/templates/glm-4.6.jinja: arguments.items(), a loop over a tool message's
// content, so the "openai" content format): a tool call the server returns, sent back in the
// history, renders argument by argument, the prompt equal to jinja2's rendering of vLLM's
// messages (tests/e2e/chat_template_oracle.py --vllm auto, when python3-jinja2 is there); a
// malformed arguments string renders as {}, as vLLM does. tiny-kimi-k2 (Kimi K2's template:
// detected "string"): text parts reach it joined with "\n"; with
// --chat-template-content-format openai as a list, which its macro concatenates.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { repoRoot, startServer, tokenize } from './server_lib.mjs';

const hasJinja = spawnSync('python3', ['-c', 'import jinja2']).status === 0;

// a copy of tests/fixtures/NAME (no golden/) with `template` as its chat template, when given
function fixtureWith(name, template) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `${name}-`));
  const src = path.join(repoRoot, 'tests/fixtures', name);
  for (const f of fs.readdirSync(src)) if (f !== 'golden') fs.copyFileSync(path.join(src, f), path.join(dir, f));
  if (template !== null) {
    const cfgPath = path.join(dir, 'tokenizer_config.json');
    const cfg = JSON.parse(fs.readFileSync(cfgPath, 'utf8'));
    cfg.chat_template = template;
    fs.writeFileSync(cfgPath, JSON.stringify(cfg));
  }
  return dir;
}

// jinja2's rendering of what vLLM hands the template for `messages`
function oracle(dir, messages, extra = {}) {
  const f = path.join(dir, 'request.json');
  fs.writeFileSync(f, JSON.stringify({ messages, ...extra }));
  const r = spawnSync('python3', [path.join(repoRoot, 'tests/e2e/chat_template_oracle.py'), dir, f,
    '--add-generation-prompt', '--vllm', 'auto'], { encoding: 'utf8' });
  fs.rmSync(f);
  assert.equal(r.status, 0, r.stderr);
  return r.stdout;
}

const TOOLS = [{
  type: 'function',
  function: {
    name: 'get_weather', description: 'Weather of a city',
    parameters: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer' } } },
  },
}];
const reEscape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

async function stopped(srv, dir) {
  const r = await srv.stop();
  fs.rmSync(dir, { recursive: true, force: true });
  assert.equal(r.code, 0, `exit status ${JSON.stringify(r)}\n${srv.log().slice(-2000)}`);
}

describe('GLM tool-call round trip (tiny-glm5, GLM-4.6 template)', () => {
  let srv, client, dir;
  const MODEL = 'tiny-glm5';
  before(async () => {
    dir = fixtureWith('tiny-glm5', fs.readFileSync(path.join(repoRoot, 'tests/fixtures/templates/glm-4.6.jinja'), 'utf8'));
    srv = await startServer([dir, '--served-model-name', MODEL, '--enable-auto-tool-choice',
      '--tool-call-parser', 'glm47', '--reasoning-parser', 'glm45']);
    client = srv.client();
  });
  after(() => stopped(srv, dir));

  test('the content format is detected as openai', () => {
    assert.match(srv.log(), /chat template content format: openai \(detected/);
  });

  test('a returned call, sent back, renders argument by argument', async () => {
    const user = { role: 'user', content: 'Weather in Paris?' };
    const out = '</think><tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value>'
      + '<arg_key>days</arg_key><arg_value>3</arg_value></tool_call>';
    const first = await client.chat.completions.create({
      model: MODEL, messages: [user], tools: TOOLS, max_tokens: 200, temperature: 0,
      structured_outputs: { regex: reEscape(out) },
    });
    const m = first.choices[0].message;
    assert.equal(m.tool_calls.length, 1);
    assert.equal(m.tool_calls[0].function.arguments, '{"city": "Paris", "days": 3}');
    const history = [user, { role: 'assistant', content: m.content, tool_calls: m.tool_calls },
      { role: 'tool', tool_call_id: m.tool_calls[0].id, content: [{ type: 'text', text: 'rain' }] }];
    const second = await client.chat.completions.create({ model: MODEL, messages: history, tools: TOOLS, max_tokens: 2 });
    const got = await tokenize(srv.base, MODEL, { messages: history, tools: TOOLS });
    assert.equal(second.usage.prompt_tokens, got.length);
    const want = hasJinja ? oracle(dir, history, { tools: TOOLS })
      : null;
    if (want !== null) {
      assert.match(want, /<arg_key>city<\/arg_key>\n<arg_value>Paris<\/arg_value>\n<arg_key>days<\/arg_key>\n<arg_value>3</);
      assert.deepEqual(got, await tokenize(srv.base, MODEL, { prompt: want, add_special_tokens: false }));
    }
    // the arguments are the template's to render: a string it could not iterate would be a 400
    const asText = await tokenize(srv.base, MODEL, {
      prompt: '<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>', add_special_tokens: false,
    });
    const s = got.join(',');
    assert.ok(s.includes(asText.join(',')), 'the rendered history holds the call key by key');
  });

  test('a malformed arguments string renders as {} (vLLM), not a 400', async () => {
    const call = (args) => [{ role: 'user', content: 'x' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: args } }] },
      { role: 'tool', tool_call_id: 'c', content: 'ok' }];
    const bad = await client.chat.completions.create({ model: MODEL, messages: call('{"city": "Par'), max_tokens: 1 });
    const empty = await tokenize(srv.base, MODEL, { messages: call('{}') });
    assert.equal(bad.usage.prompt_tokens, empty.length);
    assert.deepEqual(await tokenize(srv.base, MODEL, { messages: call('{"city": "Par') }), empty);
    assert.notDeepEqual(await tokenize(srv.base, MODEL, { messages: call('{"a": 1}') }), empty);
  });

  test('multi-part content reaches the template as parts (concatenated by visible_text)', async () => {
    const parts = await tokenize(srv.base, MODEL, {
      messages: [{ role: 'user', content: [{ type: 'text', text: 'Hello ' }, { type: 'text', text: 'there' }] }],
    });
    assert.deepEqual(parts, await tokenize(srv.base, MODEL, { messages: [{ role: 'user', content: 'Hello there' }] }));
  });
});

for (const fmt of ['auto', 'openai']) {
  describe(`multi-part content on tiny-kimi-k2 (--chat-template-content-format ${fmt})`, () => {
    let srv, client, dir;
    const MODEL = 'tiny-kimi-k2';
    before(async () => {
      dir = fixtureWith('tiny-kimi-k2', null);
      srv = await startServer([dir, '--served-model-name', MODEL, '--chat-template-content-format', fmt]);
      client = srv.client();
    });
    after(() => stopped(srv, dir));

    test(fmt === 'auto' ? 'detected string: parts joined with "\\n"' : 'parts concatenated by the template', async () => {
      assert.match(srv.log(), fmt === 'auto' ? /content format: string \(detected/ : /content format: openai \(--chat/);
      const msgs = (content) => [{ role: 'system', content: 'Be brief.' }, { role: 'user', content }];
      const parts = msgs([{ type: 'text', text: 'line one' }, { type: 'text', text: 'line two' }]);
      const r = await client.chat.completions.create({ model: MODEL, messages: parts, max_tokens: 1 });
      const got = await tokenize(srv.base, MODEL, { messages: parts });
      assert.equal(r.usage.prompt_tokens, got.length);
      const joined = fmt === 'auto' ? 'line one\nline two' : 'line oneline two';
      assert.deepEqual(got, await tokenize(srv.base, MODEL, { messages: msgs(joined) }));
      assert.notDeepEqual(got, await tokenize(srv.base, MODEL, {
        messages: msgs(fmt === 'auto' ? 'line oneline two' : 'line one\nline two'),
      }));
    });
  });
}
