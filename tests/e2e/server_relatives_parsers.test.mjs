// The relatives' parsers through the official openai client: a server on tiny-kimi-k2 with
// --tool-call-parser kimi_k2 --reasoning-parser kimi_k2, one on tiny-glm5 with glm47 / glm45.
// The tiny models write no calls of their own, so structured_outputs.regex makes the output
// the exact text a real model would write (thinking, content, calls); the answer must carry
// the split vLLM's parsers make of that text, the same whole and streamed. Kimi's call id
// "functions.NAME:IDX" goes back to the client as the call's id and, sent back in the
// history, reaches the template. Both fixtures get a stand-in chat template written here
// (Kimi's own comes with its tiktoken fixture; GLM-5's was not found verbatim) that renders
// the calls and tool results the way their models' templates do. Image parts: a 400.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { binary, repoRoot, startServer, tokenize } from './server_lib.mjs';

const GLM_TEMPLATE = `[gMASK]<sop>{%- for m in messages -%}
{%- if m.role == 'user' -%}<|user|>{{ m.content }}
{%- elif m.role == 'assistant' -%}<|assistant|></think>{{ m.content }}
{%- for tc in m.tool_calls or [] -%}<tool_call>{{ tc.function.name }}{{ tc.function.arguments }}</tool_call>{%- endfor -%}
{%- elif m.role == 'tool' -%}<|observation|><tool_response>{{ m.content }}</tool_response>
{%- endif -%}{%- endfor -%}
{%- if add_generation_prompt -%}<|assistant|><think>{%- endif -%}`;

// a copy of tests/fixtures/NAME (no golden/) with `template` as its chat template (null: the
// fixture's own chat_template.jinja)
function fixtureWithTemplate(name, template) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `${name}-`));
  const src = path.join(repoRoot, 'tests/fixtures', name);
  for (const f of fs.readdirSync(src)) if (f !== 'golden') fs.copyFileSync(path.join(src, f), path.join(dir, f));
  const cfgPath = path.join(dir, 'tokenizer_config.json');
  const cfg = JSON.parse(fs.readFileSync(cfgPath, 'utf8'));
  if (template === null) delete cfg.chat_template;
  else cfg.chat_template = template;
  // tiny-kimi-k2's tokenizer has "</think>" as one token, after which (as in vLLM) structured
  // outputs start to constrain: left out here, the grammar forces the thinking text too
  for (const [id, t] of Object.entries(cfg.added_tokens_decoder ?? {}))
    if (t.content === '<think>' || t.content === '</think>') delete cfg.added_tokens_decoder[id];
  fs.writeFileSync(cfgPath, JSON.stringify(cfg));
  return dir;
}

const reEscape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const TOOLS = [{
  type: 'function',
  function: {
    name: 'get_weather', description: 'Weather of a city',
    parameters: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer' } } },
  },
}];
const MSG = [{ role: 'user', content: 'Weather in Paris?' }];

// a chat request whose output is forced to `text`, whole and streamed
async function both(client, model, text, extra = {}) {
  const params = {
    model, messages: MSG, tools: TOOLS, max_tokens: 400, temperature: 0,
    structured_outputs: { regex: reEscape(text) }, ...extra,
  };
  const whole = await client.chat.completions.create(params);
  let reasoning = '', content = '', finish = null;
  const calls = [];
  for await (const chunk of await client.chat.completions.create({ ...params, stream: true })) {
    const c = chunk.choices[0];
    if (!c) continue;
    reasoning += c.delta.reasoning_content ?? '';
    content += c.delta.content ?? '';
    for (const t of c.delta.tool_calls ?? []) {
      const at = calls[t.index] ??= { id: '', type: '', function: { name: '', arguments: '' } };
      at.id += t.id ?? '';
      at.type += t.type ?? '';
      at.function.name += t.function?.name ?? '';
      at.function.arguments += t.function?.arguments ?? '';
    }
    finish = c.finish_reason ?? finish;
  }
  return { whole: whole.choices[0], streamed: { reasoning, content, calls, finish } };
}

