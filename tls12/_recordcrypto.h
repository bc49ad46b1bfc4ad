/*
 * tls12._recordcrypto: declarations shared by the Python binding (_recordcrypto.c)
 * and the record algorithms on raw buffers (_recordcrypto_core.c).
 *
 * The core functions carry an rc_ prefix: they are the only non-static symbols
 * besides PyInit__recordcrypto.  The record algorithms (seal, open, MAC) touch no
 * Python object and set no Python exception: they return a negative RC_* code,
 * which the binding turns into RecordCryptoError once it holds the GIL again
 * (rc_raise), so that the binding may run them with the GIL released.  Only
 * rc_setup, which builds the contexts, reports errors as Python exceptions.
 */
#ifndef TLS12_RECORDCRYPTO_H
#define TLS12_RECORDCRYPTO_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>

#define MODULE_NAME "tls12._recordcrypto"

#define AES_BLOCK 16
#define AAD_LENGTH 13
#define MAC_LENGTH_MAX 32
#define PLAINTEXT_MAX 16384
#define HEADER_LENGTH 5
#define FRAGMENT_MAX (16384 + 2048)
#define TLS1_1 0x0302
#define BAD_RECORD "bad record MAC"
#define NO_MAC_KEY "cipher was built without a MAC key: only seal_with_mac is available"

#define BYTES(o) ((unsigned char *)PyBytes_AS_STRING(o))
#define LENGTH(o) ((size_t)PyBytes_GET_SIZE(o))

/* Defined once, in _recordcrypto.c (set by module init). */
extern PyObject *rc_RecordCryptoError;
extern EVP_MAC *rc_hmac_algorithm;

typedef struct {
    PyObject_HEAD
    int ready; /* __init__ succeeded: every context the methods use exists */
    int null_cipher, mac_length, block_size, has_mac_key;
    char stitched, multiblock;
    EVP_CIPHER_CTX *cbc_encrypt, *cbc_decrypt, *ecb_decrypt, *stitched_encrypt, *stitched_decrypt;
    EVP_MAC_CTX *hmac;
    /* Held by every method that uses the contexts or the buffer: with the GIL released,
     * two threads may call one object at once (tp_new creates it, dealloc frees it). */
    PyThread_type_lock lock;
    unsigned char mac_key[MAC_LENGTH_MAX];
    unsigned char buffer[FRAGMENT_MAX];
} RecordCipherObject;

typedef struct {
    uint64_t seq;
    unsigned int content_type, version;
} RecordHeader;

/* Errors of the binding and of rc_setup (GIL held): -1 with a Python exception set. */

static inline int
fail(PyObject *type, const char *message)
{
    ERR_clear_error();
    PyErr_SetString(type, message);
    return -1;
}

/* Errors of the record algorithms (GIL not needed): a negative code, no exception. */
#define RC_OPENSSL_FAILED (-1)
#define RC_BAD_RECORD (-2)

static inline int
core_error(int code)
{
    ERR_clear_error(); /* OpenSSL's error queue is per thread */
    return code;
}

#define OPENSSL_FAILED() core_error(RC_OPENSSL_FAILED)
#define BAD_RECORD_ERROR() core_error(RC_BAD_RECORD)

/* With the GIL: the RecordCryptoError for a negative RC_* code; returns -1. */
static inline int
rc_raise(Py_ssize_t code)
{
    return fail(rc_RecordCryptoError, code == RC_BAD_RECORD ? BAD_RECORD : "OpenSSL call failed");
}

/* Core (_recordcrypto_core.c); see the definitions for the details. */

void rc_write_aad(unsigned char *aad, uint64_t seq, const RecordHeader *h, size_t length);
size_t rc_fragment_length(const RecordCipherObject *self, size_t length);
int rc_hmac_compute(RecordCipherObject *self, const unsigned char *aad,
                    const unsigned char *data, size_t length, unsigned char *out);
int rc_seal_generic(RecordCipherObject *self, const unsigned char *aad,
                    const unsigned char *plaintext, size_t length, const unsigned char *mac,
                    const unsigned char *iv, unsigned char *out);
int rc_seal_stitched(RecordCipherObject *self, const RecordHeader *h, uint64_t seq,
                     const unsigned char *plaintext, size_t length, const unsigned char *iv,
                     unsigned char *out);
Py_ssize_t rc_seal_random_iv(RecordCipherObject *self, const RecordHeader *h, uint64_t seq,
                             const unsigned char *plaintext, size_t length, unsigned char *out);
Py_ssize_t rc_seal_multiblock(RecordCipherObject *self, const RecordHeader *h, uint64_t seq,
                              const unsigned char *plaintext, unsigned int count,
                              unsigned char *out);
Py_ssize_t rc_open_one(RecordCipherObject *self, const RecordHeader *h, uint64_t seq,
                       const unsigned char *fragment, size_t n, const unsigned char **plaintext);
void rc_free_contexts(RecordCipherObject *self);
int rc_setup(RecordCipherObject *self, const char *cipher, const char *mac, PyObject *enc_key,
             PyObject *mac_key, int want_stitched, int want_multiblock);

#endif /* TLS12_RECORDCRYPTO_H */
