#include "CTLSShims.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* Function pointers with OpenSSL's own types, filled by wsp_tls_load(). */
#define WSP_SSL_FUNCTIONS(X)                                                                  \
    X(TLS_client_method) X(SSL_CTX_new) X(SSL_CTX_free) X(SSL_CTX_set_verify)                 \
    X(SSL_CTX_load_verify_locations) X(SSL_CTX_set_default_verify_paths)                      \
    X(SSL_CTX_set_alpn_protos) X(SSL_CTX_use_certificate_chain_file)                          \
    X(SSL_CTX_use_PrivateKey_file) X(SSL_CTX_check_private_key)                               \
    X(SSL_CTX_set_default_passwd_cb_userdata) X(SSL_CTX_ctrl) X(SSL_CTX_set_options)          \
    X(SSL_new) X(SSL_free) X(SSL_set_fd) X(SSL_ctrl) X(SSL_set1_host) X(SSL_get0_param)       \
    X(SSL_connect) X(SSL_get_error) X(SSL_get_verify_result) X(SSL_get_version)               \
    X(SSL_get_current_cipher) X(SSL_CIPHER_get_name) X(SSL_read) X(SSL_write)                 \
    X(SSL_has_pending) X(SSL_pending) X(SSL_shutdown) X(SSL_CTX_set_default_passwd_cb) X(SSL_set_bio)       \
    X(SSL_CTX_set_client_cert_cb) X(SSL_set_ex_data) X(SSL_get_ex_data)                       \
    X(TLS_server_method) X(SSL_CTX_up_ref) X(SSL_accept) X(SSL_CTX_set_session_id_context)    \
    X(SSL_load_client_CA_file) X(SSL_CTX_set_client_CA_list) X(SSL_get1_peer_certificate)
#define WSP_CRYPTO_FUNCTIONS(X)                                                               \
    X(ERR_clear_error) X(ERR_get_error) X(ERR_error_string_n) X(X509_VERIFY_PARAM_set1_ip_asc) \
    X(X509_verify_cert_error_string) X(BIO_new_bio_pair) X(BIO_read) X(BIO_write)             \
    X(BIO_ctrl_pending) X(BIO_ctrl_get_write_guarantee) X(BIO_free) X(OPENSSL_cleanse) X(BIO_ctrl)     \
    X(BIO_new) X(BIO_s_mem) X(X509_get_subject_name) X(X509_NAME_print_ex) X(X509_free)

#define WSP_DECLARE(name) static __typeof__(&name) p_##name;
WSP_SSL_FUNCTIONS(WSP_DECLARE)
WSP_CRYPTO_FUNCTIONS(WSP_DECLARE)

static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static int loaded;

static void *open_first(const char *const *names, char *error, size_t length) {
    for (const char *const *name = names; *name; name++) {
        void *handle = dlopen(*name, RTLD_NOW | RTLD_LOCAL);
        if (handle) return handle;
    }
    const char *why = dlerror();
    snprintf(error, length, "cannot load %s (install OpenSSL 3: apt-get install libssl3): %s", names[0],
             why ? why : "not found");
    return NULL;
}

