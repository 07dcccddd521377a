/* DeepSeek-V4's prompt format. Like V3.2 the checkpoint ships no Jinja chat_template: DeepSeek
 * renders prompts with a Python encoder (encoding/encoding_dsv4.py of deepseek-ai/DeepSeek-V4-Pro,
 * `encode_messages`). This is that encoder's behaviour, written from its semantics, byte for byte
 * on its published examples (tests/fixtures/dsv4/).
 *
 * First the messages are regrouped as the encoder does: there is no tool turn. Each tool result
 * becomes a "<tool_result>CONTENT</tool_result>" block of a user turn (the previous user turn, or
 * a new one), and a user message that follows a user turn is another text block of that turn
 * (unless that turn has a "task"); a turn's blocks are joined by "\n\n", and the tool results
 * of a turn are put in the order of the calls (tool_call_id against the id of each call) of the
 * last assistant message with tool_calls. Then BOS, and per turn:
 *   system          [EFFORT] CONTENT ["\n\n" + the tools block] ["\n\n## Response Format:..."]
 *   developer       <｜User｜>CONTENT [tools] [format]
 *   user            <｜User｜>BLOCKS
 *   latest_reminder <｜latest_reminder｜>CONTENT
 *   assistant       [REASONING</think>] CONTENT ["\n\n<｜DSML｜tool_calls>...</｜DSML｜tool_calls>"]
 *                   <｜end▁of▁sentence｜> (none with "wo_eos")
 * and after a turn that is the last or is followed by an assistant or latest_reminder turn: its
 * "task" token (<｜query｜>, <｜authority｜>, <｜domain｜>, <｜title｜>, <｜read_url｜>; "action":
 * <｜Assistant｜> THINK <｜action｜>), else for a user or developer turn <｜Assistant｜> THINK.
 *
 * Thinking: THINK is "<think>" in thinking mode, else "</think>". drop_thinking (on unless asked
 * off) is off when any turn carries tools. With it, in thinking mode, only the last user (or
 * developer) turn opens the thinking, only assistant turns after it write their reasoning, and
 * the developer turns (and turns of unknown roles) before it are left out; without it every
 * user turn opens the thinking and every assistant turn writes "REASONING</think>". An
 * assistant turn right after a turn with a task writes no thinking. The reasoning is the
 * message's "reasoning" (vLLM's name), else "reasoning_content" (the encoder's).
 *
 * EFFORT: reasoning_effort "max" in thinking mode writes the encoder's maximum-effort preamble in
 * front of the first turn; "none" turns thinking off, other values change nothing (vLLM's
 * reading of the request's reasoning_effort: it maps them to "high", which writes nothing).
 *
 * Tool calls are DSML, as for V3.2 (tok/chat_native.h) inside <｜DSML｜tool_calls>; arguments
 * that are not JSON become the one string parameter "arguments", as the encoder does. Tools are
 * the JSON of each tool's "function", one a line, in the encoder's tools template.
 *
 * Differences, all where Python would write something no prompt means or fail: a null or absent
 * content is "" (not "None"), a message without a role is an error, arguments that are a JSON
 * value other than an object are an error; arguments given as an object (not OpenAI's JSON text)
 * are its parameters, as vLLM's copy of the encoder reads them. */
#ifndef MLA_TOK_CHAT_DSV4_H
#define MLA_TOK_CHAT_DSV4_H

#include <stdbool.h>

struct jctx;
struct jval;

struct chat_dsv4_opts {
	bool thinking;                /* thinking mode */
	bool keep_thinking;           /* encode_messages' drop_thinking=False */
	const char *reasoning_effort; /* the request's, or NULL */
};

/* Appends the prompt of `messages` (a list of message dicts, content already flattened to text,
 * as chat_template.c converts them) to c->out. `tools` (may be NULL or None): the request's tools
 * in OpenAI form; when non-empty they go on the first message if it is a system or developer
 * message (replacing its own), else on an empty system message put in front, as vLLM does. The
 * request's response_format is not given to it (as in vLLM). Errors (indices are the caller's):
 * -1 with c->e set, e.g. "deepseek_v4 prompt: messages[2]: unknown role 'bot'". */
int chat_dsv4_encode(struct jctx *c, struct jval *messages, const struct jval *tools, const struct chat_dsv4_opts *o);

/* Whether DIR/config.json describes a DeepSeek-V4 model (model_type "deepseek_v4", or
 * "DeepseekV4ForCausalLM" in architectures). A missing or unreadable file is false. */
bool chat_dsv4_for_model(const char *model_dir);

#endif
