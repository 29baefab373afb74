#ifndef N11_CLIBCRYPTO_SHIM_H
#define N11_CLIBCRYPTO_SHIM_H
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/core_names.h>
#include <openssl/params.h>
#include <openssl/param_build.h>
#include <openssl/err.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/obj_mac.h>
#include <openssl/bn.h>
#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/pkcs12.h>
#include <string.h>

/* OSSL_PARAM construction is macro-heavy; these helpers give Swift one call each. The
   parameter names must be the C literals: an OSSL_PARAM keeps the key pointer, and a Swift
   String bridged for one call would dangle by the time EVP_KDF_derive reads it. */
static inline OSSL_PARAM n11_param_end(void) {
    return OSSL_PARAM_construct_end();
}
static inline OSSL_PARAM n11_kdf_digest(char *md) {
    return OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, md, 0);
}
static inline OSSL_PARAM n11_kdf_key(void *v, size_t n) { return OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, v, n); }
static inline OSSL_PARAM n11_kdf_salt(void *v, size_t n) { return OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, v, n); }
static inline OSSL_PARAM n11_kdf_info(void *v, size_t n) { return OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, v, n); }

/* P-256 keys (EVP_PKEY), for the same reason: the parameter names as C literals. */
static inline int n11_ec_push_group_p256(OSSL_PARAM_BLD *bld) {
    return OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, SN_X9_62_prime256v1, 0);
}
static inline int n11_ec_push_private(OSSL_PARAM_BLD *bld, const BIGNUM *d) {
    return OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_PRIV_KEY, d);
}
static inline int n11_ec_push_public(OSSL_PARAM_BLD *bld, const unsigned char *point, size_t n) {
    return OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, point, n);
}
static inline int n11_ec_get_private(const EVP_PKEY *pkey, BIGNUM **d) {
    return EVP_PKEY_get_bn_param(pkey, OSSL_PKEY_PARAM_PRIV_KEY, d);
}
static inline int n11_ec_get_public(const EVP_PKEY *pkey, unsigned char *out, size_t n, size_t *written) {
    return EVP_PKEY_get_octet_string_param(pkey, OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY, out, n, written);
}
static inline int n11_ec_get_group(const EVP_PKEY *pkey, char *out, size_t n, size_t *written) {
    return EVP_PKEY_get_utf8_string_param(pkey, OSSL_PKEY_PARAM_GROUP_NAME, out, n, written);
}
static inline int n11_nid_p256(void) { return NID_X9_62_prime256v1; }
static inline int n11_nid_aes256cbc(void) { return NID_aes_256_cbc; }
static inline int n11_selection_keypair(void) { return EVP_PKEY_KEYPAIR; }
static inline int n11_selection_public(void) { return EVP_PKEY_PUBLIC_KEY; }

/* A passphrase callback that never prompts: OpenSSL's default one reads the terminal. */
static int n11_pem_passphrase(char *buf, int size, int rwflag, void *u) {
    (void)rwflag;
    if (u == NULL) return -1;
    size_t n = strlen((const char *)u);
    if (n > (size_t)size) return -1;
    memcpy(buf, u, n);
    return (int)n;
}
/* Reads a PEM private key (PKCS#8, encrypted or not, or SEC1); pass may be NULL. */
static inline EVP_PKEY *n11_pem_read_private(BIO *bio, const char *pass) {
    return PEM_read_bio_PrivateKey(bio, NULL, n11_pem_passphrase, (void *)pass);
}
/* BIO_get_mem_data is a macro. */
static inline long n11_bio_mem_data(BIO *bio, char **data) { return BIO_get_mem_data(bio, data); }
#endif
