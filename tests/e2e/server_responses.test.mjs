// The Responses API (POST /v1/responses) through the official openai client: a request answers
// what the same conversation answers on /v1/chat/completions (instructions as the system
// message, max_output_tokens as max_tokens), whole, streamed as typed events (which the
// client's own accumulator turns back into the same Response), with structured output from
// text.format, with function tools (a forced call comes back as a function_call item, and
// the call and its output go back in as input items), and on the R1 fixture under a
// reasoning parser as a reasoning item then the message. Finished responses are stored
// (retrieve, delete, store: false) and previous_response_id continues one's conversation as
// if it were sent again. What the server cannot honour is a 400 naming the field.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startServer } from './server_lib.mjs';

const MODEL = 'tiny-v3';
let v3, r1;

before(async () => {
  [v3, r1] = await Promise.all([
    startServer(['--served-model-name', MODEL]),
    startServer(['tests/fixtures/tiny-r1', '--served-model-name', MODEL, '--reasoning-parser', 'deepseek_r1']),
  ]);
});
after(async () => {
  for (const s of [v3, r1]) {
    const r = await s.stop();
    assert.equal(r.code, 0, `exit status ${JSON.stringify(r)}\n${s.log().slice(-2000)}`);
  }
});

const chatOf = (server, messages, max) =>
  server.client().chat.completions.create({ model: MODEL, messages, max_tokens: max, temperature: 0 });

