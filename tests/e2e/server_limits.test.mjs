// Limits and lifecycle: the API key (flag and environment), oversized bodies (413), a full
// waiting queue (503), idle / slow connections closed by the timeout, and a graceful SIGTERM
// that aborts an in-flight stream cleanly and exits 0.
import assert from 'node:assert/strict';
import net from 'node:net';
import { describe, test } from 'node:test';
import OpenAI from 'openai';
import { metrics, parseSSE, rawRequest, startServer, waitIdle } from './server_lib.mjs';

const MSG = [{ role: 'user', content: 'Hi' }];

async function withServer(args, opts, fn) {
  const srv = await startServer(args, opts);
  try {
    await fn(srv);
  } finally {
    const r = await srv.stop();
    assert.equal(r.code, 0, `exit status ${JSON.stringify(r)}\n${srv.log().slice(-2000)}`);
  }
}

describe('api key', () => {
  test('--api-key guards /v1 only; the key is checked exactly', async () => {
    await withServer(['--api-key', 's3cret'], {}, async (srv) => {
      for (const key of [undefined, 'wrong', 's3cret2', 's3cre']) {
        const headers = key ? { authorization: `Bearer ${key}` } : {};
        const r = await fetch(`${srv.base}/v1/models`, { headers });
        assert.equal(r.status, 401, `key ${key}`);
        const j = await r.json();
        assert.equal(j.error.message, 'Unauthorized');
        assert.equal(j.error.code, 401);
      }
      const r = await fetch(`${srv.base}/v1/chat/completions`, { method: 'POST', body: '{' });
      assert.equal(r.status, 401, 'auth is checked before the body');
      await assert.rejects(srv.client({ apiKey: 'nope' }).models.list(), (e) => e instanceof OpenAI.AuthenticationError);
      const good = srv.client({ apiKey: 's3cret' });
      assert.equal((await good.models.list()).data.length, 1);
      const c = await good.chat.completions.create({ model: 'tiny-v3', messages: MSG, max_tokens: 2 });
      assert.equal(c.choices.length, 1);
      for (const path of ['/health', '/metrics', '/version'])
        assert.equal((await fetch(`${srv.base}${path}`)).status, 200, path);
      assert.equal((await fetch(`${srv.base}/tokenize`, { method: 'POST', body: '{"prompt":"a"}' })).status, 200);
    });
  });

  test('MLASERVE_API_KEY sets the key too', async () => {
    await withServer([], { env: { MLASERVE_API_KEY: 'envkey' } }, async (srv) => {
      assert.equal((await fetch(`${srv.base}/v1/models`)).status, 401);
      const r = await fetch(`${srv.base}/v1/models`, { headers: { authorization: 'Bearer envkey' } });
      assert.equal(r.status, 200);
    });
  });
});

