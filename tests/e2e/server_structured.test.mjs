// Structured outputs (guided decoding) through the official openai client on the tiny
// random-weight model: its text is gibberish, so every check is about structure. A
// response_format json_schema output that finishes "stop" parses and meets its schema (one
// cut by max_tokens finishes "length"), json_object gives an object, guided_choice (a vLLM
// extra, passed in the body) gives one of the choices, a streamed guided output is the
// non-streamed one for the same seed, tool_choice "required" and a named function give
// message.tool_calls (arguments as vLLM writes them: Python json.dumps separators for
// "required", the generated object for a named one), streamed too (a named call's arguments
// piece by piece), regexes and patterns match whole, guided_grammar outputs are derivations
// of their grammar (streamed too), and the refused forms are 400s. The request parsing and the grammars are unit-tested in
// tests/unit/test_server_structured.c. They run twice: at this machine's kernel level and at
// a second one (the outcomes differ; what is asserted must hold for any).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { APIError } from 'openai';
import { startServer } from './server_lib.mjs';

let srv, client;
const MODEL = 'tiny-v3';
const MSG = [{ role: 'user', content: 'Describe someone as JSON.' }];

// Every keyword a schema below uses; small maxLength and no unbounded strings so outputs end.
const PERSON = {
  type: 'object',
  properties: {
    name: { type: 'string', maxLength: 6 },
    age: { type: 'integer' },
    color: { enum: ['red', 'green', 'blue'] },
    ok: { type: 'boolean' },
  },
  required: ['name', 'age', 'color', 'ok'],
  additionalProperties: false,
};
const TOOLS = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'Weather of a city',
      parameters: {
        type: 'object',
        properties: { city: { type: 'string', maxLength: 8 }, days: { type: 'integer' }, unit: { enum: ['c', 'f'] } },
        required: ['city', 'unit'],
      },
    },
  },
  {
    type: 'function',
    function: { name: 'get_time', parameters: { type: 'object', properties: { tz: { enum: ['UTC', 'CET'] } }, required: ['tz'] } },
  },
];
const TOOL_NAMES = TOOLS.map((t) => t.function.name);

before(async () => {
  srv = await startServer(['--served-model-name', MODEL]);
  client = srv.client();
});
after(async () => {
  const r = await srv.stop();
  assert.equal(r.code, 0, `exit status ${JSON.stringify(r)}\n${srv.log().slice(-2000)}`);
});

// Asserts that value v meets schema s (the subset used here; keys in the schema's order and
// no others, as the server generates objects).
function meets(s, v, at = '$') {
  if (s.enum) {
    assert.ok(s.enum.some((e) => JSON.stringify(e) === JSON.stringify(v)), `${at}: ${JSON.stringify(v)} not in enum`);
    return;
  }
  switch (s.type) {
    case 'object': {
      assert.ok(v !== null && typeof v === 'object' && !Array.isArray(v), `${at}: not an object`);
      const keys = Object.keys(s.properties ?? {});
      const got = Object.keys(v);
      for (const k of s.required ?? []) assert.ok(got.includes(k), `${at}: required '${k}' missing`);
      for (const k of got) assert.ok(keys.includes(k), `${at}: key '${k}' not in the schema`);
      assert.deepEqual(got, keys.filter((k) => got.includes(k)), `${at}: keys out of the schema's order`);
      for (const k of got) meets(s.properties[k], v[k], `${at}.${k}`);
      return;
    }
    case 'array':
      assert.ok(Array.isArray(v), `${at}: not an array`);
      if (s.maxItems !== undefined) assert.ok(v.length <= s.maxItems, `${at}: ${v.length} items`);
      v.forEach((x, i) => meets(s.items, x, `${at}[${i}]`));
      return;
    case 'string':
      assert.equal(typeof v, 'string', `${at}: not a string`);
      if (s.maxLength !== undefined) assert.ok([...v].length <= s.maxLength, `${at}: '${v}' longer than ${s.maxLength}`);
      return;
    case 'integer':
      assert.ok(Number.isInteger(v), `${at}: ${v} not an integer`);
      return;
    case 'boolean':
      assert.equal(typeof v, 'boolean', `${at}: not a boolean`);
      return;
    case 'number':
      assert.equal(typeof v, 'number', `${at}: not a number`);
      if (s.minimum !== undefined) assert.ok(v >= s.minimum, `${at}: ${v} < ${s.minimum}`);
      if (s.exclusiveMinimum !== undefined) assert.ok(v > s.exclusiveMinimum, `${at}: ${v} <= ${s.exclusiveMinimum}`);
      if (s.maximum !== undefined) assert.ok(v <= s.maximum, `${at}: ${v} > ${s.maximum}`);
      if (s.exclusiveMaximum !== undefined) assert.ok(v < s.exclusiveMaximum, `${at}: ${v} >= ${s.exclusiveMaximum}`);
      return;
    default:
      throw new Error(`schema type ${s.type} not handled by the test`);
  }
}

