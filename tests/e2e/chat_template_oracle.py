#!/usr/bin/env python3
"""Renders a checkpoint's Jinja chat template with Python's jinja2 the way transformers'
apply_chat_template sets it up (an ImmutableSandboxedEnvironment with trim_blocks,
lstrip_blocks and loopcontrols; HF's tojson filter; raise_exception and strftime_now), as the
oracle for `mlaserve chat-template` (tests/e2e/kimi_chat_template.sh).

    chat_template_oracle.py DIR REQUEST.json [--add-generation-prompt] [--sort-tools]

REQUEST.json: {"messages": [...], other keys passed to the template (tools, ...)}. The template
is DIR/tokenizer_config.json's chat_template or DIR/chat_template.jinja; bos_token and
eos_token come from the config. --sort-tools sorts the tools' keys deeply first, as
tokenization_kimi.py's apply_chat_template does. Prints the prompt (no newline added).
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


def main():
    d, req_path = sys.argv[1], sys.argv[2]
    flags = set(sys.argv[3:])
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
    out = env.from_string(source).render(messages=req["messages"],
                                         add_generation_prompt="--add-generation-prompt" in flags, **kwargs)
    sys.stdout.write(out)


if __name__ == "__main__":
    main()
