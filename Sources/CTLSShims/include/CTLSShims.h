#ifndef WSPIPE_TLS_SHIMS_H
#define WSPIPE_TLS_SHIMS_H
#include <stddef.h>
#include <stdint.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

/* OpenSSL, loaded on demand.
 *
 * wspipe does not link libssl or libcrypto: wsp_tls_load() dlopens libssl.so.3 and
 * libcrypto.so.3 the first time a TLS connection is made and resolves every function
 * below. Each wsp_X function calls OpenSSL's X with the same arguments and result; the
 * ones named after macros (SNI, modes, minimum version) expand the macro here, since
 * Swift cannot import macros. Call wsp_tls_load() successfully before any other. */

/// Loads OpenSSL 3. Returns 0, or -1 with a one-line reason in `error`.
int wsp_tls_load(char *error, size_t length);

const SSL_METHOD *wsp_TLS_client_method(void);
SSL_CTX *wsp_SSL_CTX_new(const SSL_METHOD *method);
void wsp_SSL_CTX_free(SSL_CTX *ctx);
void wsp_SSL_CTX_set_verify(SSL_CTX *ctx, int mode);
int wsp_SSL_CTX_load_verify_locations(SSL_CTX *ctx, const char *file, const char *path);
int wsp_SSL_CTX_set_default_verify_paths(SSL_CTX *ctx);
int wsp_SSL_CTX_set_alpn_protos(SSL_CTX *ctx, const unsigned char *protos, unsigned int length);
int wsp_SSL_CTX_check_private_key(const SSL_CTX *ctx);
/// Loads a PEM private key; an encrypted one is decrypted with `password` (`length` bytes,
/// NULL: none). OpenSSL never prompts. `*asked` tells whether the key needed a password.
int wsp_SSL_CTX_use_PrivateKey_file_with_password(SSL_CTX *ctx, const char *file, const char *password,
                                                   size_t length, int *asked);
/// SSL_CTX_use_certificate_chain_file without OpenSSL's terminal prompt.
int wsp_SSL_CTX_use_certificate_chain_file_no_prompt(SSL_CTX *ctx, const char *file);
/// Sets `*flag` to 1 if the server asks for a client certificate (only when none is
/// configured). `flag` must stay valid as long as `ssl`.
void wsp_SSL_track_certificate_request(SSL_CTX *ctx, SSL *ssl, int *flag);
/// Overwrites memory in a way the compiler keeps (secrets).
void wsp_OPENSSL_cleanse(void *pointer, size_t length);
/// SSL_CTX_set_min_proto_version (a macro).
long wsp_SSL_CTX_set_min_proto_version(SSL_CTX *ctx, int version);
/// SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF): a peer that drops TCP without
/// close_notify reads as end of stream (WebSocket has its own closing handshake).
void wsp_SSL_CTX_ignore_unexpected_eof(SSL_CTX *ctx);

SSL *wsp_SSL_new(SSL_CTX *ctx);
void wsp_SSL_free(SSL *ssl);
int wsp_SSL_set_fd(SSL *ssl, int fd);
/// SSL_set_tlsext_host_name (a macro): the SNI name.
long wsp_SSL_set_tlsext_host_name(SSL *ssl, const char *name);
/// SSL_set_mode(ssl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER).
long wsp_SSL_set_nonblocking_modes(SSL *ssl);
int wsp_SSL_set1_host(SSL *ssl, const char *hostname);
/// X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), ip): verify an IP address instead.
int wsp_SSL_set1_ip(SSL *ssl, const char *ip);
int wsp_SSL_connect(SSL *ssl);
int wsp_SSL_get_error(const SSL *ssl, int result);
long wsp_SSL_get_verify_result(const SSL *ssl);
const char *wsp_SSL_get_version(const SSL *ssl);
/// SSL_CIPHER_get_name(SSL_get_current_cipher(ssl)), or NULL.
const char *wsp_SSL_cipher_name(const SSL *ssl);
int wsp_SSL_read(SSL *ssl, void *buffer, int count);
int wsp_SSL_write(SSL *ssl, const void *buffer, int count);
int wsp_SSL_has_pending(const SSL *ssl);
/// Decrypted bytes ready to read (not a record still arriving, which SSL_has_pending counts).
int wsp_SSL_pending(const SSL *ssl);
int wsp_SSL_shutdown(SSL *ssl);

/* TLS over another stream (TLS inside an HTTPS proxy's tunnel): the SSL reads and writes
 * one end of a BIO pair, the caller moves bytes between `*network` and the carrier. */
/// BIO_new_bio_pair + SSL_set_bio. Returns 1, or 0 on failure.
int wsp_SSL_set_bio_pair(SSL *ssl, BIO **network, size_t buffer_size);
int wsp_BIO_read(BIO *bio, void *buffer, int count);
int wsp_BIO_write(BIO *bio, const void *buffer, int count);
size_t wsp_BIO_ctrl_pending(BIO *bio);
size_t wsp_BIO_ctrl_get_write_guarantee(BIO *bio);
void wsp_BIO_free(BIO *bio);
/// BIO_ctrl_wpending (a macro): bytes written into `bio` that its pair has not read yet.
size_t wsp_BIO_ctrl_wpending(BIO *bio);

void wsp_ERR_clear_error(void);
unsigned long wsp_ERR_get_error(void);
void wsp_ERR_error_string_n(unsigned long code, char *buffer, size_t length);
const char *wsp_X509_verify_cert_error_string(long code);

/* The server's side (wspipe -l with --cert). */
const SSL_METHOD *wsp_TLS_server_method(void);
int wsp_SSL_CTX_up_ref(SSL_CTX *ctx);
int wsp_SSL_accept(SSL *ssl);
/// Server preference for ciphers, no renegotiation (a client-driven CPU cost), read-ahead
/// (one read(2) takes every record that has arrived, not two per record), no read and
/// write buffers kept while idle, and the session id context that session resumption
/// needs once client certificates are verified.
void wsp_SSL_CTX_set_server_options(SSL_CTX *ctx);
/// Trusts the CA certificates in `ca_file` for client certificates, names them in the
/// CertificateRequest, and fails a handshake without a valid client certificate
/// (SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT). Returns 1, or 0 if the file cannot be loaded.
int wsp_SSL_CTX_require_client_certificates(SSL_CTX *ctx, const char *ca_file);
/// The peer certificate's subject in RFC 2253 form (UTF-8 unescaped) into `buffer`
/// (NUL-terminated, truncated to `length - 1`). Returns its length, or -1 without a peer
/// certificate.
int wsp_SSL_peer_subject(const SSL *ssl, char *buffer, size_t length);

/// Version constants (macros).
int wsp_TLS1_2_VERSION(void);
int wsp_TLS1_3_VERSION(void);

#endif
