/*
 * tls12._recordcrypto: TLS 1.2 MAC-then-encrypt record protection (RFC 5246 6.2.3).
 *
 * One RecordCipher object per direction and key.  Only bytes and int cross the
 * boundary; key derivation, sequence-number state and policy stay in Python
 * (tls12/recordcrypto.py documents the semantics; tls12/_recordcrypto_py.py is
 * the byte-identical pure-Python reference).
 *
 * Two code paths, byte-identical by construction and by test:
 *   - "stitched": OpenSSL's AES-CBC-HMAC-SHA1/SHA256 TLS ciphers, which hash and
 *     encrypt in a single pass (AES-NI only), driven the way libssl drives them:
 *     EVP_CTRL_AEAD_SET_MAC_KEY once, EVP_CTRL_AEAD_TLS1_AAD per record, then
 *     EVP_Cipher.  In TLS mode decryption checks padding and MAC in OpenSSL's
 *     Lucky-13-hardened constant-time code and reports only success/failure.
 *   - "generic": EVP AES-CBC plus EVP_MAC HMAC, with a constant-time padding
 *     check and MAC extraction in the style of OpenSSL's ssl3_cbc_copy_mac.
 *
 * The explicit IV argument is the record's IV field verbatim.  The stitched
 * cipher CBC-encrypts the explicit-IV block too, so with a zero context IV we
 * give it AES_k^-1(IV) as that block: AES_k(0 ^ AES_k^-1(IV)) = IV.
 *
 * Calls hold the GIL throughout: an object's contexts and buffer are shared state.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <stdint.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#define MODULE_NAME "tls12._recordcrypto"

#define AES_BLOCK 16
#define AAD_LENGTH 13
#define MAC_LENGTH_MAX 32
#define PLAINTEXT_MAX 16384
#define FRAGMENT_MAX (16384 + 2048)
#define TLS1_1 0x0302
#define BAD_RECORD "bad record MAC"
#define NO_MAC_KEY "cipher was built without a MAC key: only seal_with_mac is available"

#define BYTES(o) ((unsigned char *)PyBytes_AS_STRING(o))
#define LENGTH(o) ((size_t)PyBytes_GET_SIZE(o))

static PyObject *RecordCryptoError;
static PyObject *empty_bytes;
static EVP_MAC *hmac_algorithm;
static const unsigned char zero_iv[AES_BLOCK];

/* Stitched-path self-test verdict per [aes-256][sha256]: 0 untested, 1 ok, -1 off. */
static int stitched_verdict[2][2];

typedef struct {
    PyObject_HEAD
    int ready; /* __init__ succeeded: every context the methods use exists */
    int null_cipher, mac_length, block_size, has_mac_key;
    char stitched;
    EVP_CIPHER_CTX *cbc_encrypt, *cbc_decrypt, *ecb_decrypt, *stitched_encrypt, *stitched_decrypt;
    EVP_MAC_CTX *hmac;
    unsigned char mac_key[MAC_LENGTH_MAX];
    unsigned char buffer[FRAGMENT_MAX];
} RecordCipherObject;

typedef struct {
    uint64_t seq;
    unsigned int content_type, version;
} RecordHeader;

/* Constant-time helpers (OpenSSL internal/constant_time.h): all-ones or zero masks. */
static inline size_t ct_msb(size_t a) { return 0 - (a >> (sizeof(a) * 8 - 1)); }
static inline size_t ct_lt(size_t a, size_t b) { return ct_msb(a ^ ((a ^ b) | ((a - b) ^ b))); }
static inline size_t ct_ge(size_t a, size_t b) { return ~ct_lt(a, b); }
static inline size_t ct_is_zero(size_t a) { return ct_msb(~a & (a - 1)); }
static inline size_t ct_eq(size_t a, size_t b) { return ct_is_zero(a ^ b); }

/* Errors: -1 with a Python exception set. */

static int
fail(PyObject *type, const char *message)
{
    ERR_clear_error();
    PyErr_SetString(type, message);
    return -1;
}

#define OPENSSL_FAILED() fail(RecordCryptoError, "OpenSSL call failed")
#define BAD_RECORD_ERROR() fail(RecordCryptoError, BAD_RECORD)
#define CHECK_READY(self) \
    ((self)->ready ? 0 : fail(PyExc_ValueError, "RecordCipher.__init__ did not succeed"))