int wsp_tls_load(char *error, size_t length) {
    pthread_mutex_lock(&load_lock);
    if (loaded) {
        pthread_mutex_unlock(&load_lock);
        return 0;
    }
    static const char *const ssl_names[] = {"libssl.so.3", "libssl.so", NULL};
    static const char *const crypto_names[] = {"libcrypto.so.3", "libcrypto.so", NULL};
    void *crypto = open_first(crypto_names, error, length);
    void *ssl = crypto ? open_first(ssl_names, error, length) : NULL;
    int ok = ssl != NULL;
#define WSP_RESOLVE(handle, name)                                                             \
    if (ok) {                                                                                 \
        p_##name = (__typeof__(p_##name))dlsym(handle, #name);                                \
        if (!p_##name) {                                                                      \
            snprintf(error, length, "the OpenSSL library has no %s (OpenSSL 3 is needed)", #name); \
            ok = 0;                                                                           \
        }                                                                                     \
    }
#define WSP_RESOLVE_SSL(name) WSP_RESOLVE(ssl, name)
#define WSP_RESOLVE_CRYPTO(name) WSP_RESOLVE(crypto, name)
    WSP_SSL_FUNCTIONS(WSP_RESOLVE_SSL)
    WSP_CRYPTO_FUNCTIONS(WSP_RESOLVE_CRYPTO)
    // Without NO_ATEXIT, exit() frees OpenSSL's tables while another thread (a connect
    // or a bus link under way when a signal ends the process) may still use them: a crash
    // at exit. The kernel frees everything at exit anyway.
    __typeof__(&OPENSSL_init_ssl) init = ok ? (__typeof__(&OPENSSL_init_ssl))dlsym(ssl, "OPENSSL_init_ssl") : NULL;
    if (init) init(OPENSSL_INIT_NO_ATEXIT, NULL);
    loaded = ok;
    pthread_mutex_unlock(&load_lock);
    return ok ? 0 : -1;
}

const SSL_METHOD *wsp_TLS_client_method(void) { return p_TLS_client_method(); }
SSL_CTX *wsp_SSL_CTX_new(const SSL_METHOD *method) { return p_SSL_CTX_new(method); }
void wsp_SSL_CTX_free(SSL_CTX *ctx) { p_SSL_CTX_free(ctx); }
void wsp_SSL_CTX_set_verify(SSL_CTX *ctx, int mode) { p_SSL_CTX_set_verify(ctx, mode, NULL); }
int wsp_SSL_CTX_load_verify_locations(SSL_CTX *ctx, const char *file, const char *path) {
    return p_SSL_CTX_load_verify_locations(ctx, file, path);
}
int wsp_SSL_CTX_set_default_verify_paths(SSL_CTX *ctx) { return p_SSL_CTX_set_default_verify_paths(ctx); }
int wsp_SSL_CTX_set_alpn_protos(SSL_CTX *ctx, const unsigned char *protos, unsigned int length) {
    return p_SSL_CTX_set_alpn_protos(ctx, protos, length);
}
int wsp_SSL_CTX_check_private_key(const SSL_CTX *ctx) { return p_SSL_CTX_check_private_key(ctx); }
/* The passphrase of an encrypted key: handed to OpenSSL only by this callback, so that
 * OpenSSL never prompts on the terminal (its default callback would). */
struct wsp_password {
    const char *bytes;
    size_t length;
    int asked;
};

static int wsp_password_callback(char *buffer, int size, int rwflag, void *userdata) {
    (void)rwflag;
    struct wsp_password *password = userdata;
    if (!password) return -1;
    password->asked = 1;
    if (!password->bytes || password->length == 0 || password->length > (size_t)size) return -1;
    memcpy(buffer, password->bytes, password->length);
    return (int)password->length;
}

int wsp_SSL_CTX_use_PrivateKey_file_with_password(SSL_CTX *ctx, const char *file, const char *password,
                                                   size_t length, int *asked) {
    struct wsp_password holder = {password, length, 0};
    p_SSL_CTX_set_default_passwd_cb(ctx, wsp_password_callback);
    p_SSL_CTX_set_default_passwd_cb_userdata(ctx, &holder);
    int result = p_SSL_CTX_use_PrivateKey_file(ctx, file, SSL_FILETYPE_PEM);
    p_SSL_CTX_set_default_passwd_cb_userdata(ctx, NULL);
    if (asked) *asked = holder.asked;
    return result;
}

int wsp_SSL_CTX_use_certificate_chain_file_no_prompt(SSL_CTX *ctx, const char *file) {
    p_SSL_CTX_set_default_passwd_cb(ctx, wsp_password_callback);
    p_SSL_CTX_set_default_passwd_cb_userdata(ctx, NULL);
    return p_SSL_CTX_use_certificate_chain_file(ctx, file);
}

/* Called by OpenSSL when the server asks for a client certificate and none is set: notes
 * it in the flag stored as the SSL's app data, and goes on without a certificate. */
static int wsp_client_cert_callback(SSL *ssl, X509 **x509, EVP_PKEY **pkey) {
    (void)x509;
    (void)pkey;
    int *flag = p_SSL_get_ex_data(ssl, 0);
    if (flag) *flag = 1;
    return 0;
}

void wsp_SSL_track_certificate_request(SSL_CTX *ctx, SSL *ssl, int *flag) {
    p_SSL_set_ex_data(ssl, 0, flag);
    p_SSL_CTX_set_client_cert_cb(ctx, wsp_client_cert_callback);
}

void wsp_OPENSSL_cleanse(void *pointer, size_t length) { p_OPENSSL_cleanse(pointer, length); }

long wsp_SSL_CTX_set_min_proto_version(SSL_CTX *ctx, int version) {
    return p_SSL_CTX_ctrl(ctx, SSL_CTRL_SET_MIN_PROTO_VERSION, version, NULL);
}
void wsp_SSL_CTX_ignore_unexpected_eof(SSL_CTX *ctx) {
#ifdef SSL_OP_IGNORE_UNEXPECTED_EOF
    p_SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
#else
    (void)ctx;
#endif
}

SSL *wsp_SSL_new(SSL_CTX *ctx) { return p_SSL_new(ctx); }
void wsp_SSL_free(SSL *ssl) { p_SSL_free(ssl); }
int wsp_SSL_set_fd(SSL *ssl, int fd) { return p_SSL_set_fd(ssl, fd); }
long wsp_SSL_set_tlsext_host_name(SSL *ssl, const char *name) {
    return p_SSL_ctrl(ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name, (void *)name);
}
long wsp_SSL_set_nonblocking_modes(SSL *ssl) {
    return p_SSL_ctrl(ssl, SSL_CTRL_MODE, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER, NULL);
}
int wsp_SSL_set1_host(SSL *ssl, const char *hostname) { return p_SSL_set1_host(ssl, hostname); }
int wsp_SSL_set1_ip(SSL *ssl, const char *ip) { return p_X509_VERIFY_PARAM_set1_ip_asc(p_SSL_get0_param(ssl), ip); }
int wsp_SSL_connect(SSL *ssl) { return p_SSL_connect(ssl); }
int wsp_SSL_get_error(const SSL *ssl, int result) { return p_SSL_get_error(ssl, result); }
long wsp_SSL_get_verify_result(const SSL *ssl) { return p_SSL_get_verify_result(ssl); }
const char *wsp_SSL_get_version(const SSL *ssl) { return p_SSL_get_version(ssl); }
const char *wsp_SSL_cipher_name(const SSL *ssl) {
    const SSL_CIPHER *cipher = p_SSL_get_current_cipher(ssl);
    return cipher ? p_SSL_CIPHER_get_name(cipher) : NULL;
}
int wsp_SSL_read(SSL *ssl, void *buffer, int count) { return p_SSL_read(ssl, buffer, count); }
int wsp_SSL_write(SSL *ssl, const void *buffer, int count) { return p_SSL_write(ssl, buffer, count); }
int wsp_SSL_has_pending(const SSL *ssl) { return p_SSL_has_pending(ssl); }
int wsp_SSL_pending(const SSL *ssl) { return p_SSL_pending(ssl); }
int wsp_SSL_shutdown(SSL *ssl) { return p_SSL_shutdown(ssl); }

int wsp_SSL_set_bio_pair(SSL *ssl, BIO **network, size_t buffer_size) {
    BIO *internal = NULL;
    if (p_BIO_new_bio_pair(&internal, buffer_size, network, buffer_size) != 1) return 0;
    p_SSL_set_bio(ssl, internal, internal);
    return 1;
}
int wsp_BIO_read(BIO *bio, void *buffer, int count) { return p_BIO_read(bio, buffer, count); }
int wsp_BIO_write(BIO *bio, const void *buffer, int count) { return p_BIO_write(bio, buffer, count); }
size_t wsp_BIO_ctrl_pending(BIO *bio) { return p_BIO_ctrl_pending(bio); }
size_t wsp_BIO_ctrl_get_write_guarantee(BIO *bio) { return p_BIO_ctrl_get_write_guarantee(bio); }
void wsp_BIO_free(BIO *bio) { p_BIO_free(bio); }
size_t wsp_BIO_ctrl_wpending(BIO *bio) { return (size_t)p_BIO_ctrl(bio, BIO_CTRL_WPENDING, 0, NULL); }

void wsp_ERR_clear_error(void) { p_ERR_clear_error(); }
unsigned long wsp_ERR_get_error(void) { return p_ERR_get_error(); }
void wsp_ERR_error_string_n(unsigned long code, char *buffer, size_t length) { p_ERR_error_string_n(code, buffer, length); }
const char *wsp_X509_verify_cert_error_string(long code) { return p_X509_verify_cert_error_string(code); }

/* The server's side. */
const SSL_METHOD *wsp_TLS_server_method(void) { return p_TLS_server_method(); }
int wsp_SSL_CTX_up_ref(SSL_CTX *ctx) { return p_SSL_CTX_up_ref(ctx); }
int wsp_SSL_accept(SSL *ssl) { return p_SSL_accept(ssl); }
void wsp_SSL_CTX_set_server_options(SSL_CTX *ctx) {
    long options = SSL_OP_CIPHER_SERVER_PREFERENCE;
#ifdef SSL_OP_NO_RENEGOTIATION
    options |= SSL_OP_NO_RENEGOTIATION;
#endif
    p_SSL_CTX_set_options(ctx, options);
    p_SSL_CTX_ctrl(ctx, SSL_CTRL_SET_READ_AHEAD, 1, NULL);
    /* An idle connection keeps no 16 KiB read and write buffers (many idle clients). */
    p_SSL_CTX_ctrl(ctx, SSL_CTRL_MODE, SSL_MODE_RELEASE_BUFFERS, NULL);
    static const unsigned char context[] = "wspipe";
    p_SSL_CTX_set_session_id_context(ctx, context, sizeof context - 1);
}
int wsp_SSL_CTX_require_client_certificates(SSL_CTX *ctx, const char *ca_file) {
    if (p_SSL_CTX_load_verify_locations(ctx, ca_file, NULL) != 1) return 0;
    STACK_OF(X509_NAME) *names = p_SSL_load_client_CA_file(ca_file);
    if (names) p_SSL_CTX_set_client_CA_list(ctx, names);
    p_SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
    return 1;
}
int wsp_SSL_peer_subject(const SSL *ssl, char *buffer, size_t length) {
    if (length == 0) return -1;
    X509 *peer = p_SSL_get1_peer_certificate(ssl);
    if (!peer) return -1;
    int written = -1;
    BIO *bio = p_BIO_new(p_BIO_s_mem());
    if (bio) {
        /* RFC 2253, UTF-8 kept as UTF-8 (only the RFC's specials escaped). */
        if (p_X509_NAME_print_ex(bio, p_X509_get_subject_name(peer), 0, XN_FLAG_RFC2253 & ~ASN1_STRFLGS_ESC_MSB) >= 0) {
            int n = p_BIO_read(bio, buffer, (int)(length - 1));
            written = n < 0 ? 0 : n;
            buffer[written] = 0;
        }
        p_BIO_free(bio);
    }
    p_X509_free(peer);
    return written;
}

int wsp_TLS1_2_VERSION(void) { return TLS1_2_VERSION; }
int wsp_TLS1_3_VERSION(void) { return TLS1_3_VERSION; }
