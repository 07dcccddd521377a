/* Chat templates: compile a Hugging Face chat template (Jinja source, the `chat_template`
 * string of tokenizer_config.json) once, then render it for a message list, byte for byte as
 * transformers' apply_chat_template does (ImmutableSandboxedEnvironment with
 * trim_blocks=True, lstrip_blocks=True, loopcontrols; globals raise_exception,
 * strftime_now, namespace, range, dict; HF's tojson filter).
 *
 * A compiled template is immutable: any number of threads may render it at once (each render
 * has its own scratch memory). Rendering is sandboxed: no I/O, lists and dicts are immutable
 * (as in HF's ImmutableSandboxedEnvironment), recursion depth, loop iterations and memory are
 * capped, so a hostile template returns an error instead of hanging or crashing. */
#ifndef MLA_TOK_CHAT_TEMPLATE_H
#define MLA_TOK_CHAT_TEMPLATE_H

#include <stdbool.h>

#include <jansson.h>

#include "base/err.h"
#include "tok/chat_history.h"

struct chat_template;

/* Parse `source` (NUL-terminated UTF-8 Jinja text). On success *out owns the compiled
 * template (free with chat_template_free). Syntax errors and constructs this renderer does
 * not implement fail here, naming the construct and its 1-based line, e.g.
 *   chat template line 3: unsupported filter "wordcount"
 *   chat template line 1: unclosed "for" block (opened on line 1)
 * Unknown filters, tests and statements are compile errors (Jinja also rejects them at
 * compile time); unknown functions/methods are runtime errors (as in Jinja). */
int chat_template_compile(const char *source, struct chat_template **out, struct err *e);

void chat_template_free(struct chat_template *tpl); /* NULL is fine */

/* The template a model's chat requests render with: `source` compiled when given (a
 * tokenizer_config.json chat_template or --chat-template text: it always wins); else, for a
 * DeepSeek-V3.2 or V4 checkpoint (model_dir/config.json, chat_dsv32.h, chat_dsv4.h),
 * DeepSeek's own encoder, rendered natively (they ship no Jinja template); else *out = NULL (no
 * template). The native ones read, of the render's kwargs, `tools` and the thinking switch, as
 * vLLM does: thinking mode when `thinking` or `enable_thinking` is true; V4's also
 * `reasoning_effort` (a string) and `drop_thinking` (default true). add_generation_prompt and
 * the bos/eos strings do not change them (the encoders always end a user turn with
 * <｜Assistant｜>). With Kimi's tokenizer in model_dir (tiktoken.model, no tokenizer.json) the
 * render sorts the keys of `tools`, deeply, first, as tokenization_kimi.py's
 * apply_chat_template does. */
int chat_template_open(const char *source, const char *model_dir, struct chat_template **out, struct err *e);

/* The native encoder's name ("deepseek_v32", "deepseek_v4"), NULL for a Jinja template (or NULL tpl). */
const char *chat_template_native(const struct chat_template *tpl);

/* Render the template. Variables visible to the template, as transformers passes them:
 *   messages              the `messages` array (copied, never modified). Each element is an
 *                         object {role, content, tool_calls?, reasoning_content?, ...}; all
 *                         fields are passed through unchanged, except that a `content` that
 *                         is an array of parts [{type:"text", text}, ...] is flattened to one
 *                         string, the texts joined with "\n" (vLLM's "string" content format,
 *                         what the DeepSeek templates expect); a non-text part is an error.
 *                         This is transformers' view of the messages (tool-call arguments as
 *                         given); chat_template_render_vllm below is the server's.
 *   add_generation_prompt the flag
 *   bos_token, eos_token  the strings (NULL -> the variable is left undefined)
 *   tools, documents      none (null), unless `kwargs` sets them
 *   every key of `kwargs` (a JSON object, may be NULL): chat_template_kwargs, `tools`, other
 *                         special tokens... A kwargs key overrides the variables above.
 * On success *out_text is a malloc'd NUL-terminated string (caller frees). Runtime errors
 * return -1 with a message and *out_text = NULL:
 *   raise_exception("msg")          -> "chat template: msg"
 *   type errors / undefined values  -> "chat template line 4: unsupported operand types for
 *                                       +: 'str' and 'NoneType'" (and similar)
 *   limits (depth, iterations, size) -> "chat template line N: ... limit exceeded" */
int chat_template_render(const struct chat_template *tpl, const json_t *messages, bool add_generation_prompt,
			 const char *bos_token, const char *eos_token, const json_t *kwargs, char **out_text,
			 struct err *e);

/* vLLM's content format for this template (chat_content_format_detect; "string" for the
 * native encoders and a NULL tpl). */
enum chat_content_format chat_template_content_format(const struct chat_template *tpl);

/* Render as vLLM's chat completions do: the messages first converted by chat_history_vllm in
 * `format` (CHAT_CONTENT_AUTO: the template's detected one), so content is a string or a list
 * of text parts, never flattened again, and tool calls' arguments are decoded JSON. A template
 * that fails on decoded arguments (DeepSeek-R1 / V3.1's concatenate them as strings, where vLLM
 * answers 400) is rendered again with them as sent. Errors as chat_template_render's. */
int chat_template_render_vllm(const struct chat_template *tpl, const json_t *messages, enum chat_content_format format,
			      bool add_generation_prompt, const char *bos_token, const char *eos_token,
			      const json_t *kwargs, char **out_text, struct err *e);

#endif
