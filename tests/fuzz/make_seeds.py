#!/usr/bin/env python3
"""Writes the seed inputs of the fuzz targets (tests/fuzz/corpus/NAME/seed-*): valid and
nearly valid examples of what each target parses, from which libFuzzer mutates. Inputs that
once failed live beside them as crash-* files, and inputs libFuzzer found that reach new code
(a sample of a -merge=1 run) as gen-* files; both are kept by hand. Run from the repository
root: python3 tests/fuzz/make_seeds.py"""
import json, os, random, struct

ROOT = "tests/fuzz/corpus"
FIX = "tests/fixtures"


def put(name, i, data):
    d = os.path.join(ROOT, name)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, "seed-%03d" % i), "wb") as f:
        f.write(data)


def dumps(v):
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"))


# ---- request: byte 0 = endpoint (0 chat, 1 completions, 2 responses), body, NUL, output ----
msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
tools = [{"type": "function", "function": {"name": "get_weather", "description": "w",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
          "age": {"type": "integer", "minimum": 0, "maximum": 120},
          "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 3}}, "required": ["name"]}
requests = [
    (0, {"model": "m", "messages": msgs}, ""),
    (0, {"model": "m", "messages": msgs, "max_tokens": 5, "temperature": 0.7, "top_p": 0.9, "top_k": 4,
         "min_p": 0.1, "seed": 3, "n": 2, "stop": ["\n", "x"], "logprobs": True, "top_logprobs": 3,
         "presence_penalty": 0.5, "frequency_penalty": 0.5, "repetition_penalty": 1.1,
         "stream": True, "stream_options": {"include_usage": True}}, ""),
    (0, {"model": "m", "messages": msgs, "response_format": {"type": "json_schema",
         "json_schema": {"name": "p", "schema": schema}}}, '{"name":"Al","age":3,"tags":["a"]}'),
    (0, {"model": "m", "messages": msgs, "response_format": {"type": "json_object"}}, '{"a": [1, {"b": null}]}'),
    (0, {"model": "m", "messages": msgs, "guided_regex": "\\d{3}-[a-z]+"}, "123-abc"),
    (0, {"model": "m", "messages": msgs, "guided_choice": ["yes", "no"]}, "yes"),
    (0, {"model": "m", "messages": msgs, "structured_outputs": {"json": {"type": "array", "items": {"type": "number"}}}},
     "[1.5,-2e3]"),
    (0, {"model": "m", "messages": msgs, "tools": tools, "tool_choice": "auto"}, ""),
    (0, {"model": "m", "messages": msgs, "tools": tools, "tool_choice": "required"},
     '[{"name":"get_weather","parameters":{"city":"Paris"}}]'),
    (0, {"model": "m", "messages": msgs, "tools": tools,
         "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}, '{"city":"Rome"}'),
    (0, {"model": "m", "messages": msgs + [{"role": "assistant", "content": "Hel"}], "continue_final_message": True,
         "add_generation_prompt": False, "echo": True}, ""),
    (0, {"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}],
         "chat_template_kwargs": {"thinking": True}, "bad_words": ["foo", " bar"], "allowed_token_ids": [1, 2, 3],
         "logit_bias": {"5": -100}, "min_tokens": 2, "ignore_eos": True, "priority": -1}, ""),
    (1, {"model": "m", "prompt": "Hello", "max_tokens": 4, "echo": True, "logprobs": 2}, ""),
    (1, {"model": "m", "prompt": [[1, 2, 3], [4, 5]], "n": 2, "best_of": 2, "suffix": None}, ""),
    (1, {"model": "m", "prompt": ["a", "b"], "stop_token_ids": [7], "include_stop_str_in_output": True,
         "truncate_prompt_tokens": 2, "return_tokens_as_token_ids": True, "prompt_logprobs": 1}, ""),
    (2, {"model": "m", "input": "Hi", "instructions": "Be brief.", "max_output_tokens": 8}, ""),
    (2, {"model": "m", "input": [{"role": "user", "content": [{"type": "input_text", "text": "Hi"}]},
         {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
         {"type": "function_call_output", "call_id": "c", "output": "1"}],
         "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}],
         "text": {"format": {"type": "json_schema", "name": "x", "schema": schema}}, "stream": True}, '{"name":"B"}'),
    (0, {"model": "m", "messages": msgs, "guided_grammar": 'root ::= "SELECT " col (", " col)* " FROM " [a-z]+\n'
         'col ::= [a-z_]+ | "*"  # columns'}, "SELECT a, b FROM t"),
    (1, {"model": "m", "prompt": "x", "structured_outputs": {"grammar": 'root ::= item{1,3}\nitem ::= "(" [0-9]{,2} ")"'}},
     "(1)(23)"),
]
for i, (api, body, out) in enumerate(requests):
    put("request", i, bytes([api]) + dumps(body).encode() + (b"\0" + out.encode() if out else b""))

# ---- tokenizer: byte 0 bit 0 tokenizer, bit 1 ids mode, bit 2 add_special / skip_special ----
i = 0
for path in ["tokenizer/tiny-vectors.jsonl", "tokenizer/deepseek-llm-vectors.jsonl"]:
    for line in open(os.path.join(FIX, path), encoding="utf-8"):
        case = json.loads(line)
        which = 0 if path.startswith("tokenizer/tiny") else 1
        put("tokenizer", i, bytes([which | (4 if i % 3 == 0 else 0)]) + case["text"].encode())
        i += 1
        if i % 4 == 0:
            ids = case["ids"]
            put("tokenizer", i, bytes([which | 2 | (4 if i % 8 == 0 else 0)]) +
                b"".join(struct.pack("<H", v % 65536) for v in ids))
            i += 1
put("tokenizer", i, b"\0" + b"bad \xff utf-8")

# ---- template: byte 0 even = source (bit 1 generation prompt, bit 2 kwargs), odd = messages ----
i = 0
for t in sorted(os.listdir(os.path.join(FIX, "templates"))):
    if t.endswith(".jinja"):
        src = open(os.path.join(FIX, "templates", t), "rb").read()
        put("template", i, bytes([2 | 4 * (i % 2)]) + src)
        i += 1
for src in ["{{ messages | length }}{% for m in messages %}{{ m.role | upper }}{% endfor %}",
            "{% set ns = namespace(x=0) %}{% for i in range(3) %}{% set ns.x = ns.x + i %}{% endfor %}{{ ns.x }}",
            "{{ tools | tojson }}{% if thinking is defined and thinking %}T{% endif %}{{ s[1:] ~ l | join(',') }}",
            "{% macro f(a, b=2) %}{{ a * b }}{% endmacro %}{{ f(3) }}{{ '%d' % n if n is number else '' }}",
            "{{ raise_exception('no') }}", "{% for x in messages %}{{ loop.index }}{% else %}e{% endfor %}",
            "{{ (messages[0].content or '').strip().split(' ') | first | replace('B', 'b') }}"]:
    put("template", i, bytes([4]) + src.encode())
    i += 1
conversations = [
    {"messages": msgs + [{"role": "assistant", "content": "<think>hm</think>Hello"}, {"role": "user", "content": "Again"}]},
    {"messages": [{"role": "user", "content": "w?"}, {"role": "assistant", "content": None, "tool_calls": [
        {"type": "function", "id": "1", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "content": "1"}], "kwargs": {"tools": tools}},
    {"messages": [{"role": "user", "content": "x"}], "kwargs": {"thinking": True}},
]
for k, conv in enumerate(conversations):
    for sel in range(3):
        put("template", i, bytes([1 | 2 | 4 * sel]) + dumps(conv).encode())
        i += 1

# ---- guide: byte 0 % 4: 0 schema NUL output, 1 regex NUL text, 2 choices NUL-separated,
# 3 grammar NUL text ----
i = 0
schemas = [(schema, '{"name":"Al","age":3,"tags":["a","b"]}'),
           ({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "boolean"}], "minItems": 1}, "[1,true]"),
           ({"anyOf": [{"type": "string", "pattern": "^[a-z]+$"}, {"type": "number", "minimum": 1.5}, {"const": None}]}, '"abc"'),
           ({"$defs": {"n": {"type": "object", "properties": {"v": {"type": "integer"}, "next": {"$ref": "#/$defs/n"}}}},
             "$ref": "#/$defs/n"}, '{"v":1,"next":{"v":2}}'),
           ({"type": "object", "additionalProperties": {"type": "integer", "exclusiveMaximum": 10}}, '{"a": 1, "b": 9}'),
           ({"enum": ["x", 1, True, {"a": [1]}]}, '{"a":[1]}'),
           ({"type": ["string", "null"], "minLength": 2}, "null"),
           (True, '[ {"x" : "y\\u00e9"} ]')]
for s, out in schemas:
    put("guide", i, b"\0" + dumps(s).encode() + b"\0" + out.encode())
    i += 1
regexes = [("\\d{3}-[a-z]+(x|yz)*", "123-abyz"), ("[^a-c]{2,3}\\.é?", "xy.é"), ("(?P<y>\\d{4})-(0[1-9]|1[0-2])", "2024-11"),
           ("[\\w.-]+@[a-z]+\\.(com|org)", "a.b@c.org"), ("\\s*\\S+", "  x"), ("[€-₿😀]+|\\x41\\u00e9", "Aé"),
           ("^(true|false)$", "true"), ("-?(0|[1-9]\\d*)(\\.\\d+)?([eE][+-]?\\d+)?", "-1.5e3"), ("(a|b)*abb", "aabb"),
           (".{1,3}", "é\n"), ("a+?b*+c??", "aab")]
for r, t in regexes:
    put("guide", i, b"\1" + r.encode() + b"\0" + t.encode())
    i += 1
for ch in [["yes", "no"], ["a", "ab", "abc"], ["é", "e", ""], ["{\"x\":1}"]]:
    put("guide", i, b"\2" + b"\0".join(c.encode() for c in ch))
    i += 1

grammars = [
    ('root ::= expr\nexpr ::= term (("+" | "-") term)*\nterm ::= factor (("*" | "/") factor)*\n'
     'factor ::= number | "(" expr ")"\nnumber ::= [0-9]+', "1+2*(3-4)/5"),
    ('root ::= "SELECT " column " from " table\ncolumn ::= "col_1 " | "col_2 "\ntable ::= "t1" | "t2"', "SELECT col_1  from t2"),
    ('root ::= group*\ngroup ::= "(" root ")" | "[" root "]"  # brackets', "([()])[]"),
    ('root ::= ("ab" | [c-e\\n]){2,3} "\\u00e9"? .', "abcdéx"),
    ('root ::= [^"\\\\]* "\\"" (x | y)?\nx ::= "x"{0,4}\ny ::= ""', 'ab"xx'),
]
for gsrc, text in grammars:
    put("guide", i, b"\3" + gsrc.encode() + b"\0" + text.encode())
    i += 1

# ---- output: byte 0 % 8 parser (0 v3 tools, 1 v31 tools, 2 required, 3 named, 4 r1, 5 v32 DSML, 6 v4 DSML,
# 7 v4 reasoning), byte 1 seed ----
CB, C1, CE, CS, SEP = "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁calls▁end｜>", "<｜tool▁sep｜>"
outputs = [
    (0, "Let me check." + CB + C1 + "function" + SEP + "get_weather\n```json\n{\"city\": \"Paris\"}\n```" + CE + CS),
    (0, CB + C1 + "function" + SEP + "a\n```json\n{}\n```" + CE + "\n" + C1 + "function" + SEP + "b\n```json\n[1]\n```" + CE + CS),
    (0, "no tools here"), (0, "cut" + CB + C1 + "function" + SEP + "a\n```json\n{\"q\""), (0, "<｜tool▁calls▁beg"),
    (1, "ok" + CB + C1 + "search" + SEP + "{\"q\": \"mla\"}" + CE + CS), (1, "é" + CB + C1 + "x" + SEP + "[]" + CE),
    (2, '[{"name":"get_weather","parameters":{"city":"Paris"}}]'), (2, '[{"name":"a","parameters":{}},{"name":"b"'),
    (2, "[]"), (3, '{"city":"Rome"}'), (3, ""),
    (4, "<think>\nhm, let me see</think>\n\nThe answer."), (4, "thinking only"), (4, "a</thi"), (4, "x</think>y</think>z"),
    (5, "Let me look.\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n"
        "<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n"
        "<｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜parameter>\n</｜DSML｜invoke>\n"
        "</｜DSML｜function_calls>"),
    (5, "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"a\">\n</｜DSML｜invoke>\n<｜DSML｜invoke name=\"b\">\n"
        "<｜DSML｜parameter name=\"x\" string=\"false\">[1, {\"y\": null}]</｜DSML｜parameter>\n</｜DSML｜invoke>"),
    (5, "cut <｜DSML｜function_calls>\n<｜DSML｜invoke name=\"a\">\n<｜DSML｜parameter name=\"q\" string=\"tr"),
    (6, "Let me look.\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n"
        "<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n</｜DSML｜invoke>\n"
        "</｜DSML｜tool_calls>"),
    (7, "weigh it<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"a\">\n</｜DSML｜invoke></think>x"),
    (7, "r</think>c\n\n<｜DSML｜tool_ca"),
]
for k, (p, text) in enumerate(outputs):
    put("output", k, bytes([p, k * 37 % 256]) + text.encode())

# ---- checkpoint: byte 0 % 5: 0 safetensors, 1 config.json, 2 tokenizer_config, 3 generation_config, 4 tokenizer.json ----
def safetensors(tensors, meta=None):
    header, data = {}, b""
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    if meta:
        header["__metadata__"] = meta
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


i = 0
put("checkpoint", i, b"\0" + safetensors({"a.weight": ("BF16", [2, 3], bytes(12)), "b": ("F32", [4], bytes(16))},
                                          {"format": "pt"})); i += 1
put("checkpoint", i, b"\0" + safetensors({"model.layers.0.w": ("F8_E4M3", [2, 2], bytes(4)),
                                          "model.layers.0.w_scale_inv": ("F32", [1, 1], bytes(4)),
                                          "e": ("F16", [0], b"")})); i += 1
put("checkpoint", i, b"\0" + safetensors({"x": ("I64", [1], bytes(8)), "y": ("BF16", [1, 1, 1, 2], bytes(4))})); i += 1
for fx in ["tiny-v3", "tiny-v2", "tiny-v3-fp8", "tiny-r1"]:
    put("checkpoint", i, b"\1" + open(os.path.join(FIX, fx, "config.json"), "rb").read()); i += 1
for fx in ["tiny-v3", "tiny-r1"]:
    put("checkpoint", i, b"\2" + open(os.path.join(FIX, fx, "tokenizer_config.json"), "rb").read()); i += 1
    put("checkpoint", i, b"\3" + open(os.path.join(FIX, fx, "generation_config.json"), "rb").read()); i += 1
put("checkpoint", i, b"\4" + open(os.path.join(FIX, "tiny-v3", "tokenizer.json"), "rb").read()); i += 1

# ---- engine: any bytes choose options and requests (fuzz_engine.c) ----
random.seed(5)
for i in range(12):
    put("engine", i, bytes(random.randrange(256) for _ in range(random.choice([40, 120, 300]))))
