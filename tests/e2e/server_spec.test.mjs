// Speculative decoding (--speculative-config: n-gram prompt lookup, and deepseek_mtp on
// tiny-v3-mtp, i.e. tiny-v3 with an MTP module) through the official openai client: a server
// with drafts answers every request with the text, tokens, logprobs and finish reason of a
// server without them (greedy, seeded sampling, stop strings, n = 2, streaming), reports
// vLLM's spec_decode counters in /metrics, and a bad config is a one-line start-up error.
// Logit biases on a few tokens make the tiny random model repeat itself (and steer the MTP
// drafts), so drafts are both kept and rejected. The engine side is
// tests/unit/test_engine_spec.c.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { binary, metric, metrics, parseSSE, repoRoot, startServer, waitIdle } from './server_lib.mjs';

const MODEL = 'tiny-v3';
const SPEC = '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 1, "prompt_lookup_max": 3}';
let plain, spec, mtp;

before(async () => {
  [plain, spec, mtp] = await Promise.all([
    startServer(['--served-model-name', MODEL]),
    startServer(['--served-model-name', MODEL, '--speculative-config', SPEC]),
    // three drafts per step: the first from the model's hidden state, two chained passes
    startServer(['tests/fixtures/tiny-v3-mtp', '--served-model-name', MODEL, '--speculative-config',
      '{"method": "deepseek_mtp", "num_speculative_tokens": 3}']),
  ]);
});
after(async () => {
  for (const s of [plain, spec, mtp]) {
    const r = await s.stop();
    assert.equal(r.code, 0, `exit status ${JSON.stringify(r)}\n${s.log().slice(-2000)}`);
  }
});

const bias = (ids) => Object.fromEntries(ids.map((t) => [String(t), 30]));
const REQUESTS = [
  { prompt: 'a b a b a', max_tokens: 40, temperature: 0, logit_bias: bias([100, 107, 114]), logprobs: 2 },
  { prompt: 'one two', max_tokens: 33, temperature: 1, seed: 7, logit_bias: bias([200, 207]), logprobs: 1 },
  { prompt: 'x y z', max_tokens: 40, temperature: 0.8, seed: 3, n: 2, logit_bias: bias([300, 307, 314]) },
  { prompt: 'tell me', max_tokens: 24, temperature: 0 },
  { prompt: 'stop here', max_tokens: 40, temperature: 0, logit_bias: bias([400, 407]), stop_token_ids: [407], min_tokens: 4 },
];

describe('speculative decoding', () => {
  test('the log names it', () => {
    assert.match(spec.log(), /speculative decoding: ngram, 3 draft tokens per step, n-grams of 1 to 3 tokens/);
    assert.match(mtp.log(), /MTP module: layer 3/);
    assert.match(mtp.log(), /speculative decoding: deepseek_mtp, the checkpoint's MTP layer drafts 3 tokens per step/);
  });

  for (const which of ['ngram', 'mtp']) test(`completions equal those of a server without drafts (${which})`, async () => {
    const server = which === 'mtp' ? mtp : spec;
    for (const body of REQUESTS) {
      const [a, b] = await Promise.all(
        [plain, server].map((s) => s.client().completions.create({ model: MODEL, ...body })),
      );
      assert.equal(b.choices.length, a.choices.length);
      for (let i = 0; i < a.choices.length; i++) {
        assert.equal(b.choices[i].text, a.choices[i].text, JSON.stringify(body));
        assert.equal(b.choices[i].finish_reason, a.choices[i].finish_reason);
        if (a.choices[i].logprobs) {
          assert.deepEqual(b.choices[i].logprobs.tokens, a.choices[i].logprobs.tokens);
          const close = (x, y) => x.every((v, k) => Math.abs(v - y[k]) < 1e-3);
          assert.ok(close(b.choices[i].logprobs.token_logprobs, a.choices[i].logprobs.token_logprobs));
        }
      }
      assert.deepEqual(b.usage, a.usage);
    }
  });

  test('a stop string and a streamed chat equal those without drafts', async () => {
    const first = await plain.client().completions.create({ model: MODEL, prompt: 'abc', max_tokens: 30, temperature: 0 });
    const text = first.choices[0].text;
    const stop = text.slice(Math.floor(text.length / 2), Math.floor(text.length / 2) + 2);
    const req = { model: MODEL, prompt: 'abc', max_tokens: 30, temperature: 0, stop: [stop] };
    const [a, b, c] = await Promise.all([plain, spec, mtp].map((s) => s.client().completions.create(req)));
    assert.equal(b.choices[0].text, a.choices[0].text);
    assert.equal(b.choices[0].finish_reason, 'stop');
    assert.equal(c.choices[0].text, a.choices[0].text);
    assert.equal(c.choices[0].finish_reason, 'stop');
    const chat = {
      model: MODEL,
      messages: [{ role: 'user', content: 'repeat after me' }],
      max_tokens: 40,
      temperature: 0,
      logit_bias: bias([500, 507]),
    };
    const whole = await plain.client().chat.completions.create(chat);
    for (const server of [spec, mtp]) {
      const stream = await server.client().chat.completions.create({ ...chat, stream: true });
      let streamed = '', finish = null;
      for await (const c of stream) {
        streamed += c.choices[0]?.delta?.content ?? '';
        finish = c.choices[0]?.finish_reason ?? finish;
      }
      assert.equal(streamed, whole.choices[0].message.content);
      assert.equal(finish, whole.choices[0].finish_reason);
    }
  });

  test('/metrics counts drafts and kept drafts', async () => {
    for (const s of [spec, mtp]) {
      const v = await waitIdle(s.base);
      const drafts = metric(v, 'vllm:spec_decode_num_draft_tokens_total');
      const kept = metric(v, 'vllm:spec_decode_num_accepted_tokens_total');
      assert.ok(drafts > 0 && kept > 0 && kept < drafts, `${kept} of ${drafts}`);
    }
    // a chained MTP draft (the second of a step) is kept now and then
    const second = metric(await waitIdle(mtp.base), 'vllm:spec_decode_num_accepted_tokens_per_pos_total', 'position="1"');
    assert.ok(second > 0, `second drafts kept: ${second}`);
    const v = await waitIdle(spec.base);
    assert.ok(metric(v, 'vllm:spec_decode_num_accepted_tokens_per_pos_total', 'position="2"') >= 0);
    const { text } = await metrics(plain.base);
    assert.ok(!text.includes('spec_decode'), 'no spec_decode family without drafts');
  });

  test('a bad --speculative-config is a one-line start-up error', () => {
    for (const [cfg, want] of [
      ['{"method": "deepseek_mtp", "num_speculative_tokens": 1}', /deepseek_mtp needs the checkpoint's MTP layer, and num_nextn_predict_layers is 0/],
      ['{"method": "deepseek_mtp", "num_speculative_tokens": 16}', /"num_speculative_tokens" must be an integer in \[1, 15\]/],
      ['{"method": "eagle", "num_speculative_tokens": 1}', /method "eagle" is not supported/],
      ['{"method": "ngram"}', /"num_speculative_tokens" is required/],
      ['ngram', /not a JSON object/],
    ]) {
      const r = spawnSync(binary, ['serve', 'tests/fixtures/tiny-v3', '--port', '0', '--speculative-config', cfg], {
        cwd: repoRoot,
        encoding: 'utf8',
        timeout: 30000,
      });
      assert.notEqual(r.status, 0);
      assert.match(r.stderr, want);
      assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
    }
  });
});
