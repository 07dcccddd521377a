/* HTTPS for `serve --ssl-keyfile KEY --ssl-certfile CERT` (vLLM's flags): the PEM files are
 * read and checked as a pair before the model loads, so that a wrong path or a key that does
 * not match its certificate fails at once with a line naming the file. */
#ifndef MLA_SERVER_HTTP_TLS_H
#define MLA_SERVER_HTTP_TLS_H

#include "base/err.h"

/* Reads both files into new NUL-terminated buffers (free()) and checks that GnuTLS, which
 * serves them, takes them: a PEM private key, a PEM certificate chain, the key matching the
 * first certificate. */
int tls_load_pair(const char *key_path, const char *cert_path, char **key_pem, char **cert_pem, struct err *e);

#endif