#define CHECK_MAC_KEY(self) \
    (CHECK_READY(self) < 0 ? -1 : (self)->has_mac_key ? 0 : fail(PyExc_ValueError, NO_MAC_KEY))
#define CHECK_PLAINTEXT(n) \
    ((n) <= PLAINTEXT_MAX ? 0 : fail(PyExc_ValueError, "plaintext longer than 2^14 bytes"))

/* Ints out of range are ValueError, never OverflowError. */
static int
parse_uint(PyObject *obj, uint64_t max, const char *name, uint64_t *out)
{
    unsigned long long value;

    if (!PyLong_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be an int", name);
        return -1;
    }
    value = PyLong_AsUnsignedLongLong(obj);
    if (value == (unsigned long long)-1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError))
            return -1;
        PyErr_Clear();
    } else if (value <= max) {
        *out = value;
        return 0;
    }
    PyErr_Format(PyExc_ValueError, "%s must be in 0..%llu", name, (unsigned long long)max);
    return -1;
}

/* Header fields of `count` consecutive records starting at sequence number seq. */
static int
parse_header(PyObject *seq, PyObject *content_type, PyObject *version, Py_ssize_t count,
             RecordHeader *h)
{
    uint64_t type, ver;

    if (parse_uint(seq, UINT64_MAX, "seq", &h->seq) < 0)
        return -1;
    if (count > 1 && h->seq > UINT64_MAX - (uint64_t)(count - 1))
        return fail(PyExc_ValueError, "sequence number would exceed 2^64-1");
    if (parse_uint(content_type, 0xFF, "content_type", &type) < 0
        || parse_uint(version, 0xFFFF, "version", &ver) < 0)
        return -1;
    h->content_type = (unsigned int)type;
    h->version = (unsigned int)ver;
    return 0;
}

/* seq_num(8) || type(1) || version(2) || length(2) */
static void
write_aad(unsigned char *aad, uint64_t seq, const RecordHeader *h, size_t length)
{
    int i;

    for (i = 7; i >= 0; i--, seq >>= 8)
        aad[i] = (unsigned char)seq;
    aad[8] = (unsigned char)h->content_type;
    aad[9] = (unsigned char)(h->version >> 8);
    aad[10] = (unsigned char)h->version;
    aad[11] = (unsigned char)(length >> 8);
    aad[12] = (unsigned char)length;
}

/* Length of the sealed fragment for a plaintext of `length` bytes (minimal padding). */
static size_t
fragment_length(const RecordCipherObject *self, size_t length)
{
    size_t body = length + (size_t)self->mac_length;

    return self->null_cipher ? body : AES_BLOCK + ((body + AES_BLOCK) & ~(size_t)(AES_BLOCK - 1));
}

/* HMAC over aad || data into out; with aad == out == NULL it only hashes (dummy work). */
static int
hmac_compute(RecordCipherObject *self, const unsigned char *aad, const unsigned char *data,
             size_t length, unsigned char *out)
{
    size_t outl;

    if (!EVP_MAC_init(self->hmac, self->mac_key, (size_t)self->mac_length, NULL)
        || (aad != NULL && !EVP_MAC_update(self->hmac, aad, AAD_LENGTH))
        || !EVP_MAC_update(self->hmac, data, length))
        return -1;
    if (out != NULL && (!EVP_MAC_final(self->hmac, out, &outl, MAC_LENGTH_MAX)
                        || outl != (size_t)self->mac_length))
        return -1;
    return 0;
}

/* Seal paths: `out` holds exactly fragment_length(length) bytes. */

static int
seal_generic(RecordCipherObject *self, const unsigned char *aad, const unsigned char *plaintext,
             size_t length, const unsigned char *mac, const unsigned char *iv, unsigned char *out)
{
    size_t total = fragment_length(self, length), padded = length + (size_t)self->mac_length;
    unsigned char *body = self->null_cipher ? out : out + AES_BLOCK;
    size_t body_length = self->null_cipher ? total : total - AES_BLOCK;
    int outl;

    memcpy(body, plaintext, length);
    if (mac != NULL)
        memcpy(body + length, mac, (size_t)self->mac_length);
    else if (hmac_compute(self, aad, plaintext, length, body + length) < 0)
        return OPENSSL_FAILED();
    if (self->null_cipher)
        return 0;
    memset(body + padded, (int)(body_length - padded - 1), body_length - padded);
    memcpy(out, iv, AES_BLOCK);
    if (!EVP_CipherInit_ex(self->cbc_encrypt, NULL, NULL, NULL, iv, 1)
        || !EVP_CipherUpdate(self->cbc_encrypt, body, &outl, body, (int)body_length)
        || (size_t)outl != body_length)
        return OPENSSL_FAILED();
    return 0;
}

