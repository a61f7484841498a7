#ifndef WSPIPE_TLS_SHIMS_H
#define WSPIPE_TLS_SHIMS_H
#include <openssl/ssl.h>

/* OpenSSL API that is a macro (SSL_ctrl / SSL_CTX_ctrl underneath), which Swift cannot
 * import. Each returns what the macro returns. */

/// SSL_set_tlsext_host_name: the SNI name sent in the ClientHello.
long wsp_ssl_set_sni(SSL *ssl, const char *name);
/// SSL_CTX_set_min_proto_version.
long wsp_ssl_ctx_set_min_version(SSL_CTX *ctx, int version);
/// SSL_set_mode(ssl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER).
long wsp_ssl_set_nonblocking_modes(SSL *ssl);
/// SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF): a peer that drops TCP without
/// close_notify reads as end of stream (WebSocket has its own closing handshake).
void wsp_ssl_ctx_ignore_unexpected_eof(SSL_CTX *ctx);
/// Version constants as ints (they are macros too).
int wsp_tls1_2_version(void);
int wsp_tls1_3_version(void);

#endif
