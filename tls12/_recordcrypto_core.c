/*
 * tls12._recordcrypto core: the record algorithms on raw buffers (RFC 5246 6.2.3).
 *
 * Seal and open, generic and stitched, plus the cipher object's contexts; the
 * Python binding (argument parsing, the RecordCipher type, module init) is in
 * _recordcrypto.c, whose opening comment describes the two code paths and the
 * explicit-IV trick used by rc_seal_stitched.
 */
#include "_recordcrypto.h"

#include <openssl/core_names.h>
#include <openssl/params.h>
#include <openssl/rand.h>

static const unsigned char zero_iv[AES_BLOCK];

/* Self-test verdicts per [aes-256][sha256]: 0 untested, 1 ok, -1 off. */
static int stitched_verdict[2][2], multiblock_verdict[2][2];

/* Constant-time helpers (OpenSSL internal/constant_time.h): all-ones or zero masks. */
static inline size_t ct_msb(size_t a) { return 0 - (a >> (sizeof(a) * 8 - 1)); }
static inline size_t ct_lt(size_t a, size_t b) { return ct_msb(a ^ ((a ^ b) | ((a - b) ^ b))); }
static inline size_t ct_ge(size_t a, size_t b) { return ~ct_lt(a, b); }
static inline size_t ct_is_zero(size_t a) { return ct_msb(~a & (a - 1)); }
static inline size_t ct_eq(size_t a, size_t b) { return ct_is_zero(a ^ b); }

/* seq_num(8) || type(1) || version(2) || length(2) */
void
rc_write_aad(unsigned char *aad, uint64_t seq, const RecordHeader *h, size_t length)
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
size_t
rc_fragment_length(const RecordCipherObject *self, size_t length)
{
    size_t body = length + (size_t)self->mac_length;

    return self->null_cipher ? body : AES_BLOCK + ((body + AES_BLOCK) & ~(size_t)(AES_BLOCK - 1));
}