static int
seal_stitched(RecordCipherObject *self, const RecordHeader *h, uint64_t seq,
              const unsigned char *plaintext, size_t length, const unsigned char *iv,
              unsigned char *out)
{
    /* 16 bytes: some OpenSSL releases write one byte past the 13-byte AAD. */
    unsigned char aad[AES_BLOCK] = {0};
    size_t total = fragment_length(self, length);
    int explicit_iv = h->version >= TLS1_1, outl, pad;
    unsigned char *start = explicit_iv ? out : out + AES_BLOCK;

    if (explicit_iv) {
        /* The cipher CBC-encrypts the IV block too, from a zero context IV. */
        if (!EVP_CipherUpdate(self->ecb_decrypt, out, &outl, iv, AES_BLOCK) || outl != AES_BLOCK)
            return OPENSSL_FAILED();
    } else {
        /* Versions before TLS 1.1 have no explicit IV: chain from the context IV. */
        memcpy(out, iv, AES_BLOCK);
    }
    memcpy(out + AES_BLOCK, plaintext, length);
    write_aad(aad, seq, h, length + (explicit_iv ? AES_BLOCK : 0));
    if (!EVP_CipherInit_ex(self->stitched_encrypt, NULL, NULL, NULL, explicit_iv ? zero_iv : iv, 1))
        return OPENSSL_FAILED();
    pad = EVP_CIPHER_CTX_ctrl(self->stitched_encrypt, EVP_CTRL_AEAD_TLS1_AAD, AAD_LENGTH, aad);
    if (pad <= 0 || (size_t)pad != total - AES_BLOCK - length
        || EVP_Cipher(self->stitched_encrypt, start, start, (unsigned int)(out + total - start)) <= 0)
        return OPENSSL_FAILED();
    return 0;
}

/* Open paths: return the plaintext length (plaintext at *plaintext) or -1. */

/* Copy the MAC that starts at secret offset `start` of rec[0:length] without
 * secret-dependent memory access (OpenSSL ssl3_cbc_copy_mac). */
static void
ct_copy_mac(unsigned char *out, const unsigned char *rec, size_t length, size_t start,
            size_t mac_length)
{
    unsigned char rotated[MAC_LENGTH_MAX] = {0};
    size_t end = start + mac_length, scan = 0, offset = 0, in_mac = 0, i, j;

    if (length > mac_length + 256)
        scan = length - (mac_length + 256);
    for (i = scan, j = 0; i < length; i++) {
        size_t started = ct_eq(i, start);

        in_mac = (in_mac | started) & ct_lt(i, end);
        offset |= j & started;
        rotated[j++] |= rec[i] & (unsigned char)in_mac;
        j &= ct_lt(j, mac_length);
    }
    for (i = 0; i < mac_length; i++) {
        size_t index = offset + i;
        unsigned char value = 0;

        index -= mac_length & ct_ge(index, mac_length);
        for (j = 0; j < mac_length; j++)
            value |= rotated[j] & (unsigned char)ct_eq(j, index);
        out[i] = value;
    }
}

