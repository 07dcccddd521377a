#include "server/http/tls.h"

#include <gnutls/gnutls.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"

int tls_load_pair(const char *key_path, const char *cert_path, char **key_pem, char **cert_pem, struct err *e)
{
	*key_pem = *cert_pem = NULL;
	size_t klen = 0, clen = 0;
	if (file_read_all(key_path, key_pem, &klen, e) < 0)
		return err_prefix(e, "--ssl-keyfile");
	if (file_read_all(cert_path, cert_pem, &clen, e) < 0) {
		err_prefix(e, "--ssl-certfile");
		goto fail;
	}
	if (!strstr(*key_pem, "-----BEGIN") || !strstr(*key_pem, "PRIVATE KEY-----")) {
		err_set(e, "--ssl-keyfile %s: not a PEM private key", key_path);
		goto fail;
	}
	if (!strstr(*cert_pem, "-----BEGIN CERTIFICATE-----")) {
		err_set(e, "--ssl-certfile %s: not a PEM certificate", cert_path);
		goto fail;
	}
	gnutls_certificate_credentials_t cred;
	if (gnutls_certificate_allocate_credentials(&cred) < 0) {
		err_set(e, "TLS: out of memory");
		goto fail;
	}
	gnutls_datum_t k = {(unsigned char *)*key_pem, (unsigned)klen},
		       c = {(unsigned char *)*cert_pem, (unsigned)clen};
	int rc = gnutls_certificate_set_x509_key_mem(cred, &c, &k, GNUTLS_X509_FMT_PEM);
	gnutls_certificate_free_credentials(cred);
	if (rc < 0) {
		if (rc == GNUTLS_E_CERTIFICATE_KEY_MISMATCH)
			err_set(e, "--ssl-keyfile %s does not match the certificate in --ssl-certfile %s", key_path,
				cert_path);
		else
			err_set(e, "--ssl-keyfile %s / --ssl-certfile %s: %s", key_path, cert_path,
				gnutls_strerror(rc));
		goto fail;
	}
	return 0;
fail:
	free(*key_pem);
	free(*cert_pem);
	*key_pem = *cert_pem = NULL;
	return -1;
}
