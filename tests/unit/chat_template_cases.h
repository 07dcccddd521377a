/* Data for test_chat_template.c: template sources written out (ChatML, Qwen2.5, Llama-3,
 * Llama-3.1) and the render cases with their expected text (rendered by jinja2 3.1.6 in
 * transformers' environment). */
#ifndef MLA_TESTS_CHAT_TEMPLATE_CASES_H
#define MLA_TESTS_CHAT_TEMPLATE_CASES_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

/* ChatML (the common <|im_start|> template) */
static const char tpl_chatml[] =
	"{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'"
	"] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assista"
	"nt\\n' }}{% endif %}";

/* Qwen2.5-Instruct (written from its published tokenizer_config.json chat_template) */
static const char tpl_qwen25[] =
	"{%- if tools %}\n"
	"    {{- '<|im_start|>system\\n' }}\n"
	"    {%- if messages[0]['role'] == 'system' %}\n"
	"        {{- messages[0]['content'] }}\n"
	"    {%- else %}\n"
	"        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}\n"
	"    {%- endif %}\n"
	"    {{- \"\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user que"
	"ry.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tool"
	"s>\" }}\n"
	"    {%- for tool in tools %}\n"
	"        {{- \"\\n\" }}\n"
	"        {{- tool | tojson }}\n"
	"    {%- endfor %}\n"
	"    {{- \"\\n</tools>\\n\\nFor each function call, return a json object with function name "
	"and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\\"name\\\": <func"
	"tion-name>, \\\"arguments\\\": <args-json-object>}\\n</tool_call><|im_end|>\\n\" }}\n"
	"{%- else %}\n"
	"    {%- if messages[0]['role'] == 'system' %}\n"
	"        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n"
	"    {%- else %}\n"
	"        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful"
	" assistant.<|im_end|>\\n' }}\n"
	"    {%- endif %}\n"
	"{%- endif %}\n"
	"{%- for message in messages %}\n"
	"    {%- if (message.role == \"user\") or (message.role == \"system\" and not loop.first) or"
	" (message.role == \"assistant\" and not message.tool_calls) %}\n"
	"        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' "
	"}}\n"
	"    {%- elif message.role == \"assistant\" %}\n"
	"        {{- '<|im_start|>' + message.role }}\n"
	"        {%- if message.content %}\n"
	"            {{- '\\n' + message.content }}\n"
	"        {%- endif %}\n"
	"        {%- for tool_call in message.tool_calls %}\n"
	"            {%- if tool_call.function is defined %}\n"
	"                {%- set tool_call = tool_call.function %}\n"
	"            {%- endif %}\n"
	"            {{- '\\n<tool_call>\\n{\"name\": \"' }}\n"
	"            {{- tool_call.name }}\n"
	"            {{- '\", \"arguments\": ' }}\n"
	"            {{- tool_call.arguments | tojson }}\n"
	"            {{- '}\\n</tool_call>' }}\n"
	"        {%- endfor %}\n"
	"        {{- '<|im_end|>\\n' }}\n"
	"    {%- elif message.role == \"tool\" %}\n"
	"        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != \"tool\") %}\n"
	"            {{- '<|im_start|>user' }}\n"
	"        {%- endif %}\n"
	"        {{- '\\n<tool_response>\\n' }}\n"
	"        {{- message.content }}\n"
	"        {{- '\\n</tool_response>' }}\n"
	"        {%- if loop.last or (messages[loop.index0 + 1].role != \"tool\") %}\n"
	"            {{- '<|im_end|>\\n' }}\n"
	"        {%- endif %}\n"
	"    {%- endif %}\n"
	"{%- endfor %}\n"
	"{%- if add_generation_prompt %}\n"
	"    {{- '<|im_start|>assistant\\n' }}\n"
	"{%- endif %}\n";

/* Llama-3-Instruct (8B/70B, Apr 2024) */
static const char tpl_llama3[] =
	"{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|sta"
	"rt_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + "
	"'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{"
	"{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end"
	"_header_id|>\\n\\n' }}{% endif %}";

