/* The tool sub-commands of the mlaserve binary (app/main.c lists them): benchmarks and the
 * raw-logits dump. Same contract as app/commands.h: argv[0] is the command name; the exit
 * status is returned (0 ok, 1 error after one line on stderr, 2 usage). */
#ifndef MLA_TOOLS_TOOLS_H
#define MLA_TOOLS_TOOLS_H

int cmd_logits(int argc, char **argv);
int cmd_bench(int argc, char **argv);

#endif
