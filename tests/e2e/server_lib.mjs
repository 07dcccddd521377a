// Helpers for the end-to-end tests: start the real `mlaserve serve` binary on a free
// loopback port (--port 0; the bound port is read from its start-up log line), stop it with
// SIGTERM, read /metrics, speak raw HTTP when a test needs malformed input, tokenize, copy a
// fixture without its chat template.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';

const here = path.dirname(fileURLToPath(import.meta.url));
export const repoRoot = path.resolve(here, '..', '..');
export const binary = path.resolve(repoRoot, process.env.BUILD || 'build', 'mlaserve');

export async function startServer(args = [], { env = {}, timeoutMs = 60000 } = {}) {
  const proc = spawn(binary, ['serve', '--host', '127.0.0.1', '--port', '0', ...args], {
    cwd: repoRoot,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let log = '';
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${log}`)), timeoutMs);
    proc.stderr.on('data', (d) => {
      log += d.toString();
      const m = log.match(/on https?:\/\/127\.0\.0\.1:(\d+)\/v1/);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`server exited (${code ?? signal}) before listening:\n${log}`));
    });
  });
  const base = `http://127.0.0.1:${port}`;
  return {
    proc,
    port,
    base,
    log: () => log,
    exited,
    client: (opts = {}) =>
      new OpenAI({ baseURL: `${base}/v1`, apiKey: opts.apiKey ?? 'unused', maxRetries: 0, timeout: 60000 }),
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
      const r = await exited;
      // sanitizer builds (BUILD=build-asan): any report fails the test that owns the server
      const bad = log.match(/.*(runtime error:|ERROR: \w+Sanitizer|WARNING: ThreadSanitizer).*/);
      if (bad) throw new Error(`sanitizer report from the server: ${bad[0]}\n${log.slice(-3000)}`);
      return r;
    },
  };
}

// Prometheus text -> {name{labels}: value}; also checks the exposition basics.
export async function metrics(base) {
  const res = await fetch(`${base}/metrics`);
  const text = await res.text();
  const out = {};
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const i = line.lastIndexOf(' ');
    out[line.slice(0, i)] = Number(line.slice(i + 1));
  }
  return { text, values: out };
}

// Value of the first sample whose name (before '{') is `name` and whose labels contain `has`.
export function metric(values, name, has = '') {
  for (const [k, v] of Object.entries(values)) {
    const n = k.split('{')[0];
    if (n === name && k.includes(has)) return v;
  }
  return undefined;
}

// Polls until every request finished and every KV block is free (blocks free at the next
// engine step after a finish or cancel).
export async function waitIdle(base, timeoutMs = 5000) {
  const t0 = Date.now();
  let v;
  for (;;) {
    ({ values: v } = await metrics(base));
    const running = metric(v, 'vllm:num_requests_running');
    const waiting = metric(v, 'vllm:num_requests_waiting');
    const kv = metric(v, 'vllm:kv_cache_usage_perc');
    if (running === 0 && waiting === 0 && kv === 0) return v;
    if (Date.now() - t0 > timeoutMs)
      throw new Error(`not idle after ${timeoutMs} ms: running ${running}, waiting ${waiting}, kv ${kv}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

// One raw HTTP/1.1 exchange over a socket (for bytes fetch would not send). Resolves with
// {status, head, body} parsed from whatever the server sent before closing; status 0 when it
// sent nothing, timedOut when it kept the connection open past timeoutMs (then closed here).
export function rawRequest(port, bytes, { timeoutMs = 10000 } = {}) {
  return new Promise((resolve) => {
    const sock = net.connect(port, '127.0.0.1');
    const chunks = [];
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      sock.destroy();
    }, timeoutMs);
    sock.on('data', (d) => chunks.push(d));
    sock.on('error', () => {});
    sock.on('close', () => {
      clearTimeout(timer);
      const text = Buffer.concat(chunks).toString('latin1');
      const m = text.match(/^HTTP\/1\.[01] (\d{3})/);
      const sep = text.indexOf('\r\n\r\n');
      resolve({ status: m ? Number(m[1]) : 0, head: text.slice(0, sep), body: text.slice(sep + 4), timedOut });
    });
    sock.write(bytes);
  });
}

// Parses an SSE body into the JSON payloads (and a flag for the [DONE] terminator).
export function parseSSE(text) {
  const events = [];
  let done = false;
  for (const raw of text.split('\n\n')) {
    // comment lines (": keep-alive") are skipped, as SSE clients skip them
    const block = raw.split('\n').filter((l) => !l.startsWith(':')).join('\n');
    if (!block.trim()) continue;
    if (!block.startsWith('data: ')) throw new Error(`bad SSE block: ${JSON.stringify(block)}`);
    const data = block.slice(6);
    if (data === '[DONE]') done = true;
    else events.push(JSON.parse(data));
  }
  return { events, done };
}

// Deterministic token-id prompts of mixed lengths (vocab 1024; id 0 = BOS, 1 = EOS).
export function idPrompt(seed, len) {
  let x = seed * 2654435761 % 4294967296;
  const ids = [0];
  for (let i = 1; i < len; i++) {
    x = (x * 1103515245 + 12345) % 2147483648;
    ids.push(2 + (x % 1000));
  }
  return ids;
}

// A copy of tests/fixtures/NAME (its golden/ left out) in a fresh temporary folder, without the
// chat_template of its tokenizer_config.json: as DeepSeek ships V3.2 and V4, whose prompts the
// server's native encoders render. Returns the folder (the caller removes it).
export function fixtureWithoutTemplate(name) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `${name}-`));
  const src = path.join(repoRoot, 'tests/fixtures', name);
  for (const f of fs.readdirSync(src)) if (f !== 'golden') fs.copyFileSync(path.join(src, f), path.join(dir, f));
  const cfgPath = path.join(dir, 'tokenizer_config.json');
  const cfg = JSON.parse(fs.readFileSync(cfgPath, 'utf8'));
  delete cfg.chat_template;
  fs.writeFileSync(cfgPath, JSON.stringify(cfg));
  return dir;
}

// POST /tokenize on a server's base URL: the token ids of body ({prompt} or {messages}) for model.
export async function tokenize(base, model, body) {
  const res = await fetch(`${base}/tokenize`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, ...body }),
  });
  if (res.status !== 200) throw new Error(`/tokenize: ${res.status} ${await res.text()}`);
  return (await res.json()).tokens;
}