/* Llama-3.1-Instruct (with tools; written from its published template) */
static const char tpl_llama31[] =
	"{{- bos_token }}\n"
	"{%- if custom_tools is defined %}\n"
	"    {%- set tools = custom_tools %}\n"
	"{%- endif %}\n"
	"{%- if not tools_in_user_message is defined %}\n"
	"    {%- set tools_in_user_message = true %}\n"
	"{%- endif %}\n"
	"{%- if not date_string is defined %}\n"
	"    {%- set date_string = \"26 Jul 2024\" %}\n"
	"{%- endif %}\n"
	"{%- if not tools is defined %}\n"
	"    {%- set tools = none %}\n"
	"{%- endif %}\n"
	"\n"
	"{#- This block extracts the system message, so we can slot it into the right place. #}\n"
	"{%- if messages[0]['role'] == 'system' %}\n"
	"    {%- set system_message = messages[0]['content']|trim %}\n"
	"    {%- set messages = messages[1:] %}\n"
	"{%- else %}\n"
	"    {%- set system_message = \"\" %}\n"
	"{%- endif %}\n"
	"\n"
	"{#- System message + builtin tools #}\n"
	"{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}\n"
	"{%- if builtin_tools is defined or tools is not none %}\n"
	"    {{- \"Environment: ipython\\n\" }}\n"
	"{%- endif %}\n"
	"{%- if builtin_tools is defined %}\n"
	"    {{- \"Tools: \" + builtin_tools | reject('equalto', 'code_interpreter') | join(\", \") "
	"+ \"\\n\\n\"}}\n"
	"{%- endif %}\n"
	"{{- \"Cutting Knowledge Date: December 2023\\n\" }}\n"
	"{{- \"Today Date: \" + date_string + \"\\n\\n\" }}\n"
	"{%- if tools is not none and not tools_in_user_message %}\n"
	"    {{- \"You have access to the following functions. To call a function, please respond wi"
	"th JSON for a function call.\" }}\n"
	"    {{- 'Respond in the format {\"name\": function name, \"parameters\": dictionary of argu"
	"ment name and its value}.' }}\n"
	"    {{- \"Do not use variables.\\n\\n\" }}\n"
	"    {%- for t in tools %}\n"
	"        {{- t | tojson(indent=4) }}\n"
	"        {{- \"\\n\\n\" }}\n"
	"    {%- endfor %}\n"
	"{%- endif %}\n"
	"{{- system_message }}\n"
	"{{- \"<|eot_id|>\" }}\n"
	"\n"
	"{#- Custom tools are passed in a user message with some extra guidance #}\n"
	"{%- if tools_in_user_message and not tools is none %}\n"
	"    {#- Extract the first user message so we can plug it in here #}\n"
	"    {%- if messages | length != 0 %}\n"
	"        {%- set first_user_message = messages[0]['content']|trim %}\n"
	"        {%- set messages = messages[1:] %}\n"
	"    {%- else %}\n"
	"        {{- raise_exception(\"Cannot put tools in the first user message when there's no fi"
	"rst user message!\") }}\n"
	"{%- endif %}\n"
	"    {{- '<|start_header_id|>user<|end_header_id|>\\n\\n' -}}\n"
	"    {{- \"Given the following functions, please respond with a JSON for a function call \" "
	"}}\n"
	"    {{- \"with its proper arguments that best answers the given prompt.\\n\\n\" }}\n"
	"    {{- 'Respond in the format {\"name\": function name, \"parameters\": dictionary of argu"
	"ment name and its value}.' }}\n"
	"    {{- \"Do not use variables.\\n\\n\" }}\n"
	"    {%- for t in tools %}\n"
	"        {{- t | tojson(indent=4) }}\n"
	"        {{- \"\\n\\n\" }}\n"
	"    {%- endfor %}\n"
	"    {{- first_user_message + \"<|eot_id|>\"}}\n"
	"{%- endif %}\n"
	"\n"
	"{%- for message in messages %}\n"
	"    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in mess"
	"age) %}\n"
	"        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['c"
	"ontent'] | trim + '<|eot_id|>' }}\n"
	"    {%- elif 'tool_calls' in message %}\n"
	"        {%- if not message.tool_calls|length == 1 %}\n"
	"            {{- raise_exception(\"This model only supports single tool-calls at once!\") }}"
	"\n"
	"        {%- endif %}\n"
	"        {%- set tool_call = message.tool_calls[0].function %}\n"
	"        {%- if builtin_tools is defined and tool_call.name in builtin_tools %}\n"
	"            {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}\n"
	"            {{- \"<|python_tag|>\" + tool_call.name + \".call(\" }}\n"
	"            {%- for arg_name, arg_val in tool_call.arguments | items %}\n"
	"                {{- arg_name + '=\"' + arg_val + '\"' }}\n"
	"                {%- if not loop.last %}\n"
	"                    {{- \", \" }}\n"
	"                {%- endif %}\n"
	"                {%- endfor %}\n"
	"            {{- \")\" }}\n"
	"        {%- else  %}\n"
	"            {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}\n"
	"            {{- '{\"name\": \"' + tool_call.name + '\", ' }}\n"
	"            {{- '\"parameters\": ' }}\n"
	"            {{- tool_call.arguments | tojson }}\n"
	"            {{- \"}\" }}\n"
	"        {%- endif %}\n"
	"        {%- if builtin_tools is defined %}\n"
	"            {#- This means we're in ipython mode #}\n"
	"            {{- \"<|eom_id|>\" }}\n"
	"        {%- else %}\n"
	"            {{- \"<|eot_id|>\" }}\n"
	"        {%- endif %}\n"
	"    {%- elif message.role == \"tool\" or message.role == \"ipython\" %}\n"
	"        {{- \"<|start_header_id|>ipython<|end_header_id|>\\n\\n\" }}\n"
	"        {%- if message.content is mapping or message.content is iterable %}\n"
	"            {{- message.content | tojson }}\n"
	"        {%- else %}\n"
	"            {{- message.content }}\n"
	"        {%- endif %}\n"
	"        {{- \"<|eot_id|>\" }}\n"
	"    {%- endif %}\n"
	"{%- endfor %}\n"
	"{%- if add_generation_prompt %}\n"
	"    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}\n"
	"{%- endif %}\n";