static Py_ssize_t
open_generic(RecordCipherObject *self, const RecordHeader *h, uint64_t seq,
             const unsigned char *fragment, size_t n, const unsigned char **plaintext)
{
    unsigned char aad[AAD_LENGTH], expected[MAC_LENGTH_MAX], received[MAC_LENGTH_MAX];
    size_t mac = (size_t)self->mac_length, m = n - AES_BLOCK, pad, good, length, i, checked;
    unsigned char *data = self->buffer;
    int outl;

    if (self->null_cipher) {
        write_aad(aad, seq, h, n - mac);
        if (hmac_compute(self, aad, fragment, n - mac, expected) < 0
            || CRYPTO_memcmp(expected, fragment + n - mac, mac) != 0)
            return BAD_RECORD_ERROR();
        *plaintext = fragment;
        return (Py_ssize_t)(n - mac);
    }
    if (!EVP_CipherInit_ex(self->cbc_decrypt, NULL, NULL, NULL, fragment, 0)
        || !EVP_CipherUpdate(self->cbc_decrypt, data, &outl, fragment + AES_BLOCK, (int)m)
        || (size_t)outl != m)
        return BAD_RECORD_ERROR();

    /* Padding: pad+1 bytes of value pad, all inside the record; checked in one pass. */
    pad = data[m - 1];
    good = ct_ge(m - mac - 1, pad);
    checked = m < 256 ? m : 256;
    for (i = 0; i < checked; i++)
        good &= ~ct_ge(pad, i) | ct_eq(pad, data[m - 1 - i]);
    pad &= good; /* a bad padding counts as zero-length, as in OpenSSL */
    length = m - mac - 1 - pad;

    /* Always compute the MAC; hash the padding as dummy work so the number of
     * hashed bytes does not depend on the padding length. */
    write_aad(aad, seq, h, length);
    if (hmac_compute(self, aad, data, length, expected) < 0
        || hmac_compute(self, NULL, data + length, pad, NULL) < 0)
        return BAD_RECORD_ERROR();
    ct_copy_mac(received, data, m, length, mac);
    good &= ct_is_zero((size_t)(unsigned int)CRYPTO_memcmp(expected, received, mac));
    if (!good)
        return BAD_RECORD_ERROR();
    *plaintext = data;
    return (Py_ssize_t)length;
}

static Py_ssize_t
open_stitched(RecordCipherObject *self, const RecordHeader *h, uint64_t seq,
              const unsigned char *fragment, size_t n, const unsigned char **plaintext)
{
    unsigned char aad[AES_BLOCK] = {0}, *data = self->buffer;
    size_t skip = h->version >= TLS1_1 ? 0 : AES_BLOCK; /* explicit-IV mode takes it all */

    write_aad(aad, seq, h, n); /* the cipher recomputes the length field */
    if ((skip && !EVP_CipherInit_ex(self->stitched_decrypt, NULL, NULL, NULL, fragment, 0))
        || EVP_CIPHER_CTX_ctrl(self->stitched_decrypt, EVP_CTRL_AEAD_TLS1_AAD, AAD_LENGTH, aad) <= 0
        || EVP_Cipher(self->stitched_decrypt, data + skip, fragment + skip,
                      (unsigned int)(n - skip)) <= 0)
        return BAD_RECORD_ERROR();
    /* Padding and MAC verified: the padding length is no longer secret. */
    *plaintext = data + AES_BLOCK;
    return (Py_ssize_t)(n - AES_BLOCK - (size_t)self->mac_length - 1 - data[n - 1]);
}

static Py_ssize_t
open_one(RecordCipherObject *self, const RecordHeader *h, uint64_t seq,
         const unsigned char *fragment, size_t n, const unsigned char **plaintext)
{
    size_t mac = (size_t)self->mac_length;

    /* Public-length checks only: the length is on the wire anyway. */
    if (n > FRAGMENT_MAX || n < mac
        || (!self->null_cipher
            && (n % AES_BLOCK != 0 || n < AES_BLOCK + ((mac + AES_BLOCK) & ~(size_t)15))))
        return BAD_RECORD_ERROR();
    if (self->stitched)
        return open_stitched(self, h, seq, fragment, n, plaintext);
    return open_generic(self, h, seq, fragment, n, plaintext);
}

/* Python methods */

static PyObject *
RecordCipher_compute_mac(RecordCipherObject *self, PyObject *args)
{
    PyObject *seq, *content_type, *version, *plaintext, *result;
    unsigned char aad[AAD_LENGTH];
    RecordHeader h;

    if (!PyArg_ParseTuple(args, "OOOO!", &seq, &content_type, &version, &PyBytes_Type, &plaintext)
        || CHECK_MAC_KEY(self) < 0 || parse_header(seq, content_type, version, 1, &h) < 0
        || CHECK_PLAINTEXT(PyBytes_GET_SIZE(plaintext)) < 0
        || (result = PyBytes_FromStringAndSize(NULL, self->mac_length)) == NULL)
        return NULL;
    write_aad(aad, h.seq, &h, LENGTH(plaintext));
    if (hmac_compute(self, aad, BYTES(plaintext), LENGTH(plaintext), BYTES(result)) < 0) {
        Py_DECREF(result);
        OPENSSL_FAILED();
        return NULL;
    }
    return result;
}