// A json_schema chat request with n seeded choices: check(value) on each finished output, at
// least one of which must finish (the tiny model may run out of tokens on the others).
async function eachFinished(schema, opts, check) {
  const r = await client.chat.completions.create({
    model: MODEL, messages: MSG, temperature: 1, ...opts,
    response_format: { type: 'json_schema', json_schema: { name: 'x', schema } },
  });
  let finished = 0;
  for (const c of r.choices) {
    if (c.finish_reason !== 'stop') continue;
    check(JSON.parse(c.message.content));
    finished++;
  }
  assert.ok(finished >= 1, 'no output finished');
}

// JSON text re-written as Python's json.dumps(v, ensure_ascii=False) writes it: ", " and ": "
// separators, no other whitespace, strings in their canonical escaping (JSON.stringify's is
// Python's), number literals kept as they are (integers only in these schemas).
function pyFormat(text) {
  const re = /\s*("(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null|[{}[\],:])/y;
  let out = '', m;
  while (re.lastIndex < text.length && (m = re.exec(text))) {
    const t = m[1];
    out += t[0] === '"' ? JSON.stringify(JSON.parse(t)) : t === ',' ? ', ' : t === ':' ? ': ' : t;
  }
  assert.equal(re.lastIndex, text.length, `not JSON tokens: ${text}`);
  return out;
}

async function isBadRequest(promise, re) {
  await assert.rejects(promise, (e) => {
    assert.ok(e instanceof APIError, `not an APIError: ${e}`);
    assert.equal(e.status, 400, e.message);
    assert.match(e.message, re);
    return true;
  });
}

const structuredTests = () => {
  test('response_format json_schema: a finished output parses and meets the schema', async () => {
    // choice i of a seeded request samples with seed + i: eight seeds in one request
    let finished = 0, total = 0;
    {
      const r = await client.chat.completions.create({
        model: MODEL, messages: MSG, max_tokens: 400, temperature: 0.8, seed: 1, n: 8,
        response_format: { type: 'json_schema', json_schema: { name: 'person', schema: PERSON } },
      });
      assert.equal(r.choices.length, 8);
      for (const c of r.choices) {
        total++;
        const text = c.message.content;
        assert.equal(typeof text, 'string');
        assert.deepEqual(c.message.tool_calls ?? [], []);
        if (c.finish_reason === 'length') {
          assert.ok(text.startsWith('{'), `cut output: ${JSON.stringify(text)}`);
          continue;
        }
        assert.equal(c.finish_reason, 'stop');
        assert.equal(text, text.trim(), 'whitespace around the value');
        meets(PERSON, JSON.parse(text));
        finished++;
      }
    }
    assert.ok(finished >= total / 2, `only ${finished} of ${total} outputs finished`);
  });

  test('json_schema with fractional bounds on numbers: outputs within them', async () => {
    const schema = {
      type: 'object',
      properties: { score: { type: 'number', exclusiveMinimum: 0.5, maximum: 2.25 }, t: { type: 'number', minimum: -0.75, exclusiveMaximum: 0.1 } },
      required: ['score', 't'],
      additionalProperties: false,
    };
    await eachFinished(schema, { max_tokens: 60, seed: 4, n: 6 }, (v) => meets(schema, v));
  });

  test('json_schema string formats: dates and UUIDs as pydantic writes them', async () => {
    const schema = {
      type: 'object',
      properties: { when: { type: 'string', format: 'date' }, id: { type: 'string', format: 'uuid' } },
      required: ['when', 'id'],
    };
    await eachFinished(schema, { max_tokens: 300, seed: 2, n: 4 }, (v) => {
      assert.match(v.when, /^\d{4}-\d{2}-\d{2}$/);
      const d = new Date(`${v.when}T00:00:00Z`);
      assert.equal(d.toISOString().slice(0, 10), v.when, `${v.when} is not a calendar date`);
      assert.match(v.id, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i);
    });
  });

  test('uniqueItems over an enum (pydantic set[Color]): no value twice', async () => {
    const schema = {
      $defs: { Color: { enum: ['red', 'green', 'blue', 'cyan'], type: 'string' } },
      type: 'object',
      properties: { colors: { type: 'array', items: { $ref: '#/$defs/Color' }, uniqueItems: true } },
      required: ['colors'],
    };
    await eachFinished(schema, { max_tokens: 150, seed: 6, n: 6 }, ({ colors }) => {
      assert.equal(new Set(colors).size, colors.length, `repeated: ${JSON.stringify(colors)}`);
      for (const x of colors) assert.ok(['red', 'green', 'blue', 'cyan'].includes(x));
    });
  });

  test('guided_json as JSON text on /v1/completions', async () => {
    const schema = { type: 'array', items: { type: 'boolean' }, maxItems: 3 };
    const r = await client.completions.create({
      model: MODEL, prompt: 'Flags:', max_tokens: 200, temperature: 0.8, seed: 5, n: 4, guided_json: JSON.stringify(schema),
    });
    let finished = 0;
    for (const c of r.choices) {
      if (c.finish_reason === 'length') continue;
      assert.equal(c.finish_reason, 'stop');
      meets(schema, JSON.parse(c.text));
      finished++;
    }
    assert.ok(finished > 0, JSON.stringify(r.choices));
  });

  test('response_format json_object: a finished output is a JSON object', async () => {
    let finished = 0;
    {
      const r = await client.chat.completions.create({
        model: MODEL, messages: MSG, max_tokens: 300, temperature: 0.8, seed: 1, n: 8, response_format: { type: 'json_object' },
      });
      for (const c of r.choices) {
        const text = c.message.content;
        assert.ok(text.startsWith('{'), JSON.stringify(text));
        if (c.finish_reason === 'length') continue;
        assert.equal(c.finish_reason, 'stop');
        const v = JSON.parse(text);
        assert.ok(v !== null && typeof v === 'object' && !Array.isArray(v), text);
        finished++;
      }
    }
    assert.ok(finished > 0, 'no json_object output finished');
  });

  test('guided_choice (completions, n = 4) and structured_outputs.choice (chat): one of the choices', async () => {
    const choices = ['red', 'green', 'blue sky', 'no'];
    const r = await client.completions.create({
      model: MODEL, prompt: 'Color:', max_tokens: 16, n: 4, seed: 3, temperature: 1, guided_choice: choices,
    });
    assert.equal(r.choices.length, 4);
    for (const c of r.choices) {
      assert.ok(choices.includes(c.text), JSON.stringify(c.text));
      assert.equal(c.finish_reason, 'stop');
    }
    const chat = await client.chat.completions.create({
      model: MODEL, messages: MSG, max_tokens: 16, n: 2, seed: 4, temperature: 1, structured_outputs: { choice: ['yes', 'no'] },
    });
    for (const c of chat.choices) {
      assert.ok(['yes', 'no'].includes(c.message.content), JSON.stringify(c.message.content));
      assert.equal(c.finish_reason, 'stop');
    }
  });

  test('streaming json_schema: the deltas join to the non-streamed output of the same seed', async () => {
    const params = {
      model: MODEL, messages: MSG, max_tokens: 300, temperature: 0.8, seed: 11, n: 2,
      response_format: { type: 'json_schema', json_schema: { name: 'person', schema: PERSON } },
    };
    const whole = await client.chat.completions.create(params);
    const text = ['', ''], finish = [null, null];
    let chunks = 0;
    for await (const chunk of await client.chat.completions.create({ ...params, stream: true })) {
      for (const ch of chunk.choices) {
        text[ch.index] += ch.delta.content ?? '';
        finish[ch.index] = ch.finish_reason ?? finish[ch.index];
        chunks++;
      }
    }
    assert.ok(chunks > 4, `${chunks} chunks`);
    for (const c of whole.choices) {
      assert.ok(c.message.content.length > 0);
      assert.equal(text[c.index], c.message.content);
      assert.equal(finish[c.index], c.finish_reason);
    }
  });

  test('tool_choice "required": message.tool_calls with arguments as vLLM writes them', async () => {
    let called = 0;
    {
      const r = await client.chat.completions.create({
        model: MODEL, messages: MSG, max_tokens: 300, temperature: 0.8, seed: 2, n: 8, tools: TOOLS, tool_choice: 'required',
      });
      for (const c of r.choices) {
        const m = c.message;
        // at the limit, as vLLM: a list that closed exactly there is parsed into calls (the
        // finish stays "length"); a cut one has no calls and its text stays content
        if (c.finish_reason === 'length' && !(m.tool_calls ?? []).length) {
          assert.ok(m.content.startsWith('['), JSON.stringify(m.content));
          continue;
        }
        if (c.finish_reason !== 'length') assert.equal(c.finish_reason, 'tool_calls', JSON.stringify(m));
        assert.ok(m.tool_calls.length >= 1);
        assert.equal(m.content, null);
        const ids = new Set();
        for (const call of m.tool_calls) {
          assert.equal(call.type, 'function');
          assert.match(call.id, /^chatcmpl-tool-\w+$/);
          ids.add(call.id);
          const i = TOOL_NAMES.indexOf(call.function.name);
          assert.ok(i >= 0, `unknown function ${call.function.name}`);
          meets(TOOLS[i].function.parameters, JSON.parse(call.function.arguments));
          assert.equal(call.function.arguments, pyFormat(call.function.arguments));
        }
        assert.equal(ids.size, m.tool_calls.length, 'ids repeat');
        called++;
      }
    }
    assert.ok(called > 0, 'no "required" output closed its list');
  });

  test('tool_choice named: one call of that function, its arguments meet its parameters', async () => {
    const tool = TOOLS[0].function;
    const r = await client.chat.completions.create({
      model: MODEL, messages: MSG, max_tokens: 300, temperature: 0.8, seed: 2, n: 4, tools: TOOLS,
      tool_choice: { type: 'function', function: { name: tool.name } },
    });
    let called = 0;
    for (const c of r.choices) {
      const m = c.message;
      assert.equal(m.tool_calls.length, 1, JSON.stringify(m));
      const call = m.tool_calls[0];
      assert.equal(call.type, 'function');
      assert.match(call.id, /^chatcmpl-tool-\w+$/);
      assert.equal(call.function.name, tool.name);
      if (c.finish_reason === 'length') continue;
      assert.equal(c.finish_reason, 'tool_calls');
      meets(tool.parameters, JSON.parse(call.function.arguments));
      called++;
    }
    assert.ok(called > 0, 'no named output finished');
  });

  test('streaming forced tool choices: the calls arrive in deltas, as the non-streamed ones', async () => {
    // streamed = whole for whatever each seed draws; seeds until one drew a call (a cut
    // "required" list has none, and which seeds cut depends on the kernels)
    for (const toolChoice of [{ type: 'function', function: { name: 'get_weather' } }, 'required']) for (let seed = 6, calls = 0; !calls; seed++) {
      assert.ok(seed < 14, `${JSON.stringify(toolChoice)}: no calls in 8 seeds`);
      const params = { model: MODEL, messages: MSG, max_tokens: 300, temperature: 0.8, seed, n: 2, tools: TOOLS, tool_choice: toolChoice };
      const whole = await client.chat.completions.create(params);
      const got = [[], []], content = ['', ''], finish = [null, null], pieces = [0, 0], merged = [false, false];
      // token_ids tell whether a chunk carries several tokens' text: a reader that falls behind
      // gets the engine's events merged (as vLLM's), and then one piece is right
      for await (const chunk of await client.chat.completions.create({ ...params, stream: true, return_token_ids: true })) {
        for (const ch of chunk.choices) {
          if ((ch.token_ids ?? []).length > 1) merged[ch.index] = true;
          content[ch.index] += ch.delta.content ?? '';
          // a named call streams its arguments: the first delta names it, the next ones
          // only add arguments, joined as OpenAI clients join them
          for (const d of ch.delta.tool_calls ?? []) {
            pieces[ch.index]++;
            const prev = got[ch.index][d.index];
            if (prev) {
              assert.equal(d.id, undefined);
              assert.equal(d.function.name, undefined);
              prev.function.arguments += d.function.arguments;
            } else got[ch.index][d.index] = structuredClone(d);
          }
          finish[ch.index] = ch.finish_reason ?? finish[ch.index];
        }
      }
      const what = `${JSON.stringify(toolChoice)} seed ${seed}`;
      for (const c of whole.choices) {
        const want = c.message.tool_calls ?? [];
        assert.equal(finish[c.index], c.finish_reason, what);
        if (!want.length) { // a cut "required" output: content, as non-streamed
          assert.equal(content[c.index], c.message.content, what);
          assert.equal(got[c.index].length, 0, what);
          continue;
        }
        assert.equal(content[c.index], '', `${what}: content ${JSON.stringify(content[c.index])}`);
        assert.equal(got[c.index].length, want.length, what);
        got[c.index].forEach((d, k) => {
          assert.equal(d.index, k);
          assert.equal(d.type, 'function');
          assert.match(d.id, /^chatcmpl-tool-\w+$/);
          assert.equal(d.function.name, want[k].function.name, what);
          assert.equal(d.function.arguments, want[k].function.arguments, what);
        });
        if (typeof toolChoice === 'object' && !merged[c.index]) assert.ok(pieces[c.index] > 1, `${what}: the arguments came in one piece`);
        calls++;
      }
    }
  });

  test('guided_regex and a schema pattern: outputs match them whole', async () => {
    const re = '(yes|no|maybe)-[0-9]{2,4}';
    const r = await client.completions.create({ model: MODEL, prompt: 'x', max_tokens: 20, n: 4, seed: 2, temperature: 1, guided_regex: re });
    for (const c of r.choices) {
      assert.equal(c.finish_reason, 'stop');
      assert.match(c.text, new RegExp(`^(?:${re})$`));
    }
    const s = await client.chat.completions.create({
      model: MODEL, messages: MSG, max_tokens: 60, n: 4, seed: 4, temperature: 1,
      response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object', properties: { id: { type: 'string', pattern: '^[A-Z]{2}-\\d{3}$' } }, required: ['id'] } } },
    });
    for (const c of s.choices) {
      if (c.finish_reason !== 'stop') continue;
      assert.match(JSON.parse(c.message.content).id, /^[A-Z]{2}-\d{3}$/);
    }
    assert.ok(s.choices.some((c) => c.finish_reason === 'stop'));
  });

  test('guided_grammar and structured_outputs.grammar: outputs are derivations of the grammar', async () => {
    // vLLM's documentation example, streamed and not
    const sql = `root ::= select_statement
select_statement ::= "SELECT " column " from " table " where " condition
column ::= "col_1 " | "col_2 "
table ::= "table_1 " | "table_2 "
condition ::= column "= " number
number ::= "1 " | "2 "`;
    const sqlRe = /^SELECT col_[12]  from table_[12]  where col_[12] = [12] $/;
    const r = await client.chat.completions.create({ model: MODEL, messages: MSG, max_tokens: 40, n: 3, seed: 7, temperature: 1, guided_grammar: sql });
    for (const c of r.choices) {
      assert.equal(c.finish_reason, 'stop');
      assert.match(c.message.content, sqlRe);
    }
    const stream = await client.completions.create({ model: MODEL, prompt: 'x', max_tokens: 40, seed: 3, temperature: 1, stream: true, structured_outputs: { grammar: sql } });
    let text = '';
    let finish = null;
    for await (const ch of stream) {
      text += ch.choices[0].text;
      finish = ch.choices[0].finish_reason ?? finish;
    }
    assert.equal(finish, 'stop');
    assert.match(text, sqlRe);
    // recursion: nested lists of numbers
    const nested = 'root ::= list\nlist ::= "[" (item ("," item){0,2})? "]"\nitem ::= [0-9] | list';
    const n = await client.completions.create({ model: MODEL, prompt: 'x', max_tokens: 40, n: 4, seed: 11, temperature: 1, guided_grammar: nested });
    for (const c of n.choices) {
      if (c.finish_reason !== 'stop') continue;
      let depth = 0;
      for (const ch of c.text) {
        depth += ch === '[' ? 1 : ch === ']' ? -1 : 0;
        assert.ok(depth >= 0, c.text);
      }
      assert.equal(depth, 0, c.text);
      assert.match(c.text, /^[\[\],0-9]+$/);
    }
    assert.ok(n.choices.some((c) => c.finish_reason === 'stop'));
    // Lark, as vLLM's older examples write the same grammar
    const lark = `?start: select_statement
?select_statement: "SELECT " column " from " table " where " condition
?column: "col_1 " | "col_2 "
?table: "table_1 " | "table_2 "
?condition: column "= " number
number: "1 " | "2 "  // a comment`;
    const l = await client.chat.completions.create({ model: MODEL, messages: MSG, max_tokens: 40, n: 2, seed: 9, temperature: 1, structured_outputs: { grammar: lark } });
    for (const c of l.choices) {
      assert.equal(c.finish_reason, 'stop');
      assert.match(c.message.content, sqlRe);
    }
    // left recursion, as grammars are often written (rewritten as repetition by the server)
    const arith = 'root ::= expr "."\nexpr ::= expr ("+" | "-") term | term\nterm ::= term "*" num | num\nnum ::= [0-9]';
    const a = await client.completions.create({ model: MODEL, prompt: 'x', max_tokens: 24, n: 4, seed: 5, temperature: 1, guided_grammar: arith });
    for (const c of a.choices) {
      if (c.finish_reason === 'stop') assert.match(c.text, /^[0-9]([-+*][0-9])*\.$/);
      else assert.match(c.text, /^[0-9]([-+*][0-9])*[-+*]?$/);
    }
  });

  test('refused forms are 400s through the client', async () => {
    await isBadRequest(client.chat.completions.create({ model: MODEL, messages: MSG, max_tokens: 4, guided_grammar: 'expr ::= expr "+" | "1"' }), /no rule "root"/);
    await isBadRequest(client.chat.completions.create({ model: MODEL, messages: MSG, max_tokens: 4, guided_grammar: 'root ::= "x"? root "+" | "1"' }), /left recursion behind a part that may match nothing, through rule root/);
    await isBadRequest(client.chat.completions.create({ model: MODEL, messages: MSG, max_tokens: 4, guided_grammar: 'start: "a"\n%declare X' }), /guided_grammar: grammar line 2: this directive is not supported: %declare \(Lark\)/);
    await isBadRequest(
      client.chat.completions.create({
        model: MODEL, messages: MSG, max_tokens: 4,
        response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'number', minimum: 1e-20 } } },
      }),
      /more than 18 decimals/,
    );
    await isBadRequest(client.completions.create({ model: MODEL, prompt: 'x', max_tokens: 4, guided_json: '{"type": ' }), /guided_json/);
    await isBadRequest(
      client.completions.create({ model: MODEL, prompt: 'x', max_tokens: 4, guided_choice: ['a'], guided_json: { type: 'integer' } }),
      /only one/,
    );
    await isBadRequest(
      client.chat.completions.create({ model: MODEL, messages: MSG, max_tokens: 4, tools: TOOLS, tool_choice: { type: 'function', function: { name: 'nope' } } }),
      /nope/,
    );
    // the server still answers after the refusals
    const ok = await client.completions.create({ model: MODEL, prompt: 'x', max_tokens: 8, guided_choice: ['a', 'b'] });
    assert.ok(['a', 'b'].includes(ok.choices[0].text));
  });
};

describe('structured outputs', structuredTests);

// A cheap guard for other machines: the same tests once more at a second kernel level
// (avx2, or portable where avx2 is this machine's own), whose sampled outcomes differ: each
// assertion must hold for any outcome, not for the one this machine's kernels happen to draw.
describe('structured outputs at a second kernel level', () => {
  let first;
  before(async () => {
    first = srv;
    const own = first.log().match(/, (\w+) kernels/)?.[1];
    const level = own === 'avx2' || own === 'portable' ? 'portable' : 'avx2';
    srv = await startServer(['--served-model-name', MODEL], { env: { MLASERVE_CPU_LEVEL: level } });
    assert.match(srv.log(), new RegExp(`, ${level} kernels`));
    client = srv.client();
  });
  after(async () => {
    const r = await srv.stop();
    [srv, client] = [first, first.client()];
    assert.equal(r.code, 0, `exit status ${JSON.stringify(r)}`);
  });
  structuredTests();
});
