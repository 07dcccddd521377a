/* DeepSeek-V3.2's prompt format. The checkpoint ships no Jinja chat_template: DeepSeek renders
 * its prompts with a Python encoder (encoding/encoding_dsv32.py in the Hugging Face repository
 * deepseek-ai/DeepSeek-V3.2, `encode_messages`). This is that encoder's behaviour, written
 * from its semantics, byte for byte on its published examples (tests/fixtures/dsv32/):
 *   BOS, then per message
 *   system     CONTENT ["\n\n" + the tools block] ["\n\n## Response Format:..." + schema]
 *   developer  <｜User｜> [tools] [format] "\n\n# The user's message is: " CONTENT <｜Assistant｜> THINK
 *   user       <｜User｜>CONTENT<｜Assistant｜> THINK
 *   tool       "\n\n<function_results>" before the first result of a call list,
 *              "\n<result>CONTENT</result>" each, "\n</function_results>\n\n" THINK after the last
 *   assistant  [REASONING</think>] CONTENT ["\n\n<｜DSML｜function_calls>...</｜DSML｜function_calls>"]
 *              <｜end▁of▁sentence｜>
 * THINK is "<think>" in thinking mode for the last user (or developer) message and the tool
 * results after it, else "</think>". An assistant message's reasoning (its "reasoning", else
 * "reasoning_content", as vLLM's copy of the encoder reads them) is written only after the
 * last user message in thinking mode, where such a message needs reasoning or tool calls:
 * earlier turns' thinking is dropped (the encoder's drop_thinking, which changes nothing
 * else). Tool calls are DSML: one
 * <｜DSML｜invoke name="NAME"> per call, one <｜DSML｜parameter name="KEY" string="true|false">
 * per argument (strings as they are, other values as JSON; the arguments are a JSON text, as
 * OpenAI sends them, or an object). Tools are written as the JSON of
 * each tool's "function" object, one per line (Python's json.dumps, ensure_ascii=False).
 *
 * Differences, all where Python would write something no prompt means: a null or absent
 * content is "" (not "None", as sglang normalizes it), and a tool result without an assistant
 * message with enough tool_calls before it is an error. Python's own assertion failures
 * (a developer message without content, an assistant message after the last user message in
 * thinking mode with neither reasoning nor tool calls) are errors too, as they are in vLLM. */
#ifndef MLA_TOK_CHAT_DSV32_H
#define MLA_TOK_CHAT_DSV32_H

#include <stdbool.h>

struct jctx;
struct jval;

/* Appends the prompt of `messages` (a list of message dicts, content already flattened to
 * text, as chat_template.c converts them) to c->out. `tools` (may be NULL or None): the
 * request's tools in OpenAI form [{"type": "function", "function": {...}}]; when non-empty
 * they go on the first message if it is a system message, else on an empty system message put
 * in front (as sglang does, which reproduces the encoder's own example; vLLM always puts one in
 * front, so that a system prompt would follow the tools block with no separator), replacing a
 * system message's own "tools". Messages may also carry "tools" and "response_format"
 * themselves, as the encoder reads them. The request's response_format is not given to it (as
 * in vLLM). Errors (indices are the caller's): -1 with c->e set, e.g.
 *   "deepseek_v32 prompt: messages[2]: unknown role 'bot'". */
int chat_dsv32_encode(struct jctx *c, struct jval *messages, const struct jval *tools, bool thinking);

/* Whether DIR/config.json describes a DeepSeek-V3.2 model (model_type "deepseek_v32", or
 * "DeepseekV32ForCausalLM" in architectures). A missing or unreadable file is false. */
bool chat_dsv32_for_model(const char *model_dir);

#endif