static const char *inline_source(const char *name)
{
	if (!strcmp(name, "@chatml"))
		return tpl_chatml;
	if (!strcmp(name, "@qwen25"))
		return tpl_qwen25;
	if (!strcmp(name, "@llama3"))
		return tpl_llama3;
	if (!strcmp(name, "@llama31"))
		return tpl_llama31;
	return NULL;
}

struct render_case {
	const char *name;
	const char *tpl;      /* fixture templates/<tpl>.jinja, or "@name" for a source above */
	const char *messages; /* JSON */
	bool add_generation_prompt;
	const char *bos, *eos;
	const char *kwargs; /* JSON object or NULL */
	const char *expect;
};

static const struct render_case cases[] = {
	{
		"deepseek-v3 single",
		"deepseek-v3",
		"[{\"role\": \"user\", \"content\": \"Hi\"}]",
		true,
		"<｜begin▁of▁sentence｜>",
		"<｜end▁of▁sentence｜>",
		NULL,
		"<｜begin▁of▁sentence｜><｜User｜>Hi<｜Assistant｜>",
	},
	{
		"deepseek-v3 single no-gen",
		"deepseek-v3",
		"[{\"role\": \"user\", \"content\": \"Hi\"}]",
		false,
		"<｜begin▁of▁sentence｜>",
		"<｜end▁of▁sentence｜>",
		NULL,
		"<｜begin▁of▁sentence｜><｜User｜>Hi",
	},
	{
		"deepseek-v3 system multi-turn",
		"deepseek-v3",
		"[{\"role\": \"system\", \"content\": \"You are helpful.\"}, {\"role\": \"user\", \"content\""
		": \"Hi\"}, {\"role\": \"assistant\", \"content\": \"Hello!\"}, {\"role\": \"user\", \"conte"
		"nt\": \"2+2?\"}]",
		true,
		"<｜begin▁of▁sentence｜>",
		"<｜end▁of▁sentence｜>",
		NULL,
		"<｜begin▁of▁sentence｜>You are helpful.<｜User｜>Hi<｜Assistant｜>Hello!<｜end▁of▁sentence｜><｜User"
		"｜>2+2?<｜Assistant｜>",
	},
	{
		"deepseek-v3 system multi-turn no-gen",
		"deepseek-v3",
		"[{\"role\": \"system\", \"content\": \"You are helpful.\"}, {\"role\": \"user\", \"content\""
		": \"Hi\"}, {\"role\": \"assistant\", \"content\": \"Hello!\"}, {\"role\": \"user\", \"conte"
		"nt\": \"2+2?\"}]",
		false,
		"<｜begin▁of▁sentence｜>",
		"<｜end▁of▁sentence｜>",
		NULL,
		"<｜begin▁of▁sentence｜>You are helpful.<｜User｜>Hi<｜Assistant｜>Hello!<｜end▁of▁sentence｜><｜User"
		"｜>2+2?",
	},
	{
		"deepseek-v3 two systems",
		"deepseek-v3",
		"[{\"role\": \"system\", \"content\": \"A\"}, {\"role\": \"user\", \"content\": \"Hi\"}, {\""
		"role\": \"system\", \"content\": \"B\"}, {\"role\": \"user\", \"content\": \"x\"}]",
		true,
		"<｜begin▁of▁sentence｜>",
		"<｜end▁of▁sentence｜>",
		NULL,
		"<｜begin▁of▁sentence｜>A\n"
		"\n"
		"B<｜User｜>Hi<｜User｜>x<｜Assistant｜>",
	},
	{
		"deepseek-v3 content parts",
		"deepseek-v3",
		"[{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"line one\"}, {\"type\""
		": \"text\", \"text\": \"line two\"}]}]",
		true,
		"<｜begin▁of▁sentence｜>",
		"<｜end▁of▁sentence｜>",
		NULL,
		"<｜begin▁of▁sentence｜><｜User｜>line one\n"
		"line two<｜Assistant｜>",
	},
	{
		"deepseek-r1 single",
		"deepseek-r1",
		"[{\"role\": \"user\", \"content\": \"Hi\"}]",
		true,
		"<｜begin▁of▁sentence｜>",
		"<｜end▁of▁sentence｜>",
		NULL,
		"<｜begin▁of▁sentence｜><｜User｜>Hi<｜Assistant｜><think>\n",
	},
	{
		"deepseek-r1 single no-gen",
		"deepseek-r1",
		"[{\"role\": \"user\", \"content\": \"Hi\"}]",
		false,
		"<｜begin▁of▁sentence｜>",
		"<｜end▁of▁sentence｜>",
		NULL,
		"<｜begin▁of▁sentence｜><｜User｜>Hi",
	},
	{
		"deepseek-r1 system multi-turn",
		"deepseek-r1",
		"[{\"role\": \"system\", \"content\": \"You are helpful.\"}, {\"role\": \"user\", \"content\""
		": \"Hi\"}, {\"role\": \"assistant\", \"content\": \"Hello!\"}, {\"role\": \"user\", \"conte"
		"nt\": \"2+2?\"}]",
		true,
		"<｜begin▁of▁sentence｜>",
		"<｜end▁of▁sentence｜>",
		NULL,
		"<｜begin▁of▁sentence｜>You are helpful.<｜User｜>Hi<｜Assistant｜>Hello!<｜end▁of▁sentence｜><｜User"
		"｜>2+2?<｜Assistant｜><think>\n",
	},
	{
		"deepseek-r1 system multi-turn no-gen",
		"deepseek-r1",
		"[{\"role\": \"system\", \"content\": \"You are helpful.\"}, {\"role\": \"user\", \"content\""
		": \"Hi\"}, {\"role\": \"assistant\", \"content\": \"Hello!\"}, {\"role\": \"user\", \"conte"
		"nt\": \"2+2?\"}]",
		false,
		"<｜begin▁of▁sentence｜>",
		"<｜end▁of▁sentence｜>",
		NULL,
		"<｜begin▁of▁sentence｜>You are helpful.<｜User｜>Hi<｜Assistant｜>Hello!<｜end▁of▁sentence｜><｜User"
		"｜>2+2?",
	},
	{
		"deepseek-r1 two systems",
		"deepseek-r1",
		"[{\"role\": \"system\", \"content\": \"A\"}, {\"role\": \"user\", \"content\": \"Hi\"}, {\""
		"role\": \"system\", \"content\": \"B\"}, {\"role\": \"user\", \"content\": \"x\"}]",
		true,
		"<｜begin▁of▁sentence｜>",
		"<｜end▁of▁sentence｜>",
		NULL,
		"<｜begin▁of▁sentence｜>A\n"
		"\n"
		"B<｜User｜>Hi<｜User｜>x<｜Assistant｜><think>\n",
	},
	{
		"deepseek-r1 content parts",
		"deepseek-r1",
		"[{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"line one\"}, {\"type\""
		": \"text\", \"text\": \"line two\"}]}]",
		true,
		"<｜begin▁of▁sentence｜>",
		"<｜end▁of▁sentence｜>",
		NULL,
		"<｜begin▁of▁sentence｜><｜User｜>line one\n"
		"line two<｜Assistant｜><think>\n",
	},
	{
		"deepseek-v2-lite-chat single",
		"deepseek-v2-lite-chat",
		"[{\"role\": \"user\", \"content\": \"Hi\"}]",
		true,
		"<｜begin▁of▁sentence｜>",
		"<｜end▁of▁sentence｜>",
		NULL,
		"<｜begin▁of▁sentence｜>User: Hi\n"
		"\n"
		"Assistant:",
	},
	{
		"deepseek-v2-lite-chat single no-gen",
		"deepseek-v2-lite-chat",
		"[{\"role\": \"user\", \"content\": \"Hi\"}]",
		false,
		"<｜begin▁of▁sentence｜>",
		"<｜end▁of▁sentence｜>",
		NULL,
		"<｜begin▁of▁sentence｜>User: Hi\n"
		"\n",
	},
	{
		"deepseek-v2-lite-chat system multi-turn",
		"deepseek-v2-lite-chat",
		"[{\"role\": \"system\", \"content\": \"You are helpful.\"}, {\"role\": \"user\", \"content\""
		": \"Hi\"}, {\"role\": \"assistant\", \"content\": \"Hello!\"}, {\"role\": \"user\", \"conte"
		"nt\": \"2+2?\"}]",
		true,
		"<｜begin▁of▁sentence｜>",
		"<｜end▁of▁sentence｜>",
		NULL,
		"<｜begin▁of▁sentence｜>You are helpful.\n"
		"\n"
		"User: Hi\n"
		"\n"
		"Assistant: Hello!<｜end▁of▁sentence｜>User: 2+2?\n"
		"\n"
		"Assistant:",
	},
	{
		"deepseek-v2-lite-chat system multi-turn no-gen",
		"deepseek-v2-lite-chat",
		"[{\"role\": \"system\", \"content\": \"You are helpful.\"}, {\"role\": \"user\", \"content\""
		": \"Hi\"}, {\"role\": \"assistant\", \"content\": \"Hello!\"}, {\"role\": \"user\", \"conte"
		"nt\": \"2+2?\"}]",
		false,
		"<｜begin▁of▁sentence｜>",
		"<｜end▁of▁sentence｜>",
		NULL,
		"<｜begin▁of▁sentence｜>You are helpful.\n"
		"\n"
		"User: Hi\n"
		"\n"
		"Assistant: Hello!<｜end▁of▁sentence｜>User: 2+2?\n"
		"\n",
	},
	{
		"deepseek-v2-lite-chat two systems",
		"deepseek-v2-lite-chat",
		"[{\"role\": \"system\", \"content\": \"A\"}, {\"role\": \"user\", \"content\": \"Hi\"}, {\""
		"role\": \"system\", \"content\": \"B\"}, {\"role\": \"user\", \"content\": \"x\"}]",
		true,
		"<｜begin▁of▁sentence｜>",
		"<｜end▁of▁sentence｜>",
		NULL,
		"<｜begin▁of▁sentence｜>A\n"
		"\n"
		"User: Hi\n"
		"\n"
		"B\n"
		"\n"
		"User: x\n"
		"\n"
		"Assistant:",
	},
	{
		"deepseek-v2-lite-chat content parts",
		"deepseek-v2-lite-chat",
		"[{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"line one\"}, {\"type\""
		": \"text\", \"text\": \"line two\"}]}]",
		true,
		"<｜begin▁of▁sentence｜>",
		"<｜end▁of▁sentence｜>",
		NULL,
		"<｜begin▁of▁sentence｜>User: line one\n"
		"line two\n"
		"\n"
		"Assistant:",
	},
	{
		"deepseek-r1 earlier reasoning dropped",
		"deepseek-r1",
		"[{\"role\": \"user\", \"content\": \"Q1\"}, {\"role\": \"assistant\", \"content\": \"<think"
		">\\nreason\\n</think>\\n\\nA1\"}, {\"role\": \"user\", \"content\": \"Q2\"}]",
		true,
		"<｜begin▁of▁sentence｜>",
		"<｜end▁of▁sentence｜>",
		NULL,
		"<｜begin▁of▁sentence｜><｜User｜>Q1<｜Assistant｜>\n"
		"\n"
		"A1<｜end▁of▁sentence｜><｜User｜>Q2<｜Assistant｜><think>\n",
	},
	{
		"deepseek-v3 reasoning kept",
		"deepseek-v3",
		"[{\"role\": \"user\", \"content\": \"Q1\"}, {\"role\": \"assistant\", \"content\": \"<think"
		">\\nreason\\n</think>\\n\\nA1\"}, {\"role\": \"user\", \"content\": \"Q2\"}]",
		false,
		"<｜begin▁of▁sentence｜>",
		"<｜end▁of▁sentence｜>",
		NULL,
		"<｜begin▁of▁sentence｜><｜User｜>Q1<｜Assistant｜><think>\n"
		"reason\n"
		"</think>\n"
		"\n"
		"A1<｜end▁of▁sentence｜><｜User｜>Q2",
	},
	{
		"deepseek-v3 tool calls",
		"deepseek-v3",
		"[{\"role\": \"user\", \"content\": \"weather?\"}, {\"role\": \"assistant\", \"content\": nu"
		"ll, \"tool_calls\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"a"
		"rguments\": \"{\\\"city\\\": \\\"Paris\\\"}\"}}, {\"type\": \"function\", \"function\": {\""
		"name\": \"get_time\", \"arguments\": \"{}\"}}]}, {\"role\": \"tool\", \"content\": \"{\\\"t"
		"emp\\\": 20}\"}, {\"role\": \"tool\", \"content\": \"12:00\"}, {\"role\": \"assistant\", \""
		"content\": \"It is 20C.\"}, {\"role\": \"user\", \"content\": \"thanks\"}]",
		true,
		"<｜begin▁of▁sentence｜>",
		"<｜end▁of▁sentence｜>",
		NULL,
		"<｜begin▁of▁sentence｜><｜User｜>weather?<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>fu"
		"nction<｜tool▁sep｜>get_weather\n"
		"```json\n"
		"{\"city\": \"Paris\"}\n"
		"```<｜tool▁call▁end｜>\n"
		"<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n"
		"```json\n"
		"{}\n"
		"```<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜><｜tool▁outputs▁begin｜><｜tool▁outpu"
		"t▁begin｜>{\"temp\": 20}<｜tool▁output▁end｜>\n"
		"<｜tool▁output▁begin｜>12:00<｜tool▁output▁end｜><｜tool▁outputs▁end｜>It is 20C.<｜end▁of▁sentenc"
		"e｜><｜User｜>thanks<｜Assistant｜>",
	},
	{
		"deepseek-v3 ends with tool output",
		"deepseek-v3",
		"[{\"role\": \"user\", \"content\": \"weather?\"}, {\"role\": \"assistant\", \"content\": nu"
		"ll, \"tool_calls\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"a"
		"rguments\": \"{\\\"city\\\": \\\"Paris\\\"}\"}}, {\"type\": \"function\", \"function\": {\""
		"name\": \"get_time\", \"arguments\": \"{}\"}}]}, {\"role\": \"tool\", \"content\": \"{\\\"t"
		"emp\\\": 20}\"}, {\"role\": \"tool\", \"content\": \"12:00\"}]",
		true,
		"<｜begin▁of▁sentence｜>",
		"<｜end▁of▁sentence｜>",
		NULL,
		"<｜begin▁of▁sentence｜><｜User｜>weather?<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>fu"
		"nction<｜tool▁sep｜>get_weather\n"
		"```json\n"
		"{\"city\": \"Paris\"}\n"
		"```<｜tool▁call▁end｜>\n"
		"<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n"
		"```json\n"
		"{}\n"
		"```<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜><｜tool▁outputs▁begin｜><｜tool▁outpu"
		"t▁begin｜>{\"temp\": 20}<｜tool▁output▁end｜>\n"
		"<｜tool▁output▁begin｜>12:00<｜tool▁output▁end｜><｜tool▁outputs▁end｜>",
	},
	{
		"deepseek-r1 tool calls",
		"deepseek-r1",
		"[{\"role\": \"user\", \"content\": \"weather?\"}, {\"role\": \"assistant\", \"content\": \""
		"\", \"tool_calls\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"a"
		"rguments\": \"{\\\"city\\\": \\\"Paris\\\"}\"}}]}, {\"role\": \"tool\", \"content\": \"sunn"
		"y\"}]",
		true,
		"<｜begin▁of▁sentence｜>",
		"<｜end▁of▁sentence｜>",
		NULL,
		"<｜begin▁of▁sentence｜><｜User｜>weather?<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>fu"
		"nction<｜tool▁sep｜>get_weather\n"
		"```json\n"
		"{\"city\": \"Paris\"}\n"
		"```<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜><｜tool▁outputs▁begin｜><｜tool▁outpu"
		"t▁begin｜>sunny<｜tool▁output▁end｜><｜tool▁outputs▁end｜>",
	},
	{
		"chatml single",
		"@chatml",
		"[{\"role\": \"user\", \"content\": \"Hi\"}]",
		true,
		NULL,
		"<|im_end|>",
		NULL,
		"<|im_start|>user\n"
		"Hi<|im_end|>\n"
		"<|im_start|>assistant\n",
	},
	{
		"chatml system multi-turn no-gen",
		"@chatml",
		"[{\"role\": \"system\", \"content\": \"You are helpful.\"}, {\"role\": \"user\", \"content\""
		": \"Hi\"}, {\"role\": \"assistant\", \"content\": \"Hello!\"}, {\"role\": \"user\", \"conte"
		"nt\": \"2+2?\"}]",
		false,
		NULL,
		"<|im_end|>",
		NULL,
		"<|im_start|>system\n"
		"You are helpful.<|im_end|>\n"
		"<|im_start|>user\n"
		"Hi<|im_end|>\n"
		"<|im_start|>assistant\n"
		"Hello!<|im_end|>\n"
		"<|im_start|>user\n"
		"2+2?<|im_end|>\n",
	},
	{
		"qwen25 single",
		"@qwen25",
		"[{\"role\": \"user\", \"content\": \"Hi\"}]",
		true,
		NULL,
		"<|im_end|>",
		NULL,
		"<|im_start|>system\n"
		"You are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
		"<|im_start|>user\n"
		"Hi<|im_end|>\n"
		"<|im_start|>assistant\n",
	},
	{
		"qwen25 system multi-turn no-gen",
		"@qwen25",
		"[{\"role\": \"system\", \"content\": \"You are helpful.\"}, {\"role\": \"user\", \"content\""
		": \"Hi\"}, {\"role\": \"assistant\", \"content\": \"Hello!\"}, {\"role\": \"user\", \"conte"
		"nt\": \"2+2?\"}]",
		false,
		NULL,
		"<|im_end|>",
		NULL,
		"<|im_start|>system\n"
		"You are helpful.<|im_end|>\n"
		"<|im_start|>user\n"
		"Hi<|im_end|>\n"
		"<|im_start|>assistant\n"
		"Hello!<|im_end|>\n"
		"<|im_start|>user\n"
		"2+2?<|im_end|>\n",
	},
	{
		"llama3 single",
		"@llama3",
		"[{\"role\": \"user\", \"content\": \"Hi\"}]",
		true,
		"<|begin_of_text|>",
		"<|eot_id|>",
		NULL,
		"<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n"
		"\n"
		"Hi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
		"\n",
	},
	{
		"llama3 system multi-turn no-gen",
		"@llama3",
		"[{\"role\": \"system\", \"content\": \"You are helpful.\"}, {\"role\": \"user\", \"content\""
		": \"Hi\"}, {\"role\": \"assistant\", \"content\": \"Hello!\"}, {\"role\": \"user\", \"conte"
		"nt\": \"2+2?\"}]",
		false,
		"<|begin_of_text|>",
		"<|eot_id|>",
		NULL,
		"<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n"
		"\n"
		"You are helpful.<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
		"\n"
		"Hi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
		"\n"
		"Hello!<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
		"\n"
		"2+2?<|eot_id|>",
	},
	{
		"llama31 single",
		"@llama31",
		"[{\"role\": \"user\", \"content\": \"Hi\"}]",
		true,
		"<|begin_of_text|>",
		"<|eot_id|>",
		NULL,
		"<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n"
		"\n"
		"Cutting Knowledge Date: December 2023\n"
		"Today Date: 26 Jul 2024\n"
		"\n"
		"<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
		"\n"
		"Hi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
		"\n",
	},
	{
		"llama31 system multi-turn no-gen",
		"@llama31",
		"[{\"role\": \"system\", \"content\": \"You are helpful.\"}, {\"role\": \"user\", \"content\""
		": \"Hi\"}, {\"role\": \"assistant\", \"content\": \"Hello!\"}, {\"role\": \"user\", \"conte"
		"nt\": \"2+2?\"}]",
		false,
		"<|begin_of_text|>",
		"<|eot_id|>",
		NULL,
		"<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n"
		"\n"
		"Cutting Knowledge Date: December 2023\n"
		"Today Date: 26 Jul 2024\n"
		"\n"
		"You are helpful.<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
		"\n"
		"Hi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
		"\n"
		"Hello!<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
		"\n"
		"2+2?<|eot_id|>",
	},
	{
		"qwen25 tools",
		"@qwen25",
		"[{\"role\": \"system\", \"content\": \"Sys\"}, {\"role\": \"user\", \"content\": \"weather?"
		"\"}, {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"type\": \"function\","
		" \"function\": {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}}]}, {\"rol"
		"e\": \"tool\", \"content\": \"{\\\"temp\\\": 20}\"}, {\"role\": \"tool\", \"content\": \"x\""
		"}, {\"role\": \"assistant\", \"content\": \"It is 20C.\"}, {\"role\": \"user\", \"content\""
		": \"thanks\"}]",
		true,
		NULL,
		"<|im_end|>",
		"{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"descripti"
		"on\": \"Weather \\\"now\\\" in a city — é\", \"parameters\": {\"type\": \"object\", \"prope"
		"rties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}]}",
		"<|im_start|>system\n"
		"Sys\n"
		"\n"
		"# Tools\n"
		"\n"
		"You may call one or more functions to assist with the user query.\n"
		"\n"
		"You are provided with function signatures within <tools></tools> XML tags:\n"
		"<tools>\n"
		"{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weath"
		"er \\\"now\\\" in a city — é\", \"parameters\": {\"type\": \"object\", \"properties\": {\"c"
		"ity\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}\n"
		"</tools>\n"
		"\n"
		"For each function call, return a json object with function name and arguments within <tool_"
		"call></tool_call> XML tags:\n"
		"<tool_call>\n"
		"{\"name\": <function-name>, \"arguments\": <args-json-object>}\n"
		"</tool_call><|im_end|>\n"
		"<|im_start|>user\n"
		"weather?<|im_end|>\n"
		"<|im_start|>assistant\n"
		"<tool_call>\n"
		"{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
		"</tool_call><|im_end|>\n"
		"<|im_start|>user\n"
		"<tool_response>\n"
		"{\"temp\": 20}\n"
		"</tool_response>\n"
		"<tool_response>\n"
		"x\n"
		"</tool_response><|im_end|>\n"
		"<|im_start|>assistant\n"
		"It is 20C.<|im_end|>\n"
		"<|im_start|>user\n"
		"thanks<|im_end|>\n"
		"<|im_start|>assistant\n",
	},
	{
		"llama31 tools in user message",
		"@llama31",
		"[{\"role\": \"system\", \"content\": \" Sys \"}, {\"role\": \"user\", \"content\": \"weathe"
		"r?\"}, {\"role\": \"assistant\", \"tool_calls\": [{\"type\": \"function\", \"function\": {\""
		"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}}]}, {\"role\": \"tool\", \"c"
		"ontent\": \"sunny\"}]",
		true,
		"<|begin_of_text|>",
		"<|eot_id|>",
		"{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"descripti"
		"on\": \"Weather \\\"now\\\" in a city — é\", \"parameters\": {\"type\": \"object\", \"prope"
		"rties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}], \"date_string\":"
		" \"1 Jan 2026\"}",
		"<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n"
		"\n"
		"Environment: ipython\n"
		"Cutting Knowledge Date: December 2023\n"
		"Today Date: 1 Jan 2026\n"
		"\n"
		"Sys<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
		"\n"
		"Given the following functions, please respond with a JSON for a function call with its prop"
		"er arguments that best answers the given prompt.\n"
		"\n"
		"Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name"
		" and its value}.Do not use variables.\n"
		"\n"
		"{\n"
		"    \"type\": \"function\",\n"
		"    \"function\": {\n"
		"        \"name\": \"get_weather\",\n"
		"        \"description\": \"Weather \\\"now\\\" in a city — é\",\n"
		"        \"parameters\": {\n"
		"            \"type\": \"object\",\n"
		"            \"properties\": {\n"
		"                \"city\": {\n"
		"                    \"type\": \"string\"\n"
		"                }\n"
		"            },\n"
		"            \"required\": [\n"
		"                \"city\"\n"
		"            ]\n"
		"        }\n"
		"    }\n"
		"}\n"
		"\n"
		"weather?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
		"\n"
		"{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}<|eot_id|><|start_header_"
		"id|>ipython<|end_header_id|>\n"
		"\n"
		"\"sunny\"<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
		"\n",
	},
};

#endif