// the whole answer and the streamed one carry these
function expectSplit({ whole, streamed }, want) {
  const m = whole.message;
  assert.equal(m.reasoning_content ?? null, want.reasoning);
  assert.equal(m.content ?? null, want.content);
  const calls = (m.tool_calls ?? []).map((c) => ({ type: c.type, name: c.function.name, arguments: c.function.arguments }));
  assert.deepEqual(calls, want.calls.map((c) => ({ type: 'function', ...c })));
  assert.equal(whole.finish_reason, want.calls.length ? 'tool_calls' : 'stop');
  assert.equal(streamed.reasoning, want.reasoning ?? '');
  assert.equal(streamed.content, want.content ?? '');
  assert.deepEqual(streamed.calls.map((c) => ({ type: c.type, name: c.function.name, arguments: c.function.arguments })),
    calls);
  // Kimi's ids are the model's, the same both ways; others are fresh random ones
  (m.tool_calls ?? []).forEach((c, i) => assert.ok(c.id.startsWith('chatcmpl-tool-')
    ? streamed.calls[i].id.startsWith('chatcmpl-tool-') : streamed.calls[i].id === c.id));
  assert.equal(streamed.finish, whole.finish_reason);
  return m;
}

describe('kimi_k2 parsers (tiny-kimi-k2)', () => {
  let srv, client, dir;
  const MODEL = 'tiny-kimi-k2';
  const CALL = '<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>'
    + '{"city": "Paris", "days": 2}<|tool_call_end|><|tool_calls_section_end|>';
  before(async () => {
    dir = fixtureWithTemplate('tiny-kimi-k2', null);
    assert.ok(fs.existsSync(path.join(dir, 'chat_template.jinja')));
    srv = await startServer([dir, '--served-model-name', MODEL, '--enable-auto-tool-choice',
      '--tool-call-parser', 'kimi_k2', '--reasoning-parser', 'kimi_k2']);
    client = srv.client();
  });
  after(async () => {
    const r = await srv.stop();
    fs.rmSync(dir, { recursive: true, force: true });
    assert.equal(r.code, 0, `exit status ${JSON.stringify(r)}\n${srv.log().slice(-2000)}`);
  });

  test('thinking, content and a call: the id is functions.NAME:IDX, whole = streamed', async () => {
    const r = await both(client, MODEL, `<think>Paris, so a call.</think>Let me check.${CALL}`);
    const m = expectSplit(r, {
      reasoning: 'Paris, so a call.', content: 'Let me check.',
      calls: [{ name: 'get_weather', arguments: '{"city": "Paris", "days": 2}' }],
    });
    assert.equal(m.tool_calls[0].id, 'functions.get_weather:0');
    assert.equal(r.streamed.calls[0].id, 'functions.get_weather:0');
  });

  test('the call section ends the thinking; two calls keep their ids', async () => {
    const two = '<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{"city": "Oslo"}'
      + '<|tool_call_end|><|tool_call_begin|>functions.get_weather:1<|tool_call_argument_begin|>{"city": "Rome"}<|tool_call_end|>'
      + '<|tool_calls_section_end|>';
    const r = await both(client, MODEL, `two cities${two}`);
    const m = expectSplit(r, {
      reasoning: 'two cities', content: null,
      calls: [{ name: 'get_weather', arguments: '{"city": "Oslo"}' }, { name: 'get_weather', arguments: '{"city": "Rome"}' }],
    });
    assert.deepEqual(m.tool_calls.map((c) => c.id), ['functions.get_weather:0', 'functions.get_weather:1']);
  });

  test('a malformed call stays content; thinking off leaves all of it content', async () => {
    const bad = '<|tool_calls_section_begin|><|tool_call_begin|>get_weather<|tool_call_argument_begin|>{}<|tool_call_end|>';
    expectSplit(await both(client, MODEL, `</think>x${bad}`), { reasoning: '', content: `x${bad}`, calls: [] });
    expectSplit(await both(client, MODEL, `<think>a</think>b`, { chat_template_kwargs: { thinking: false } }),
      { reasoning: null, content: '<think>a</think>b', calls: [] });
  });

  test('the call id survives the round trip: the history renders it', async () => {
    const r = await both(client, MODEL, `</think>${CALL}`);
    const call = r.whole.message.tool_calls[0];
    const history = [...MSG, { role: 'assistant', content: '', tool_calls: [call] },
      { role: 'tool', tool_call_id: call.id, content: '18 C, sunny' }];
    const ids = await tokenize(srv.base, MODEL, { messages: history, tools: TOOLS });
    const res = await fetch(`${srv.base}/detokenize`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: MODEL, tokens: ids }),
    });
    const prompt = (await res.json()).prompt;
    assert.ok(prompt.includes(`<|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>${call.function.arguments}`), prompt);
    assert.ok(prompt.includes('## Return of functions.get_weather:0\n18 C, sunny'), prompt);
    assert.ok(prompt.startsWith('<|im_system|>tool_declare<|im_middle|>'), prompt); // Kimi's own template
    const next = await client.chat.completions.create({ model: MODEL, messages: history, tools: TOOLS, max_tokens: 4 });
    assert.equal(next.choices[0].message.role, 'assistant');
  });

  test('the call tags are special tokens: kept in the text the parser reads for requests with tools', async () => {
    const ids = await tokenize(srv.base, MODEL, { prompt: '<|tool_calls_section_begin|>', add_special_tokens: false });
    assert.equal(ids.length, 1);
    const params = { model: MODEL, messages: MSG, max_tokens: 1, temperature: 0, logit_bias: { [ids[0]]: 100 } };
    const withTools = await client.chat.completions.create({ ...params, tools: TOOLS });
    assert.equal(withTools.choices[0].message.content, '<|tool_calls_section_begin|>');
    const without = await client.chat.completions.create(params); // skip_special_tokens as asked
    assert.equal(without.choices[0].message.content ?? '', '');
  });

  test('an image part is a 400 naming image input', async () => {
    await assert.rejects(client.chat.completions.create({
      model: MODEL, max_tokens: 4,
      messages: [{ role: 'user', content: [{ type: 'text', text: 'what is this?' },
        { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } }] }],
    }), (e) => e.status === 400 && /does not accept image input/.test(e.message));
  });
});