/* One sealed fragment as a new bytes object; mac != NULL selects seal_with_mac. */
static PyObject *
seal_bytes(RecordCipherObject *self, const RecordHeader *h, uint64_t seq, PyObject *plaintext,
           PyObject *iv, PyObject *mac)
{
    unsigned char aad[AAD_LENGTH];
    size_t length = LENGTH(plaintext);
    PyObject *result;
    int rc;

    if (CHECK_PLAINTEXT(PyBytes_GET_SIZE(plaintext)) < 0)
        return NULL;
    if (PyBytes_GET_SIZE(iv) != self->block_size)
        return PyErr_Format(PyExc_ValueError, "explicit_iv must be %d bytes", self->block_size);
    if ((result = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)fragment_length(self, length))) == NULL)
        return NULL;
    if (mac == NULL && self->stitched)
        rc = seal_stitched(self, h, seq, BYTES(plaintext), length, BYTES(iv), BYTES(result));
    else {
        if (mac == NULL)
            write_aad(aad, seq, h, length);
        rc = seal_generic(self, aad, BYTES(plaintext), length, mac == NULL ? NULL : BYTES(mac),
                          BYTES(iv), BYTES(result));
    }
    if (rc < 0)
        Py_CLEAR(result);
    return result;
}

static PyObject *
RecordCipher_seal(RecordCipherObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"seq", "content_type", "version", "plaintext", "explicit_iv", NULL};
    PyObject *seq, *content_type, *version, *plaintext, *iv = empty_bytes;
    RecordHeader h;

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOO!|O!", kwlist, &seq, &content_type,
                                     &version, &PyBytes_Type, &plaintext, &PyBytes_Type, &iv)
        || CHECK_MAC_KEY(self) < 0 || parse_header(seq, content_type, version, 1, &h) < 0)
        return NULL;
    return seal_bytes(self, &h, h.seq, plaintext, iv, NULL);
}

static PyObject *
RecordCipher_seal_with_mac(RecordCipherObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"plaintext", "mac", "explicit_iv", NULL};
    PyObject *plaintext, *mac, *iv = empty_bytes;

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!O!|O!", kwlist, &PyBytes_Type, &plaintext,
                                     &PyBytes_Type, &mac, &PyBytes_Type, &iv)
        || CHECK_READY(self) < 0)
        return NULL;
    if (PyBytes_GET_SIZE(mac) != self->mac_length)
        return PyErr_Format(PyExc_ValueError, "mac must be %d bytes", self->mac_length);
    return seal_bytes(self, NULL, 0, plaintext, iv, mac);
}

static PyObject *
RecordCipher_open(RecordCipherObject *self, PyObject *args)
{
    PyObject *seq, *content_type, *version, *fragment;
    const unsigned char *plaintext;
    Py_ssize_t length;
    RecordHeader h;

    if (!PyArg_ParseTuple(args, "OOOO!", &seq, &content_type, &version, &PyBytes_Type, &fragment)
        || CHECK_MAC_KEY(self) < 0 || parse_header(seq, content_type, version, 1, &h) < 0)
        return NULL;
    length = open_one(self, &h, h.seq, BYTES(fragment), LENGTH(fragment), &plaintext);
    return length < 0 ? NULL : PyBytes_FromStringAndSize((const char *)plaintext, length);
}

/* A tuple holding references to an iterable's bytes items (immune to later mutation). */
static PyObject *
bytes_tuple(PyObject *obj, const char *name)
{
    PyObject *items = NULL;
    Py_ssize_t i;

    if (!PyBytes_Check(obj) && !PyUnicode_Check(obj))
        items = PySequence_Tuple(obj);
    if (items == NULL) {
        if (PyErr_Occurred() && !PyErr_ExceptionMatches(PyExc_TypeError))
            return NULL;
        PyErr_Clear();
        return PyErr_Format(PyExc_TypeError, "%s must be a list of bytes", name);
    }
    for (i = 0; i < PyTuple_GET_SIZE(items); i++) {
        if (!PyBytes_Check(PyTuple_GET_ITEM(items, i))) {
            Py_DECREF(items);
            return PyErr_Format(PyExc_TypeError, "%s must contain only bytes", name);
        }
    }
    return items;
}

