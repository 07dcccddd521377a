// HTTPS (`serve --ssl-keyfile KEY --ssl-certfile CERT`, vLLM's flags): the official openai
// client, verifying the server against the certificate (NODE_EXTRA_CA_CERTS in a child node),
// gets the same chat answers, plain and streamed, as from a plain-HTTP server; plain HTTP to
// the TLS port gets no answer; a key that does not match the certificate, an unreadable file
// or a lone flag is a one-line error before the model loads.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { binary, repoRoot, startServer } from './server_lib.mjs';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mlaserve-tls-'));
const file = (n) => path.join(dir, n);
let tls, plain;

function makePair(name, cn, san) {
  const r = spawnSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
    '-keyout', file(`${name}.key`), '-out', file(`${name}.crt`), '-days', '2', '-subj', `/CN=${cn}`,
    ...(san ? ['-addext', `subjectAltName=${san}`] : [])], { encoding: 'utf8' });
  assert.equal(r.status, 0, `openssl (scripts/install-deps.sh installs it): ${r.error ?? r.stderr}`);
}

before(async () => {
  makePair('a', '127.0.0.1', 'IP:127.0.0.1');
  makePair('b', 'other', null);
  [tls, plain] = await Promise.all([
    startServer(['--ssl-keyfile', file('a.key'), '--ssl-certfile', file('a.crt')]),
    startServer([]),
  ]);
});
after(async () => {
  for (const s of [tls, plain]) if (s) assert.equal((await s.stop()).code, 0, s.log().slice(-2000));
  fs.rmSync(dir, { recursive: true, force: true });
});

// a chat completion and the same one streamed, through the openai client in a child node
// that trusts only the system's CAs plus CA (if given)
const SCRIPT = `
import OpenAI from 'openai';
const c = new OpenAI({ baseURL: process.argv[1], apiKey: 'unused', maxRetries: 0, timeout: 30000 });
const req = { model: 'tiny-v3', messages: [{ role: 'user', content: 'hello there' }], max_tokens: 12, temperature: 0 };
const r = await c.chat.completions.create(req);
let streamed = '';
for await (const ch of await c.chat.completions.create({ ...req, stream: true })) streamed += ch.choices[0]?.delta?.content ?? '';
console.log(JSON.stringify({ text: r.choices[0].message.content, streamed, usage: r.usage }));
`;
function ask(base, ca) {
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', SCRIPT, `${base}/v1`], {
    cwd: path.join(repoRoot, 'tests', 'e2e'), encoding: 'utf8', timeout: 60000,
    env: { ...process.env, NODE_TLS_REJECT_UNAUTHORIZED: '', ...(ca ? { NODE_EXTRA_CA_CERTS: ca } : {}) },
  });
  return { ok: r.status === 0, out: r.status === 0 ? JSON.parse(r.stdout) : null, err: r.stderr };
}

test('https: the openai client gets the answers of a plain-HTTP server', () => {
  assert.match(tls.log(), /on https:\/\/127\.0\.0\.1:\d+\/v1/);
  const secure = ask(`https://127.0.0.1:${tls.port}`, file('a.crt'));
  assert.ok(secure.ok, secure.err);
  const ref = ask(plain.base, null);
  assert.ok(ref.ok, ref.err);
  assert.ok(secure.out.text.length > 0);
  assert.deepEqual(secure.out, ref.out);
  assert.equal(secure.out.streamed, secure.out.text);
});

test('https: a client that does not trust the certificate is refused', () => {
  const r = ask(`https://127.0.0.1:${tls.port}`, null);
  assert.ok(!r.ok, 'an untrusted self-signed certificate was accepted');
});

test('https: plain HTTP to the TLS port gets no HTTP answer', async () => {
  let answered = false;
  try {
    const res = await fetch(`http://127.0.0.1:${tls.port}/health`, { signal: AbortSignal.timeout(5000) });
    answered = res.ok;
  } catch {
    answered = false;
  }
  assert.equal(answered, false);
});

test('https: bad key or certificate files are one-line errors before the model loads', () => {
  const cases = [
    [['--ssl-keyfile', file('b.key'), '--ssl-certfile', file('a.crt')], 'does not match the certificate'],
    [['--ssl-keyfile', file('missing.key'), '--ssl-certfile', file('a.crt')], 'cannot open'],
    [['--ssl-keyfile', file('a.crt'), '--ssl-certfile', file('a.crt')], 'not a PEM private key'],
    [['--ssl-certfile', file('a.crt')], '--ssl-certfile needs --ssl-keyfile'],
    [['--ssl-ca-certs', file('a.crt')], 'client certificates are not supported'],
  ];
  for (const [args, want] of cases) {
    const t0 = Date.now();
    const r = spawnSync(binary, ['serve', '--port', '0', ...args], { cwd: repoRoot, encoding: 'utf8', timeout: 30000 });
    assert.notEqual(r.status, 0, args.join(' '));
    const lines = r.stderr.trim().split('\n');
    assert.equal(lines.length, 1, r.stderr);
    assert.ok(lines[0].includes(want), `${args.join(' ')}: ${r.stderr}`);
    assert.ok(Date.now() - t0 < 10000);
  }
});
