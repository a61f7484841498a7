#include "CTLSShims.h"

long wsp_ssl_set_sni(SSL *ssl, const char *name) { return SSL_set_tlsext_host_name(ssl, name); }

long wsp_ssl_ctx_set_min_version(SSL_CTX *ctx, int version) { return SSL_CTX_set_min_proto_version(ctx, version); }

long wsp_ssl_set_nonblocking_modes(SSL *ssl) {
    return SSL_set_mode(ssl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
}

void wsp_ssl_ctx_ignore_unexpected_eof(SSL_CTX *ctx) {
#ifdef SSL_OP_IGNORE_UNEXPECTED_EOF
    SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
#else
    (void)ctx;
#endif
}

int wsp_tls1_2_version(void) { return TLS1_2_VERSION; }
int wsp_tls1_3_version(void) { return TLS1_3_VERSION; }