/* seal_many and open_many: record i uses sequence number seq + i; all or nothing. */
static PyObject *
many(RecordCipherObject *self, PyObject *args, int sealing)
{
    PyObject *seq, *content_type, *version, *inputs_arg, *ivs_arg = NULL;
    PyObject *inputs = NULL, *ivs = NULL, *result = NULL, *item, *in;
    const unsigned char *plaintext;
    Py_ssize_t count = 0, i, length;
    RecordHeader h;

    if (!PyArg_ParseTuple(args, sealing ? "OOOOO" : "OOOO", &seq, &content_type, &version,
                          &inputs_arg, &ivs_arg)
        || CHECK_MAC_KEY(self) < 0
        || (inputs = bytes_tuple(inputs_arg, sealing ? "plaintexts" : "fragments")) == NULL
        || (sealing && (ivs = bytes_tuple(ivs_arg, "explicit_ivs")) == NULL))
        goto done;
    count = PyTuple_GET_SIZE(inputs);
    if (sealing && PyTuple_GET_SIZE(ivs) != count) {
        fail(PyExc_ValueError, "need one explicit IV per plaintext");
        goto done;
    }
    if (parse_header(seq, content_type, version, count, &h) < 0
        || (result = PyList_New(count)) == NULL)
        goto done;
    for (i = 0; i < count; i++) {
        in = PyTuple_GET_ITEM(inputs, i);
        if (sealing) {
            item = seal_bytes(self, &h, h.seq + (uint64_t)i, in, PyTuple_GET_ITEM(ivs, i), NULL);
        } else {
            length = open_one(self, &h, h.seq + (uint64_t)i, BYTES(in), LENGTH(in), &plaintext);
            item = length < 0 ? NULL : PyBytes_FromStringAndSize((const char *)plaintext, length);
        }
        if (item == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, i, item);
    }
done:
    Py_XDECREF(inputs);
    Py_XDECREF(ivs);
    return result;
}

static PyObject *
RecordCipher_seal_many(RecordCipherObject *self, PyObject *args)
{
    return many(self, args, 1);
}

static PyObject *
RecordCipher_open_many(RecordCipherObject *self, PyObject *args)
{
    return many(self, args, 0);
}

/* Construction */

static void
free_contexts(RecordCipherObject *self)
{
    EVP_CIPHER_CTX_free(self->cbc_encrypt);
    EVP_CIPHER_CTX_free(self->cbc_decrypt);
    EVP_CIPHER_CTX_free(self->ecb_decrypt);
    EVP_CIPHER_CTX_free(self->stitched_encrypt);
    EVP_CIPHER_CTX_free(self->stitched_decrypt);
    EVP_MAC_CTX_free(self->hmac);
    self->cbc_encrypt = self->cbc_decrypt = self->ecb_decrypt = NULL;
    self->stitched_encrypt = self->stitched_decrypt = NULL;
    self->hmac = NULL;
    self->ready = self->has_mac_key = self->stitched = 0;
    OPENSSL_cleanse(self->mac_key, sizeof(self->mac_key));
}

static EVP_CIPHER_CTX *
cipher_context(const EVP_CIPHER *cipher, const unsigned char *key, int encrypt, int raw)
{
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();

    if (ctx == NULL || !EVP_CipherInit_ex(ctx, cipher, NULL, key, zero_iv, encrypt)
        || (raw && !EVP_CIPHER_CTX_set_padding(ctx, 0))) {
        EVP_CIPHER_CTX_free(ctx);
        ERR_clear_error();
        return NULL;
    }
    return ctx;
}

/* Once per suite and process: the stitched path must seal exactly like the generic
 * one and open what it sealed (guards against OpenSSL regressions). */
static int
stitched_self_test(RecordCipherObject *self)
{
    static const size_t lengths[] = {0, 1, 240, 1007};
    unsigned char input[1007], a[1100], b[1100], aad[AAD_LENGTH];
    const unsigned char *plaintext;
    RecordHeader h = {0, 23, 0x0303};
    size_t i, total;
    int ok = 1;

    for (i = 0; i < sizeof(input); i++)
        input[i] = (unsigned char)(i * 7 + 1);
    for (i = 0; ok && i < 8; i++) {
        h.version = i < 4 ? 0x0303 : 0x0301;
        total = fragment_length(self, lengths[i % 4]);
        write_aad(aad, 5, &h, lengths[i % 4]);
        ok = seal_generic(self, aad, input, lengths[i % 4], NULL, input + 11, a) == 0
             && seal_stitched(self, &h, 5, input, lengths[i % 4], input + 11, b) == 0
             && memcmp(a, b, total) == 0
             && open_stitched(self, &h, 5, a, total, &plaintext) == (Py_ssize_t)lengths[i % 4]
             && memcmp(plaintext, input, lengths[i % 4]) == 0;
        a[total - 1] ^= 1;
        ok = ok && open_stitched(self, &h, 5, a, total, &plaintext) < 0;
        PyErr_Clear();
    }
    ERR_clear_error();
    return ok;
}

