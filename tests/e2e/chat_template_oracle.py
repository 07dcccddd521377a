#!/usr/bin/env python3
"""Renders a checkpoint's Jinja chat template with Python's jinja2 the way transformers'
apply_chat_template sets it up (an ImmutableSandboxedEnvironment with trim_blocks,
lstrip_blocks and loopcontrols; HF's tojson filter; raise_exception and strftime_now), as the
oracle for `mlaserve chat-template` (tests/e2e/kimi_chat_template.sh).

    chat_template_oracle.py DIR REQUEST.json [--add-generation-prompt] [--sort-tools]
                            [--vllm auto|string|openai [--keep-arguments]]

REQUEST.json: {"messages": [...], other keys passed to the template (tools, ...)}. The template
is DIR/tokenizer_config.json's chat_template or DIR/chat_template.jinja; bos_token and
eos_token come from the config. --sort-tools sorts the tools' keys deeply first, as
tokenization_kimi.py's apply_chat_template does. --vllm first turns the messages into what
vLLM's chat completions hand the template in that content format (auto: detected on jinja2's
AST as vLLM does): content a string (text parts joined with "\n", none -> "") or a list of
text parts (a string -> one part, none -> [], a tool message's parts joined back), an empty
tool_calls list dropped, each call's arguments JSON-decoded ({} when not JSON). Prints the
prompt (no newline added).
"""
import datetime
import json
import os
import sys

import jinja2
import jinja2.ext
import jinja2.sandbox


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def strftime_now(fmt):
    return datetime.datetime.now().strftime(fmt)


def sorted_deep(x):
    if isinstance(x, dict):
        return {k: sorted_deep(v) for k, v in sorted(x.items())}
    if isinstance(x, list):
        return [sorted_deep(v) for v in x]
    return x


def token_str(v):
    return v.get("content") if isinstance(v, dict) else v


def loads_names(node, name):
    """node is `name`, under filters, tests and slices"""
    while isinstance(node, (jinja2.nodes.Filter, jinja2.nodes.Test)) or (
            isinstance(node, jinja2.nodes.Getitem) and isinstance(node.arg, jinja2.nodes.Slice)):
        node = node.node
    return node


def is_ref(node, name, key=None):
    node = loads_names(node, name)
    if key is not None:
        if isinstance(node, jinja2.nodes.Getitem):
            if not (isinstance(node.arg, jinja2.nodes.Const) and node.arg.value == key):
                return False
        elif isinstance(node, jinja2.nodes.Getattr):
            if node.attr != key:
                return False
        else:
            return False
        node = node.node
    return isinstance(node, jinja2.nodes.Name) and node.ctx == "load" and node.name == name


def detect_format(env, source):
    """'openai' when a loop runs over the content of a message (a loop variable over messages
    or over a variable assigned from it), else 'string'"""
    ast = env.parse(source)
    try:
        names, queue = ["messages"], ["messages"]
        while queue:
            var = queue.pop(0)
            for a in ast.find_all(jinja2.nodes.Assign):
                if is_ref(a.node, var):
                    assert isinstance(a.target, jinja2.nodes.Name)
                    if a.target.name not in names:
                        names.append(a.target.name)
                        queue.append(a.target.name)
        items = []
        for loop in ast.find_all(jinja2.nodes.For):
            if any(is_ref(loop.iter, n) for n in names):
                assert isinstance(loop.target, jinja2.nodes.Name)
                items.append(loop.target.name)
        for loop in ast.find_all(jinja2.nodes.For):
            if any(is_ref(loop.iter, n, "content") for n in items):
                assert isinstance(loop.target, jinja2.nodes.Name)
                return "openai"
    except AssertionError:
        pass
    return "string"


def vllm_messages(messages, fmt, keep_arguments=False):
    out = []
    for m in messages:
        m = json.loads(json.dumps(m))
        c = m.get("content")
        parts = [] if c is None else [c] if isinstance(c, str) else [
            p if isinstance(p, str) else p.get("text") for p in c]
        parts = [p for p in parts if p is not None]
        if fmt == "string" or m.get("role") == "tool":
            m["content"] = "\n".join(parts)
        else:
            m["content"] = [{"type": "text", "text": p} for p in parts]
        calls = m.get("tool_calls")
        if m.get("role") == "assistant" and isinstance(calls, list):
            if not calls:
                del m["tool_calls"]
            for call in [] if keep_arguments else calls:
                fn = call.get("function")
                args = fn.get("arguments") if isinstance(fn, dict) else None
                if isinstance(fn, dict) and not isinstance(args, (dict, list)):
                    try:
                        fn["arguments"] = json.loads(args) if isinstance(args, str) else {}
                    except json.JSONDecodeError:
                        fn["arguments"] = {}
        out.append(m)
    return out


def main():
    d, req_path = sys.argv[1], sys.argv[2]
    flags = set(sys.argv[3:])
    vllm = sys.argv[sys.argv.index("--vllm") + 1] if "--vllm" in sys.argv else None
    cfg = {}
    if os.path.exists(os.path.join(d, "tokenizer_config.json")):
        with open(os.path.join(d, "tokenizer_config.json"), encoding="utf-8") as f:
            cfg = json.load(f)
    source = cfg.get("chat_template")
    if source is None:
        with open(os.path.join(d, "chat_template.jinja"), encoding="utf-8") as f:
            source = f.read()
    with open(req_path, encoding="utf-8") as f:
        req = json.load(f)
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                       extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    kwargs = {k: v for k, v in req.items() if k != "messages"}
    if "--sort-tools" in flags and "tools" in kwargs:
        kwargs["tools"] = sorted_deep(kwargs["tools"])
    kwargs.setdefault("tools", None)
    kwargs.setdefault("documents", None)
    for name in ("bos_token", "eos_token"):
        if token_str(cfg.get(name)) is not None:
            kwargs.setdefault(name, token_str(cfg[name]))
    messages = req["messages"]
    if vllm:
        messages = vllm_messages(messages, detect_format(env, source) if vllm == "auto" else vllm,
                                 "--keep-arguments" in flags)
    out = env.from_string(source).render(messages=messages,
                                         add_generation_prompt="--add-generation-prompt" in flags, **kwargs)
    sys.stdout.write(out)


if __name__ == "__main__":
    main()
