// Kimi's tokenizer (tiktoken.model, src/tok/tiktoken.c) against tiktoken itself: the `tiktoken`
// npm package is tiktoken's Rust core (CoreBPE, fancy-regex) built to WASM, given Kimi's
// pattern exactly as tokenization_kimi.py writes it, the rank file of tests/fixtures/kimi-tok
// and its 256 reserved special ids. tokenization_kimi.py's encode() (400k-character chunks,
// runs of whitespace / non-whitespace cut at 25000 characters, allowed_special="all") is
// written out below over that core. `mlaserve tokenize` must give the same ids on a varied
// corpus, and `mlaserve detokenize` must give the text back byte for byte.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { binary, repoRoot } from './server_lib.mjs';

const DIR = path.join(repoRoot, 'tests/fixtures/kimi-tok');

let Tiktoken = null;
try {
  ({ Tiktoken } = await import('tiktoken'));
} catch {
  // an older `npm ci` without the devDependency: nothing to compare against
}

// tokenization_kimi.py's pat_str, verbatim (fancy-regex syntax)
const KIMI_PATTERN = [
  String.raw`[\p{Han}]+`,
  String.raw`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?`,
  String.raw`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?`,
  String.raw`\p{N}{1,3}`,
  String.raw` ?[^\s\p{L}\p{N}]+[\r\n]*`,
  String.raw`\s*[\r\n]+`,
  String.raw`\s+(?!\S)`,
  String.raw`\s+`,
].join('|');

function kimiEncoding() {
  const ranks = fs.readFileSync(path.join(DIR, 'tiktoken.model'), 'utf8');
  const nRanks = ranks.split('\n').filter((l) => l).length;
  const cfg = JSON.parse(fs.readFileSync(path.join(DIR, 'tokenizer_config.json'), 'utf8'));
  const specials = {};
  for (let id = nRanks; id < nRanks + 256; id++)
    specials[cfg.added_tokens_decoder[String(id)]?.content ?? `<|reserved_token_${id}|>`] = id;
  return new Tiktoken(ranks, specials, KIMI_PATTERN);
}

// Python's str.isspace
const isSpace = (c) => {
  const x = c.codePointAt(0);
  return (x >= 0x09 && x <= 0x0d) || (x >= 0x1c && x <= 0x20) || x === 0x85 || x === 0xa0 || x === 0x1680 ||
    (x >= 0x2000 && x <= 0x200a) || x === 0x2028 || x === 0x2029 || x === 0x202f || x === 0x205f || x === 0x3000;
};

// tokenization_kimi.py's encode(text), characters counted in code points as Python does
function kimiEncode(enc, text) {
  const cps = Array.from(text);
  const ids = [];
  for (let i = 0; i < cps.length; i += 400000) {
    const s = cps.slice(i, i + 400000);
    let runLen = 0, runSpace = s.length ? isSpace(s[0]) : false, start = 0;
    const slices = [];
    for (let j = 0; j < s.length; j++) {
      const sp = isSpace(s[j]);
      if (runSpace !== sp) {
        runLen = 1;
        runSpace = sp;
      } else if (++runLen > 25000) {
        slices.push(s.slice(start, j).join(''));
        start = j;
        runLen = 1;
      }
    }
    slices.push(s.slice(start).join(''));
    for (const sl of slices) for (const id of enc.encode(sl, 'all')) ids.push(id);
  }
  return ids;
}