static int
setup(RecordCipherObject *self, const char *cipher, const char *mac, PyObject *enc_key,
      PyObject *mac_key, int want_stitched)
{
    int aes256 = 0, sha256 = strcmp(mac, "sha256") == 0, key_length = 0;
    const EVP_CIPHER *cbc = NULL, *ecb = NULL, *stitched = NULL;
    const unsigned char *key = BYTES(enc_key);
    OSSL_PARAM params[2];

    if (!sha256 && strcmp(mac, "sha1") != 0)
        return PyErr_Format(PyExc_ValueError, "unknown MAC %s", mac), -1;
    if (strcmp(cipher, "aes-128-cbc") == 0) {
        key_length = 16, cbc = EVP_aes_128_cbc(), ecb = EVP_aes_128_ecb();
        stitched = sha256 ? EVP_aes_128_cbc_hmac_sha256() : EVP_aes_128_cbc_hmac_sha1();
    } else if (strcmp(cipher, "aes-256-cbc") == 0) {
        key_length = 32, aes256 = 1, cbc = EVP_aes_256_cbc(), ecb = EVP_aes_256_ecb();
        stitched = sha256 ? EVP_aes_256_cbc_hmac_sha256() : EVP_aes_256_cbc_hmac_sha1();
    } else if (strcmp(cipher, "null") != 0) {
        return PyErr_Format(PyExc_ValueError, "unknown cipher %s", cipher), -1;
    }
    self->null_cipher = key_length == 0;
    self->mac_length = sha256 ? 32 : 20;
    self->block_size = self->null_cipher ? 0 : AES_BLOCK;
    if (PyBytes_GET_SIZE(enc_key) != key_length)
        return PyErr_Format(PyExc_ValueError, "enc_key must be %d bytes for %s", key_length,
                            cipher), -1;
    if (PyBytes_GET_SIZE(mac_key) != 0 && PyBytes_GET_SIZE(mac_key) != self->mac_length)
        return PyErr_Format(PyExc_ValueError, "mac_key must be %d bytes (or empty) for %s",
                            self->mac_length, mac), -1;
    self->has_mac_key = PyBytes_GET_SIZE(mac_key) != 0;
    memcpy(self->mac_key, BYTES(mac_key), LENGTH(mac_key));

    if (self->has_mac_key) {
        params[0] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST,
                                                     sha256 ? "SHA256" : "SHA1", 0);
        params[1] = OSSL_PARAM_construct_end();
        self->hmac = EVP_MAC_CTX_new(hmac_algorithm);
        if (self->hmac == NULL || !EVP_MAC_CTX_set_params(self->hmac, params))
            return OPENSSL_FAILED();
    }
    if (self->null_cipher)
        return 0;
    self->cbc_encrypt = cipher_context(cbc, key, 1, 1);
    self->cbc_decrypt = cipher_context(cbc, key, 0, 1);
    if (self->cbc_encrypt == NULL || self->cbc_decrypt == NULL)
        return OPENSSL_FAILED();

    /* The stitched ciphers exist only on AES-NI machines: their init fails elsewhere. */
    if (!want_stitched || !self->has_mac_key || stitched_verdict[aes256][sha256] < 0)
        return 0;
    self->ecb_decrypt = cipher_context(ecb, key, 0, 1);
    self->stitched_encrypt = cipher_context(stitched, key, 1, 0);
    self->stitched_decrypt = cipher_context(stitched, key, 0, 0);
    if (self->ecb_decrypt == NULL || self->stitched_encrypt == NULL
        || self->stitched_decrypt == NULL
        || EVP_CIPHER_CTX_ctrl(self->stitched_encrypt, EVP_CTRL_AEAD_SET_MAC_KEY,
                               self->mac_length, self->mac_key) <= 0
        || EVP_CIPHER_CTX_ctrl(self->stitched_decrypt, EVP_CTRL_AEAD_SET_MAC_KEY,
                               self->mac_length, self->mac_key) <= 0) {
        ERR_clear_error();
        stitched_verdict[aes256][sha256] = -1;
        return 0;
    }
    if (stitched_verdict[aes256][sha256] == 0)
        stitched_verdict[aes256][sha256] = stitched_self_test(self) ? 1 : -1;
    self->stitched = stitched_verdict[aes256][sha256] > 0;
    return 0;
}

