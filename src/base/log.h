/* Logging to stderr: "LEVEL [rank N] module: message". Rank 0 logs INFO; other ranks WARN+. */
#ifndef MLA_BASE_LOG_H
#define MLA_BASE_LOG_H

enum log_level { LOG_ERROR = 0, LOG_WARN = 1, LOG_INFO = 2, LOG_DEBUG = 3 };

extern enum log_level log_level; /* the one mutable global (DESIGN.md §6) */

void log_set_rank(int rank);
void log_msg(enum log_level lvl, const char *module, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#define LOG_E(mod, ...) log_msg(LOG_ERROR, mod, __VA_ARGS__)
#define LOG_W(mod, ...) log_msg(LOG_WARN, mod, __VA_ARGS__)
#define LOG_I(mod, ...) log_msg(LOG_INFO, mod, __VA_ARGS__)
#define LOG_D(mod, ...) log_msg(LOG_DEBUG, mod, __VA_ARGS__)

#endif