describe('glm47 / glm45 parsers (tiny-glm5)', () => {
  let srv, client, dir;
  const MODEL = 'tiny-glm5';
  before(async () => {
    dir = fixtureWithTemplate('tiny-glm5', GLM_TEMPLATE);
    srv = await startServer([dir, '--served-model-name', MODEL, '--enable-auto-tool-choice',
      '--tool-call-parser', 'glm47', '--reasoning-parser', 'glm45']);
    client = srv.client();
  });
  after(async () => {
    const r = await srv.stop();
    fs.rmSync(dir, { recursive: true, force: true });
    assert.equal(r.code, 0, `exit status ${JSON.stringify(r)}\n${srv.log().slice(-2000)}`);
  });

  test('thinking (on by default), content and calls typed from the schema, whole = streamed', async () => {
    const out = 'Paris.</think>On it.<tool_call>get_weather<arg_key>city</arg_key><arg_value>42</arg_value>'
      + '<arg_key>days</arg_key><arg_value>3</arg_value></tool_call><tool_call>get_weather\n<arg_key>days</arg_key>\n'
      + "<arg_value>[1, True]</arg_value>\n</tool_call>";
    const r = await both(client, MODEL, out);
    const m = expectSplit(r, {
      reasoning: 'Paris.', content: 'On it.',
      calls: [{ name: 'get_weather', arguments: '{"city": "42", "days": 3}' },
        { name: 'get_weather', arguments: '{"days": [1, true]}' }],
    });
    assert.ok(m.tool_calls.every((c) => c.id.startsWith('chatcmpl-tool-')));
  });

  test('enable_thinking false: no split; a call with no name stays content', async () => {
    expectSplit(await both(client, MODEL, 'a</think>b', { chat_template_kwargs: { enable_thinking: false } }),
      { reasoning: null, content: 'a</think>b', calls: [] });
    expectSplit(await both(client, MODEL, '</think>x<tool_call> </tool_call>'),
      { reasoning: '', content: 'x<tool_call> </tool_call>', calls: [] });
  });
});

test('serve --help names the parsers', () => {
  const p = spawnSync(binary, ['serve', '--help'], { cwd: repoRoot, encoding: 'utf8', timeout: 30000 });
  const help = p.stdout + p.stderr;
  for (const name of ['kimi_k2 (Kimi K2', 'glm47 (GLM-4.7, GLM-5)', 'glm45 (GLM-4.5 to GLM-5.1)'])
    assert.ok(help.includes(name), `${name} not in --help`);
});