static int
RecordCipher_init(RecordCipherObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"cipher", "mac", "enc_key", "mac_key", "stitched", NULL};
    const char *cipher, *mac;
    PyObject *enc_key, *mac_key;
    int want_stitched = 1;

    free_contexts(self);
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "ssO!O!|$p", kwlist, &cipher, &mac,
                                     &PyBytes_Type, &enc_key, &PyBytes_Type, &mac_key,
                                     &want_stitched))
        return -1;
    if (setup(self, cipher, mac, enc_key, mac_key, want_stitched) < 0) {
        free_contexts(self);
        return -1;
    }
    self->ready = 1;
    return 0;
}

static void
RecordCipher_dealloc(RecordCipherObject *self)
{
    free_contexts(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef RecordCipher_methods[] = {
    {"compute_mac", (PyCFunction)RecordCipher_compute_mac, METH_VARARGS,
     "compute_mac(seq, content_type, version, plaintext) -> MAC bytes"},
    {"seal", (PyCFunction)(void (*)(void))RecordCipher_seal, METH_VARARGS | METH_KEYWORDS,
     "seal(seq, content_type, version, plaintext, explicit_iv=b'') -> fragment"},
    {"seal_with_mac", (PyCFunction)(void (*)(void))RecordCipher_seal_with_mac,
     METH_VARARGS | METH_KEYWORDS, "seal_with_mac(plaintext, mac, explicit_iv=b'') -> fragment"},
    {"open", (PyCFunction)RecordCipher_open, METH_VARARGS,
     "open(seq, content_type, version, fragment) -> plaintext"},
    {"seal_many", (PyCFunction)RecordCipher_seal_many, METH_VARARGS,
     "seal_many(seq, content_type, version, plaintexts, explicit_ivs) -> list of fragments"},
    {"open_many", (PyCFunction)RecordCipher_open_many, METH_VARARGS,
     "open_many(seq, content_type, version, fragments) -> list of plaintexts"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef RecordCipher_members[] = {
    {"mac_length", T_INT, offsetof(RecordCipherObject, mac_length), READONLY, "MAC bytes"},
    {"block_size", T_INT, offsetof(RecordCipherObject, block_size), READONLY, "0 or 16"},
    {"stitched", T_BOOL, offsetof(RecordCipherObject, stitched), READONLY,
     "whether seal/open use OpenSSL's stitched AES-CBC-HMAC cipher"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject RecordCipherType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = MODULE_NAME ".RecordCipher",
    .tp_basicsize = sizeof(RecordCipherObject),
    .tp_dealloc = (destructor)RecordCipher_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Protection of one direction of a TLS 1.2 connection (MAC-then-encrypt).",
    .tp_methods = RecordCipher_methods,
    .tp_members = RecordCipher_members,
    .tp_init = (initproc)RecordCipher_init,
    .tp_new = PyType_GenericNew,
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT,
    .m_name = MODULE_NAME,
    .m_doc = "TLS 1.2 MAC-then-encrypt record protection backed by libcrypto.",
    .m_size = -1,
};

PyMODINIT_FUNC
PyInit__recordcrypto(void)
{
    PyObject *m;

    if (hmac_algorithm == NULL && (hmac_algorithm = EVP_MAC_fetch(NULL, "HMAC", NULL)) == NULL) {
        ERR_clear_error();
        PyErr_SetString(PyExc_ImportError, "libcrypto has no HMAC");
        return NULL;
    }
    if (PyType_Ready(&RecordCipherType) < 0
        || (empty_bytes == NULL && (empty_bytes = PyBytes_FromStringAndSize(NULL, 0)) == NULL)
        || (m = PyModule_Create(&moduledef)) == NULL)
        return NULL;
    RecordCryptoError = PyErr_NewException(MODULE_NAME ".RecordCryptoError", PyExc_ValueError, NULL);
    if (RecordCryptoError == NULL
        || PyModule_AddObjectRef(m, "RecordCryptoError", RecordCryptoError) < 0
        || PyModule_AddObjectRef(m, "RecordCipher", (PyObject *)&RecordCipherType) < 0
        || PyModule_AddIntConstant(m, "PLAINTEXT_MAX", PLAINTEXT_MAX) < 0
        || PyModule_AddIntConstant(m, "FRAGMENT_MAX", FRAGMENT_MAX) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