/* HMAC over aad || data into out; with aad == out == NULL it only hashes (dummy work). */
int
rc_hmac_compute(RecordCipherObject *self, const unsigned char *aad, const unsigned char *data,
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

/* Seal paths: `out` holds exactly rc_fragment_length(length) bytes. */

int
rc_seal_generic(RecordCipherObject *self, const unsigned char *aad,
                const unsigned char *plaintext, size_t length, const unsigned char *mac,
                const unsigned char *iv, unsigned char *out)
{
    size_t total = rc_fragment_length(self, length), padded = length + (size_t)self->mac_length;
    unsigned char *body = self->null_cipher ? out : out + AES_BLOCK;
    size_t body_length = self->null_cipher ? total : total - AES_BLOCK;
    int outl;

    memcpy(body, plaintext, length);
    if (mac != NULL)
        memcpy(body + length, mac, (size_t)self->mac_length);
    else if (rc_hmac_compute(self, aad, plaintext, length, body + length) < 0)
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

int
rc_seal_stitched(RecordCipherObject *self, const RecordHeader *h, uint64_t seq,
                 const unsigned char *plaintext, size_t length, const unsigned char *iv,
                 unsigned char *out)
{
    /* 16 bytes: some OpenSSL releases write one byte past the 13-byte AAD. */
    unsigned char aad[AES_BLOCK] = {0};
    size_t total = rc_fragment_length(self, length);
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
    rc_write_aad(aad, seq, h, length + (explicit_iv ? AES_BLOCK : 0));
    if (!EVP_CipherInit_ex(self->stitched_encrypt, NULL, NULL, NULL, explicit_iv ? zero_iv : iv, 1))
        return OPENSSL_FAILED();
    pad = EVP_CIPHER_CTX_ctrl(self->stitched_encrypt, EVP_CTRL_AEAD_TLS1_AAD, AAD_LENGTH, aad);
    if (pad <= 0 || (size_t)pad != total - AES_BLOCK - length
        || EVP_Cipher(self->stitched_encrypt, start, start, (unsigned int)(out + total - start)) <= 0)
        return OPENSSL_FAILED();
    return 0;
}

/* Whole records with explicit IVs from OpenSSL's RNG (seal_stream): the 5-byte header
 * included; return the number of bytes written to `out` or -1. */

static void
write_header(unsigned char *out, const RecordHeader *h, size_t length)
{
    out[0] = (unsigned char)h->content_type;
    out[1] = (unsigned char)(h->version >> 8);
    out[2] = (unsigned char)h->version;
    out[3] = (unsigned char)(length >> 8);
    out[4] = (unsigned char)length;
}

Py_ssize_t
rc_seal_random_iv(RecordCipherObject *self, const RecordHeader *h, uint64_t seq,
                  const unsigned char *plaintext, size_t length, unsigned char *out)
{
    unsigned char aad[AAD_LENGTH], iv[AES_BLOCK];
    size_t total = rc_fragment_length(self, length);
    int rc;

    if (self->block_size && RAND_bytes(iv, AES_BLOCK) != 1)
        return OPENSSL_FAILED();
    write_header(out, h, total);
    if (self->stitched) {
        rc = rc_seal_stitched(self, h, seq, plaintext, length, iv, out + HEADER_LENGTH);
    } else {
        rc_write_aad(aad, seq, h, length);
        rc = rc_seal_generic(self, aad, plaintext, length, NULL, iv, out + HEADER_LENGTH);
    }
    return rc < 0 ? rc : (Py_ssize_t)(HEADER_LENGTH + total);
}

/* `count` (4 or 8) records of exactly 2^14 bytes in one interleaved pass of the stitched
 * cipher, driven as libssl's ssl3_write_bytes drives it: a 13-byte AAD whose length field
 * is zero (so the interleave we pass decides the cut), then the encrypt ctrl.  The cipher
 * numbers the records seq..seq+count-1, draws their explicit IVs from RAND and writes
 * their headers; each record has the size and layout rc_seal_stitched gives it. */
Py_ssize_t
rc_seal_multiblock(RecordCipherObject *self, const RecordHeader *h, uint64_t seq,
                   const unsigned char *plaintext, unsigned int count, unsigned char *out)
{
    EVP_CTRL_TLS1_1_MULTIBLOCK_PARAM param;
    unsigned char aad[AES_BLOCK] = {0};
    size_t total = count * (HEADER_LENGTH + rc_fragment_length(self, PLAINTEXT_MAX));

    rc_write_aad(aad, seq, h, 0);
    memset(&param, 0, sizeof(param));
    param.inp = aad;
    param.len = (size_t)count * PLAINTEXT_MAX;
    param.interleave = count;
    if (EVP_CIPHER_CTX_ctrl(self->stitched_encrypt, EVP_CTRL_TLS1_1_MULTIBLOCK_AAD,
                            (int)sizeof(param), &param) != (int)total
        || param.interleave != count)
        return OPENSSL_FAILED();
    param.out = out;
    param.inp = plaintext;
    param.len = (size_t)count * PLAINTEXT_MAX;
    param.interleave = count;
    if (EVP_CIPHER_CTX_ctrl(self->stitched_encrypt, EVP_CTRL_TLS1_1_MULTIBLOCK_ENCRYPT,
                            (int)sizeof(param), &param) != (int)total)
        return OPENSSL_FAILED();
    return (Py_ssize_t)total;
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
        rc_write_aad(aad, seq, h, n - mac);
        if (rc_hmac_compute(self, aad, fragment, n - mac, expected) < 0
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
    rc_write_aad(aad, seq, h, length);
    if (rc_hmac_compute(self, aad, data, length, expected) < 0
        || rc_hmac_compute(self, NULL, data + length, pad, NULL) < 0)
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

    rc_write_aad(aad, seq, h, n); /* the cipher recomputes the length field */
    if ((skip && !EVP_CipherInit_ex(self->stitched_decrypt, NULL, NULL, NULL, fragment, 0))
        || EVP_CIPHER_CTX_ctrl(self->stitched_decrypt, EVP_CTRL_AEAD_TLS1_AAD, AAD_LENGTH, aad) <= 0
        || EVP_Cipher(self->stitched_decrypt, data + skip, fragment + skip,
                      (unsigned int)(n - skip)) <= 0)
        return BAD_RECORD_ERROR();
    /* Padding and MAC verified: the padding length is no longer secret. */
    *plaintext = data + AES_BLOCK;
    return (Py_ssize_t)(n - AES_BLOCK - (size_t)self->mac_length - 1 - data[n - 1]);
}

Py_ssize_t
rc_open_one(RecordCipherObject *self, const RecordHeader *h, uint64_t seq,
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

/* Construction */

void
rc_free_contexts(RecordCipherObject *self)
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
    self->ready = self->has_mac_key = self->stitched = self->multiblock = 0;
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
        total = rc_fragment_length(self, lengths[i % 4]);
        rc_write_aad(aad, 5, &h, lengths[i % 4]);
        ok = rc_seal_generic(self, aad, input, lengths[i % 4], NULL, input + 11, a) == 0
             && rc_seal_stitched(self, &h, 5, input, lengths[i % 4], input + 11, b) == 0
             && memcmp(a, b, total) == 0
             && open_stitched(self, &h, 5, a, total, &plaintext) == (Py_ssize_t)lengths[i % 4]
             && memcmp(plaintext, input, lengths[i % 4]) == 0;
        a[total - 1] ^= 1;
        ok = ok && open_stitched(self, &h, 5, a, total, &plaintext) < 0;
    }
    ERR_clear_error();
    return ok;
}

/* Once per suite and process: four multi-block records must carry the right headers and
 * open, through the generic path, to what was sealed at seq..seq+3 (seq 255 tests the
 * carry the cipher does when it numbers the records). */
static int
multiblock_self_test(RecordCipherObject *self)
{
    size_t record = HEADER_LENGTH + rc_fragment_length(self, PLAINTEXT_MAX), i;
    unsigned char *input = PyMem_Malloc(4 * PLAINTEXT_MAX), *out = PyMem_Malloc(4 * record);
    const unsigned char *plaintext, *rec;
    RecordHeader h = {0, 23, 0x0303};
    int ok = input != NULL && out != NULL;

    for (i = 0; ok && i < 4 * PLAINTEXT_MAX; i++)
        input[i] = (unsigned char)(i * 7 + 1);
    ok = ok && rc_seal_multiblock(self, &h, 255, input, 4, out) == (Py_ssize_t)(4 * record);
    for (i = 0; ok && i < 4; i++) {
        rec = out + i * record;
        ok = rec[0] == 23 && rec[1] == 3 && rec[2] == 3
             && (size_t)(rec[3] << 8 | rec[4]) == record - HEADER_LENGTH
             && open_generic(self, &h, 255 + i, rec + HEADER_LENGTH, record - HEADER_LENGTH,
                             &plaintext) == PLAINTEXT_MAX
             && memcmp(plaintext, input + i * PLAINTEXT_MAX, PLAINTEXT_MAX) == 0;
    }
    PyMem_Free(input);
    PyMem_Free(out);
    ERR_clear_error();
    return ok;
}

int
rc_setup(RecordCipherObject *self, const char *cipher, const char *mac, PyObject *enc_key,
         PyObject *mac_key, int want_stitched, int want_multiblock)
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
        self->hmac = EVP_MAC_CTX_new(rc_hmac_algorithm);
        if (self->hmac == NULL || !EVP_MAC_CTX_set_params(self->hmac, params))
            return fail(rc_RecordCryptoError, "OpenSSL call failed");
    }
    if (self->null_cipher)
        return 0;
    self->cbc_encrypt = cipher_context(cbc, key, 1, 1);
    self->cbc_decrypt = cipher_context(cbc, key, 0, 1);
    if (self->cbc_encrypt == NULL || self->cbc_decrypt == NULL)
        return fail(rc_RecordCryptoError, "OpenSSL call failed");

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

    /* Multi-block needs the stitched path and a provider that flags the cipher for it. */
    if (!self->stitched || !want_multiblock || multiblock_verdict[aes256][sha256] < 0
        || !(EVP_CIPHER_get_flags(EVP_CIPHER_CTX_get0_cipher(self->stitched_encrypt))
             & EVP_CIPH_FLAG_TLS1_1_MULTIBLOCK))
        return 0;
    if (multiblock_verdict[aes256][sha256] == 0)
        multiblock_verdict[aes256][sha256] = multiblock_self_test(self) ? 1 : -1;
    self->multiblock = multiblock_verdict[aes256][sha256] > 0;
    return 0;
}
