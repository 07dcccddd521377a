/* Sub-commands of the mlaserve binary. Each parses its own flags and returns a process exit
 * status (0 ok, 1 error after printing one line to stderr, 2 usage). Only main() exits. */
#ifndef MLA_APP_COMMANDS_H
#define MLA_APP_COMMANDS_H

struct command {
	const char *name;
	const char *summary;
	int (*run)(int argc, char **argv); /* argv[0] is the command name */
};

int cmd_generate(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_detokenize(int argc, char **argv);
int cmd_chat_template(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_dist_check(int argc, char **argv);

#endif