describe('/v1/responses', () => {
  test('a string input answers as the chat endpoint does', async () => {
    const c = v3.client();
    const r = await c.responses.create({ model: MODEL, input: 'hello there', max_output_tokens: 12, temperature: 0 });
    const chat = await chatOf(v3, [{ role: 'user', content: 'hello there' }], 12);
    assert.equal(r.object, 'response');
    assert.match(r.id, /^resp_/);
    assert.equal(r.output_text, chat.choices[0].message.content);
    assert.equal(r.output.length, 1);
    assert.equal(r.output[0].type, 'message');
    assert.equal(r.output[0].role, 'assistant');
    assert.equal(r.status, chat.choices[0].finish_reason === 'length' ? 'incomplete' : 'completed');
    if (r.status === 'incomplete') assert.deepEqual(r.incomplete_details, { reason: 'max_output_tokens' });
    assert.equal(r.usage.input_tokens, chat.usage.prompt_tokens);
    assert.equal(r.usage.output_tokens, chat.usage.completion_tokens);
    assert.equal(r.usage.total_tokens, chat.usage.total_tokens);
    assert.equal(r.max_output_tokens, 12);
    assert.deepEqual(r.metadata, {});
  });

  test('instructions and message items become the conversation', async () => {
    const c = v3.client();
    const r = await c.responses.create({
      model: MODEL,
      instructions: 'answer briefly',
      input: [
        { role: 'user', content: [{ type: 'input_text', text: 'first ' }, { type: 'input_text', text: 'question' }] },
        { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'an answer' }] },
        { role: 'developer', content: 'be kind' },
        { role: 'user', content: 'second question' },
      ],
      max_output_tokens: 10,
      temperature: 0,
      metadata: { run: 'e2e' },
    });
    const chat = await chatOf(v3, [
      { role: 'system', content: 'answer briefly' },
      { role: 'user', content: 'first question' },
      { role: 'assistant', content: 'an answer' },
      { role: 'system', content: 'be kind' },
      { role: 'user', content: 'second question' },
    ], 10);
    assert.equal(r.output_text, chat.choices[0].message.content);
    assert.equal(r.instructions, 'answer briefly');
    assert.deepEqual(r.metadata, { run: 'e2e' });
  });

  test('streamed: typed events in order, which the client accumulates into the same Response', async () => {
    const c = v3.client();
    const body = { model: MODEL, input: 'tell me a story', max_output_tokens: 16, temperature: 0 };
    const whole = await c.responses.create(body);
    const stream = c.responses.stream(body);
    const types = [];
    let seq = -1, deltas = '';
    for await (const ev of stream) {
      assert.equal(ev.sequence_number, seq + 1);
      seq = ev.sequence_number;
      types.push(ev.type);
      if (ev.type === 'response.output_text.delta') deltas += ev.delta;
    }
    const final = await stream.finalResponse();
    assert.equal(final.output_text, whole.output_text);
    assert.equal(deltas, whole.output_text);
    assert.equal(final.status, whole.status);
    assert.deepEqual(final.usage, whole.usage);
    assert.deepEqual(types.slice(0, 4), ['response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added']);
    assert.deepEqual(types.slice(-4), ['response.output_text.done', 'response.content_part.done', 'response.output_item.done', `response.${whole.status}`]);
    // the same stream through create({stream: true})
    let raw = '';
    for await (const ev of await c.responses.create({ ...body, stream: true }))
      if (ev.type === 'response.output_text.delta') raw += ev.delta;
    assert.equal(raw, whole.output_text);
  });

  test('include message.output_text.logprobs: the chat logprobs, whole and streamed', async () => {
    const c = v3.client();
    const body = { model: MODEL, input: 'hello there', max_output_tokens: 6, temperature: 0, include: ['message.output_text.logprobs'], top_logprobs: 2 };
    const r = await c.responses.create(body);
    const chat = await v3.client().chat.completions.create({
      model: MODEL, messages: [{ role: 'user', content: 'hello there' }], max_tokens: 6, temperature: 0, logprobs: true, top_logprobs: 2,
    });
    const lp = r.output[0].content[0].logprobs;
    assert.equal(lp.length, r.usage.output_tokens);
    assert.deepEqual(lp.map((e) => e.token), chat.choices[0].logprobs.content.map((e) => e.token));
    assert.ok(lp.every((e, i) => Math.abs(e.logprob - chat.choices[0].logprobs.content[i].logprob) < 1e-4));
    assert.ok(lp.every((e) => e.top_logprobs.length === 2));
    const streamed = [];
    for await (const ev of await c.responses.create({ ...body, stream: true }))
      if (ev.type === 'response.output_text.delta') streamed.push(...ev.logprobs);
    assert.deepEqual(streamed.map((e) => e.token), lp.map((e) => e.token));
  });

  test('text.format json_schema constrains the output', async () => {
    const schema = { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'], additionalProperties: false };
    const r = await v3.client().responses.create({
      model: MODEL,
      input: 'give me a number',
      max_output_tokens: 60,
      temperature: 0,
      text: { format: { type: 'json_schema', name: 'num', schema, strict: true } },
    });
    assert.equal(r.status, 'completed');
    assert.ok(Number.isInteger(JSON.parse(r.output_text).n), r.output_text);
  });

  test('under a reasoning parser: a reasoning item, then the message', async () => {
    const c = r1.client();
    const body = { model: MODEL, input: 'What is 2 + 2?', max_output_tokens: 24, temperature: 0 };
    const r = await c.responses.create(body);
    const chat = await chatOf(r1, [{ role: 'user', content: 'What is 2 + 2?' }], 24);
    const m = chat.choices[0].message;
    assert.equal(r.output[0].type, 'reasoning');
    assert.equal(r.output[0].content[0].type, 'reasoning_text');
    assert.equal(r.output[0].content[0].text, m.reasoning_content);
    assert.equal(r.output.at(-1).type, 'message');
    assert.equal(r.output_text, m.content ?? '');
    const final = await c.responses.stream(body).finalResponse();
    assert.deepEqual(final.output.map((o) => o.type), r.output.map((o) => o.type));
    assert.equal(final.output[0].content[0].text, m.reasoning_content);
    assert.equal(final.output_text, r.output_text);
  });

  test('function tools: a forced call is a function_call item, and goes back in as input', async () => {
    const c = v3.client();
    const tools = [{
      type: 'function',
      name: 'get_weather',
      description: 'Weather of a city',
      parameters: { type: 'object', properties: { city: { enum: ['Paris', 'Rome'] } }, required: ['city'], additionalProperties: false },
      strict: true,
    }];
    const body = { model: MODEL, input: 'weather in Paris?', tools, tool_choice: { type: 'function', name: 'get_weather' }, max_output_tokens: 60, temperature: 0 };
    const r = await c.responses.create(body);
    assert.equal(r.status, 'completed');
    const calls = r.output.filter((o) => o.type === 'function_call');
    assert.equal(calls.length, 1, JSON.stringify(r.output));
    assert.equal(calls[0].name, 'get_weather');
    assert.ok(['Paris', 'Rome'].includes(JSON.parse(calls[0].arguments).city), calls[0].arguments);
    assert.equal(r.tools[0].name, 'get_weather');
    const final = await c.responses.stream(body).finalResponse();
    const sc = final.output.filter((o) => o.type === 'function_call');
    assert.equal(sc.length, 1);
    assert.equal(sc[0].arguments, calls[0].arguments);
    const next = await c.responses.create({
      model: MODEL,
      input: [
        { role: 'user', content: 'weather in Paris?' },
        { type: 'function_call', call_id: calls[0].call_id, name: 'get_weather', arguments: calls[0].arguments },
        { type: 'function_call_output', call_id: calls[0].call_id, output: '{"temperature": 21}' },
      ],
      tools,
      max_output_tokens: 8,
      temperature: 0,
    });
    assert.equal(next.output.at(-1).type, 'message');
  });

  test('stored responses: retrieved as answered, deleted, and store: false keeps nothing', async () => {
    const c = v3.client();
    const r = await c.responses.create({ model: MODEL, input: 'hi', max_output_tokens: 4, temperature: 0 });
    assert.equal(r.store, true);
    const got = await c.responses.retrieve(r.id);
    assert.deepEqual(got, r);
    // a streamed one is stored as its last event says
    const stream = c.responses.stream({ model: MODEL, input: 'hey', max_output_tokens: 4, temperature: 0 });
    const done = await stream.finalResponse();
    const back = await c.responses.retrieve(done.id);
    assert.equal(back.output_text, done.output_text);
    assert.equal(back.status, 'incomplete');
    const del = await c.responses.delete(r.id);
    assert.deepEqual(del, { id: r.id, object: 'response', deleted: true });
    await assert.rejects(c.responses.retrieve(r.id), (e) => e.status === 404 && /not found/.test(e.message));
    await assert.rejects(c.responses.delete(r.id), (e) => e.status === 404);
    const off = await c.responses.create({ model: MODEL, input: 'hi', max_output_tokens: 2, store: false });
    assert.equal(off.store, false);
    await assert.rejects(c.responses.retrieve(off.id), (e) => e.status === 404);
  });

  test('previous_response_id continues the stored conversation as if it were sent again', async () => {
    const c = v3.client();
    const first = await c.responses.create({ model: MODEL, instructions: 'be brief', input: 'my name is Ada', max_output_tokens: 6, temperature: 0 });
    const next = await c.responses.create({ model: MODEL, previous_response_id: first.id, input: 'what is my name?', max_output_tokens: 6, temperature: 0 });
    assert.equal(next.previous_response_id, first.id);
    // the same turn with the history written out (instructions are not carried over)
    const explicit = await c.responses.create({
      model: MODEL,
      input: [{ role: 'user', content: 'my name is Ada' }, ...first.output, { role: 'user', content: 'what is my name?' }],
      max_output_tokens: 6,
      temperature: 0,
    });
    assert.equal(next.output_text, explicit.output_text);
    assert.equal(next.usage.input_tokens, explicit.usage.input_tokens);
    assert.ok(next.usage.input_tokens > first.usage.input_tokens);
    // its input items: the stored conversation's, newest first, paged by the SDK
    const listed = [];
    for await (const item of c.responses.inputItems.list(next.id, { limit: 1 })) listed.push(item);
    assert.equal(listed.length, 3);
    assert.deepEqual(listed.map((i) => i.type), ['message', 'message', 'message']);
    assert.deepEqual(listed.map((i) => i.role), ['user', 'assistant', 'user']);
    assert.equal(listed[0].content[0].text, 'what is my name?');
    assert.equal(listed[1].id, first.output[0].id);
    assert.equal(listed[2].content[0].text, 'my name is Ada');
    const asc = await c.responses.inputItems.list(next.id, { order: 'asc' });
    assert.deepEqual(asc.data.map((i) => i.id), listed.map((i) => i.id).reverse());
    assert.equal(asc.has_more, false);
    for (const [q, param] of [['limit=0', 'limit'], ['limit=101', 'limit'], ['order=up', 'order'], ['after=msg_nope', 'after']]) {
      const res = await fetch(`${v3.base}/v1/responses/${next.id}/input_items?${q}`);
      assert.equal(res.status, 400, q);
      assert.equal((await res.json()).error.param, param, q);
    }
    assert.equal((await fetch(`${v3.base}/v1/responses/resp_nope/input_items`)).status, 404);
    // a third turn chains through both
    const third = await c.responses.create({ model: MODEL, previous_response_id: next.id, input: 'ok', max_output_tokens: 2 });
    assert.ok(third.usage.input_tokens > next.usage.input_tokens);
    await assert.rejects(
      c.responses.create({ model: MODEL, previous_response_id: 'resp_unknown', input: 'x' }),
      (e) => e.status === 404 && e.param === 'previous_response_id',
    );
  });

  test('--responses-store-size 0: nothing is stored, and previous_response_id is a 400 that says so', async () => {
    const srv = await startServer(['--served-model-name', MODEL, '--responses-store-size', '0']);
    try {
      const c = srv.client();
      const r = await c.responses.create({ model: MODEL, input: 'hi', max_output_tokens: 2 });
      assert.equal(r.store, false);
      await assert.rejects(c.responses.retrieve(r.id), (e) => e.status === 404 && /not stored/.test(e.message));
      await assert.rejects(c.responses.create({ model: MODEL, input: 'x', previous_response_id: r.id }),
        (e) => e.status === 400 && e.param === 'previous_response_id');
    } finally {
      assert.equal((await srv.stop()).code, 0, srv.log().slice(-2000));
    }
  });

  test('what cannot be honoured is a 400 naming the field', async () => {
    const c = v3.client();
    const cases = [
      [{ input: 'x', tools: [{ type: 'web_search' }] }, 'tools'],
      [{ input: 'x', store: 'yes' }, 'store'],
      [{ input: 'x', background: true }, 'background'],
      [{ input: 'x', include: ['file_search_call.results'] }, 'include'],
      [{ input: 'x', include: ['message.output_text.logprobs'], top_logprobs: 99 }, 'top_logprobs'],
      [{ input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'http://x/y.png' }] }] }, 'input'],
      [{ input: [{ type: 'item_reference', id: 'msg_1' }] }, 'input'],
      [{}, 'input'],
      [{ input: 'x', frobnicate: 1 }, 'frobnicate'],
      [{ input: 'x', max_output_tokens: 0 }, 'max_output_tokens'],
      [{ input: 'x', temperature: -1 }, 'temperature'],
    ];
    for (const [extra, param] of cases) {
      await assert.rejects(c.responses.create({ model: MODEL, ...extra }), (e) => {
        assert.equal(e.status, 400, JSON.stringify(extra));
        assert.equal(e.param, param, `${JSON.stringify(extra)}: ${e.message}`);
        return true;
      });
    }
  });
});