const CORPUS = {
  prose: 'The quick brown fox jumps over the lazy dog. It\'s what they\'d said; we\'ll see, you\'re right, I\'m sure.\n' +
    'DON\'T SHOUT, they\'RE LISTENING. McDonald\'s iPhone macOS HTTPServer XMLHttpRequest ÉCOLE naïve façade.',
  code: 'static int foo(const char *s, size_t n)\n{\n\tfor (size_t i = 0; i < n; i++)\n\t\tif (s[i] == \'\\n\') return -1;\n' +
    '\treturn 0; // done\n}\n\ndef f(x):\n    return {"a": [1, 2, 3], \'b\': x ** 2}  # comment\n\r\n',
  han: '大型语言模型的推理服务器把文本切成词元。今天下雨了，我们不去公园；明天再说！这是一个很长的汉字串没有任何标点符号也没有空格直到这里才结束',
  cjk_mixed: '日本語の文章：東京タワーは高い。カタカナとひらがな、漢字。한국어 문장입니다. 模型model推理inference 2026年12月7日',
  han_punct: '中文。你好、世界〃〆〇〡〢 々 ㈠㈡ 「引号」『书名』（括号）',
  emoji: '🙂😀 🚀🎉 👍🏽 👨‍👩‍👧‍👦 ❤️ 🇫🇷🇯🇵 ✨ a🙂b 1🙂2 🙂\n🙂',
  whitespace: 'a  b   c\t\td\n\ne \r\n f\u00a0g\u3000h\u2003i \u0085 j\u180ek    \n   \n\t\n  end   ',
  specials: '<|im_system|>system<|im_middle|>You are Kimi.<|im_end|><|im_user|>user<|im_middle|>hi<|im_end|>' +
    '[BOS][EOS]<|reserved_token_4200|> <|im_end <|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{}' +
    '<|tool_call_end|><think>x</think>[UNK][PAD]<|im_end|>',
  digits: '1 12 123 1234 12345 123456789 3.14159 -42 1e10 0x1F ٣٤٥ १२३ ¾ ⅷ 1,000,000',
  long_words: 'pneumonoultramicroscopicsilicovolcanoconiosis Donaudampfschifffahrtsgesellschaftskapitän ' +
    'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa supercalifragilisticexpialidocious',
  scripts: 'Ελληνικά Русский язык עברית العربية हिन्दी ไทย ქართული Ǆǅǆ ǈ ﬁ ß ẞ İstanbul ſ K',
  marks: 'e\u0301 a\u0300\u0316 \u0915\u093f \u0301alone \u20dd \u302a\u302b',
  contractions: "it's IT'S it'S it'ſ 'll 'LL x'd y're z've m'm 's ' '",
  run_25000: 'the'.repeat(10000) + ' tail', // cut at 25000 inside a token
  space_run_25000: 'a' + ' '.repeat(26000) + 'b',
  chunk_400k: 'hello world '.repeat(40000),
};

function run(args, input) {
  const r = spawnSync(binary, args, { encoding: 'utf8', input, maxBuffer: 64 << 20 });
  assert.equal(r.status, 0, `mlaserve ${args[0]} failed: ${r.stderr}`);
  return r.stdout;
}

test('mlaserve tokenize = tiktoken with Kimi\'s pattern, and detokenize gives the text back', { skip: !Tiktoken && 'the tiktoken npm package is not installed (cd tests/e2e && npm ci)' }, () => {
  const enc = kimiEncoding();
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kimi-tok-'));
  try {
    const all = Object.values(CORPUS).slice(0, -3).join('\n');
    for (const [name, text] of [...Object.entries(CORPUS), ['all', all]]) {
      const file = path.join(tmp, `${name}.txt`);
      fs.writeFileSync(file, text);
      const want = kimiEncode(enc, text);
      const got = JSON.parse(run(['tokenize', DIR, '--file', file]));
      assert.deepEqual(got, want, `${name}: ids differ`);
      const back = Buffer.from(enc.decode(Uint32Array.from(got)));
      assert.ok(back.equals(Buffer.from(text)), `${name}: tiktoken's decode of the ids is not the text`);
      if (text.length < 100000) {
        const ours = run(['detokenize', DIR, '--ids', got.join(',')]);
        assert.equal(ours, text + '\n', `${name}: mlaserve detokenize is not the text (and a newline)`);
      }
    }
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
    enc.free();
  }
});