describe('limits', () => {
  test('413 for oversized bodies, 503 when the queue is full, idle connections closed', async () => {
    const args = ['--max-request-body-bytes', '64KiB', '--max-num-seqs', '1', '--max-waiting-requests', '1', '--http-timeout', '2'];
    await withServer(args, {}, async (srv) => {
      // a body over the limit: drained, then a JSON 413
      const big = JSON.stringify({ prompt: 'x'.repeat(100 * 1024), max_tokens: 1 });
      let r = await fetch(`${srv.base}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: big });
      assert.equal(r.status, 413);
      const j = await r.json();
      assert.equal(j.error.code, 413);
      assert.equal(j.error.type, 'RequestEntityTooLargeError');
      // far over the limit: answered (or cut) without reading it all
      const huge = `POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${10 << 20}\r\n\r\n{"prompt":"`;
      const h = await rawRequest(srv.port, huge, { timeoutMs: 5000 });
      assert.equal(h.status, 413);
      assert.ok(!h.timedOut);
      // just under the limit is fine
      r = await fetch(`${srv.base}/v1/completions`, { method: 'POST', body: JSON.stringify({ prompt: 'y'.repeat(100), max_tokens: 1 }) });
      assert.equal(r.status, 200, await r.text());

      // one running + one waiting: more concurrent requests are refused with 503
      const post = () => fetch(`${srv.base}/v1/completions`, {
        method: 'POST',
        body: JSON.stringify({ prompt: 'queue test', max_tokens: 300, ignore_eos: true }),
      }).then(async (res) => ({ status: res.status, body: await res.json() }));
      const results = await Promise.all(Array.from({ length: 6 }, post));
      const statuses = results.map((x) => x.status);
      assert.ok(statuses.includes(200), JSON.stringify(statuses));
      assert.ok(statuses.includes(503), JSON.stringify(statuses));
      for (const x of results) {
        if (x.status === 503) {
          assert.equal(x.body.error.type, 'ServiceUnavailableError');
          assert.equal(x.body.error.code, 503);
        } else {
          assert.equal(x.body.usage.completion_tokens, 300);
        }
      }
      await waitIdle(srv.base);

      // a client that sends half a request and goes quiet is closed after --http-timeout
      const t0 = Date.now();
      const idle = await new Promise((resolve) => {
        const s = net.connect(srv.port, '127.0.0.1');
        s.on('error', () => {});
        s.on('close', () => resolve(Date.now() - t0));
        s.write('GET /health HTTP/1.1\r\nHo');
      });
      assert.ok(idle >= 1500 && idle < 8000, `closed after ${idle} ms`);
      const nul = await rawRequest(srv.port, '\x00\x01\x02\r\n\r\n', { timeoutMs: 8000 });
      assert.ok(!nul.timedOut, 'a request line that never completes is closed by the timeout');
      // and the server still answers
      r = await fetch(`${srv.base}/v1/completions`, { method: 'POST', body: JSON.stringify({ prompt: 'ok', max_tokens: 2 }) });
      assert.equal(r.status, 200);
    });
  });
});

describe('slow first token', () => {
  test('a stream that waits longer than --http-timeout for its first token is kept open and answered whole', async () => {
    // one sequence at a time: the stream waits behind 60 others; it gets SSE comments while it
    // waits (libmicrohttpd closes a connection idle for the timeout: the answer came back empty)
    await withServer(['--max-num-seqs', '1', '--http-timeout', '1', '--max-waiting-requests', '100'], {}, async (srv) => {
      // The others are queued first, ten at a time, each ten once the server has them: this
      // client, opening all 60 connections at once on a 2-core VM, sent some of the requests
      // over a second after connecting, and the server closed those connections as idle, as
      // --http-timeout 1 asks. The first fetch loads node's HTTP client.
      await (await fetch(`${srv.base}/v1/models`)).json();
      const seen = async () => Object.entries((await metrics(srv.base)).values)
        .filter(([k]) => /^vllm:(num_requests_waiting|num_requests_running|request_success_total)\{/.test(k))
        .reduce((n, [, v]) => n + v, 0);
      const ahead = [];
      for (let b = 0; b < 6; b++) {
        for (let i = 0; i < 10; i++) {
          const p = fetch(`${srv.base}/v1/completions`, {
            method: 'POST', body: JSON.stringify({ prompt: 'wait', max_tokens: 400, ignore_eos: true }),
          }).then((r) => r.json());
          p.catch(() => {}); // awaited below; a failure fails the test there
          ahead.push(p);
        }
        for (let i = 0; i < 400 && (await seen()) < ahead.length; i++) await new Promise((resolve) => setTimeout(resolve, 5));
      }
      const t0 = Date.now();
      const res = await fetch(`${srv.base}/v1/completions`, {
        method: 'POST', headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ prompt: 'hi', max_tokens: 20, ignore_eos: true, stream: true, stream_options: { include_usage: true } }),
      });
      assert.equal(res.status, 200);
      const text = await res.text();
      const { events, done } = parseSSE(text);
      const ttftMs = Date.now() - t0;
      assert.ok(ttftMs >= 1500, `the stream waited only ${ttftMs} ms: the test needs longer than the timeout`);
      assert.ok(done, `no [DONE] after ${ttftMs} ms: ${JSON.stringify(text.slice(0, 300))}`);
      // (events may merge tokens when the reader lags: counted by the usage)
      assert.equal(events.at(-1).usage?.completion_tokens, 20, JSON.stringify(events.at(-1)));
      assert.deepEqual(events.flatMap((e) => e.choices ?? []).map((c) => c.finish_reason).filter(Boolean), ['length']);
      assert.match(text, /^: keep-alive\n\n/m);
      // and through the official client, which skips the comments
      let usage = null;
      const stream = await srv.client().completions.create({
        model: 'tiny-v3', prompt: 'hi', max_tokens: 5, ignore_eos: true, stream: true, stream_options: { include_usage: true },
      });
      for await (const c of stream) usage = c.usage ?? usage;
      assert.equal(usage?.completion_tokens, 5);
      for (const r of await Promise.all(ahead)) assert.equal(r.usage.completion_tokens, 400);
    });
  });
});

describe('shutdown', () => {
  test('SIGTERM aborts an in-flight stream cleanly and exits 0', async () => {
    const srv = await startServer(['--max-num-seqs', '2']);
    const res = await fetch(`${srv.base}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ messages: MSG, max_tokens: 480, ignore_eos: true, stream: true }),
    });
    assert.equal(res.status, 200);
    const reader = res.body.getReader();
    let text = '';
    const dec = new TextDecoder();
    const first = await reader.read();
    text += dec.decode(first.value, { stream: true });
    srv.proc.kill('SIGTERM');
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += dec.decode(value, { stream: true });
    }
    const { events, done } = parseSSE(text);
    assert.ok(done, 'the stream still ends with [DONE]');
    const fin = events.filter((e) => e.choices[0]?.finish_reason).map((e) => e.choices[0].finish_reason);
    assert.ok(fin.length === 1 && ['abort', 'length'].includes(fin[0]), JSON.stringify(fin));
    const { code } = await srv.stop(); // already exiting: waits, then checks the log
    assert.equal(code, 0, srv.log().slice(-1500));
    assert.match(srv.log(), /SIGTERM: shutting down/);
    // the port no longer accepts connections
    await assert.rejects(fetch(`${srv.base}/health`));
  });
});
