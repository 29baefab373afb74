#ifndef N11_CLIBCRYPTO_SHIM_H
#define N11_CLIBCRYPTO_SHIM_H
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/core_names.h>
#include <openssl/params.h>
#include <openssl/err.h>
#include <openssl/crypto.h>

/* OSSL_PARAM construction is macro-heavy; these helpers give Swift one call each. */
static inline OSSL_PARAM n11_param_utf8(const char *key, char *value) {
    return OSSL_PARAM_construct_utf8_string(key, value, 0);
}
static inline OSSL_PARAM n11_param_octets(const char *key, void *value, size_t len) {
    return OSSL_PARAM_construct_octet_string(key, value, len);
}
static inline OSSL_PARAM n11_param_end(void) {
    return OSSL_PARAM_construct_end();
}
#endif
