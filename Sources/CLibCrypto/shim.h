#ifndef N11_CLIBCRYPTO_SHIM_H
#define N11_CLIBCRYPTO_SHIM_H
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/core_names.h>
#include <openssl/params.h>
#include <openssl/err.h>
#include <openssl/crypto.h>

/* OSSL_PARAM construction is macro-heavy; these helpers give Swift one call each. The
   parameter names must be the C literals: an OSSL_PARAM keeps the key pointer, and a Swift
   String bridged for one call would dangle by the time EVP_KDF_derive reads it. */
static inline OSSL_PARAM n11_param_end(void) {
    return OSSL_PARAM_construct_end();
}
static inline OSSL_PARAM n11_hkdf_digest(char *md) {
    return OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, md, 0);
}
static inline OSSL_PARAM n11_hkdf_key(void *v, size_t n) { return OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, v, n); }
static inline OSSL_PARAM n11_hkdf_salt(void *v, size_t n) { return OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, v, n); }
static inline OSSL_PARAM n11_hkdf_info(void *v, size_t n) { return OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, v, n); }
#endif
