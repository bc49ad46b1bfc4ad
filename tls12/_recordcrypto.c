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
 * Sealing or opening many records (seal_many, open_many, seal_stream: at least
 * RELEASE_GIL_AT bytes) runs with the GIL released, so that the other threads of a
 * server run meanwhile: every output object is made before and resized after.  An
 * object's contexts and buffer are shared state, so every method holds the object's
 * lock while it uses them (taken without the GIL when another thread has it).
 *
 * This file is the Python binding (argument parsing, the RecordCipher type,
 * module init); the record algorithms on raw buffers are in _recordcrypto_core.c
 * and the declarations both share in _recordcrypto.h.
 */
#include "_recordcrypto.h"

#include <structmember.h>

PyObject *rc_RecordCryptoError;
EVP_MAC *rc_hmac_algorithm;
static PyObject *empty_bytes;

/* Argument checks: -1 with a Python exception set. */

#define CHECK_READY(self) \
    ((self)->ready ? 0 : fail(PyExc_ValueError, "RecordCipher.__init__ did not succeed"))
#define CHECK_MAC_KEY(self) \
    (CHECK_READY(self) < 0 ? -1 : (self)->has_mac_key ? 0 : fail(PyExc_ValueError, NO_MAC_KEY))
#define CHECK_PLAINTEXT(n) \
    ((n) <= PLAINTEXT_MAX ? 0 : fail(PyExc_ValueError, "plaintext longer than 2^14 bytes"))

/* Bytes of records at which a call lets go of the GIL (a 16 KiB record seals in ~10 us). */
#define RELEASE_GIL_AT (4 * PLAINTEXT_MAX)

/* The object's lock: tried with the GIL, waited for without it (the thread that holds it
 * may be waiting for the GIL), so that no thread ever waits for it holding the GIL. */
static void
lock_cipher(RecordCipherObject *self)
{
    if (!PyThread_acquire_lock(self->lock, NOWAIT_LOCK)) {
        Py_BEGIN_ALLOW_THREADS
        PyThread_acquire_lock(self->lock, WAIT_LOCK);
        Py_END_ALLOW_THREADS
    }
}

static PyObject *
unlock_cipher(RecordCipherObject *self, PyObject *result)
{
    PyThread_release_lock(self->lock);
    return result;
}

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

/* Python methods: arguments parsed, then the object's lock held while its contexts work. */

static PyObject *
RecordCipher_compute_mac(RecordCipherObject *self, PyObject *args)
{
    PyObject *seq, *content_type, *version, *plaintext, *result;
    unsigned char aad[AAD_LENGTH];
    RecordHeader h;

    if (!PyArg_ParseTuple(args, "OOOO!", &seq, &content_type, &version, &PyBytes_Type, &plaintext)
        || parse_header(seq, content_type, version, 1, &h) < 0
        || CHECK_PLAINTEXT(PyBytes_GET_SIZE(plaintext)) < 0)
        return NULL;
    lock_cipher(self);
    if (CHECK_MAC_KEY(self) < 0
        || (result = PyBytes_FromStringAndSize(NULL, self->mac_length)) == NULL)
        return unlock_cipher(self, NULL);
    rc_write_aad(aad, h.seq, &h, LENGTH(plaintext));
    if (rc_hmac_compute(self, aad, BYTES(plaintext), LENGTH(plaintext), BYTES(result)) < 0) {
        Py_DECREF(result);
        rc_raise(RC_OPENSSL_FAILED);
        return unlock_cipher(self, NULL);
    }
    return unlock_cipher(self, result);
}

/* One record sealed into `out` (rc_fragment_length bytes); mac != NULL: seal_with_mac.
 * Touches no Python object: callable without the GIL.  0 or a negative RC_* code. */
static int
seal_into(RecordCipherObject *self, const RecordHeader *h, uint64_t seq,
          const unsigned char *plaintext, size_t length, const unsigned char *iv,
          const unsigned char *mac, unsigned char *out)
{
    unsigned char aad[AAD_LENGTH];

    if (mac == NULL && self->stitched)
        return rc_seal_stitched(self, h, seq, plaintext, length, iv, out);
    if (mac == NULL)
        rc_write_aad(aad, seq, h, length);
    return rc_seal_generic(self, aad, plaintext, length, mac, iv, out);
}

/* Argument checks of one record to seal (-1 with an exception). */
static int
check_seal(RecordCipherObject *self, PyObject *plaintext, PyObject *iv)
{
    if (CHECK_PLAINTEXT(PyBytes_GET_SIZE(plaintext)) < 0)
        return -1;
    if (PyBytes_GET_SIZE(iv) != self->block_size) {
        PyErr_Format(PyExc_ValueError, "explicit_iv must be %d bytes", self->block_size);
        return -1;
    }
    return 0;
}

/* One sealed fragment as a new bytes object (lock held). */
static PyObject *
seal_bytes(RecordCipherObject *self, const RecordHeader *h, uint64_t seq, PyObject *plaintext,
           PyObject *iv, PyObject *mac)
{
    PyObject *result;
    int rc;

    if (check_seal(self, plaintext, iv) < 0
        || (result = PyBytes_FromStringAndSize(
                NULL, (Py_ssize_t)rc_fragment_length(self, LENGTH(plaintext)))) == NULL)
        return NULL;
    rc = seal_into(self, h, seq, BYTES(plaintext), LENGTH(plaintext), BYTES(iv),
                   mac == NULL ? NULL : BYTES(mac), BYTES(result));
    if (rc < 0) {
        Py_DECREF(result);
        rc_raise(rc);
        return NULL;
    }
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
        || parse_header(seq, content_type, version, 1, &h) < 0)
        return NULL;
    lock_cipher(self);
    if (CHECK_MAC_KEY(self) < 0)
        return unlock_cipher(self, NULL);
    return unlock_cipher(self, seal_bytes(self, &h, h.seq, plaintext, iv, NULL));
}

static PyObject *
RecordCipher_seal_with_mac(RecordCipherObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"plaintext", "mac", "explicit_iv", NULL};
    PyObject *plaintext, *mac, *iv = empty_bytes;

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!O!|O!", kwlist, &PyBytes_Type, &plaintext,
                                     &PyBytes_Type, &mac, &PyBytes_Type, &iv))
        return NULL;
    lock_cipher(self);
    if (CHECK_READY(self) < 0)
        return unlock_cipher(self, NULL);
    if (PyBytes_GET_SIZE(mac) != self->mac_length) {
        PyErr_Format(PyExc_ValueError, "mac must be %d bytes", self->mac_length);
        return unlock_cipher(self, NULL);
    }
    return unlock_cipher(self, seal_bytes(self, NULL, 0, plaintext, iv, mac));
}

static PyObject *
RecordCipher_open(RecordCipherObject *self, PyObject *args)
{
    PyObject *seq, *content_type, *version, *fragment;
    const unsigned char *plaintext;
    Py_ssize_t length;
    RecordHeader h;

    if (!PyArg_ParseTuple(args, "OOOO!", &seq, &content_type, &version, &PyBytes_Type, &fragment)
        || parse_header(seq, content_type, version, 1, &h) < 0)
        return NULL;
    lock_cipher(self);
    if (CHECK_MAC_KEY(self) < 0)
        return unlock_cipher(self, NULL);
    length = rc_open_one(self, &h, h.seq, BYTES(fragment), LENGTH(fragment), &plaintext);
    if (length < 0) {
        rc_raise(length);
        return unlock_cipher(self, NULL);
    }
    /* the plaintext may lie in the object's buffer: copied while the lock is held */
    return unlock_cipher(self, PyBytes_FromStringAndSize((const char *)plaintext, length));
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

/* The records of seal_many / open_many, one by one into the outputs made for them, with
 * no Python call: 0, or the negative RC_* code of the first failure.  Opening, each output
 * is as long as its fragment and the plaintext's length goes to lengths[i]. */
static Py_ssize_t
many_records(RecordCipherObject *self, const RecordHeader *h, int sealing, PyObject *inputs,
             PyObject *ivs, PyObject *outputs, Py_ssize_t *lengths)
{
    Py_ssize_t i, count = PyTuple_GET_SIZE(inputs), length;
    const unsigned char *plaintext;
    PyObject *in, *out;
    int rc;

    for (i = 0; i < count; i++) {
        in = PyTuple_GET_ITEM(inputs, i), out = PyList_GET_ITEM(outputs, i);
        if (sealing) {
            rc = seal_into(self, h, h->seq + (uint64_t)i, BYTES(in), LENGTH(in),
                           BYTES(PyTuple_GET_ITEM(ivs, i)), NULL, BYTES(out));
            if (rc < 0)
                return rc;
        } else {
            length = rc_open_one(self, h, h->seq + (uint64_t)i, BYTES(in), LENGTH(in), &plaintext);
            if (length < 0)
                return length;
            memcpy(BYTES(out), plaintext, (size_t)length);
            lengths[i] = length;
        }
    }
    return 0;
}

/* One output per record, made before the work (lock held): -1 with an exception. */
static int
make_outputs(RecordCipherObject *self, int sealing, PyObject *inputs, PyObject *ivs,
             PyObject *outputs, size_t *total)
{
    Py_ssize_t i, size;
    PyObject *in, *out;

    for (i = 0, *total = 0; i < PyTuple_GET_SIZE(inputs); i++) {
        in = PyTuple_GET_ITEM(inputs, i);
        if (sealing && check_seal(self, in, PyTuple_GET_ITEM(ivs, i)) < 0)
            return -1;
        size = sealing ? (Py_ssize_t)rc_fragment_length(self, LENGTH(in)) : PyBytes_GET_SIZE(in);
        if ((out = PyBytes_FromStringAndSize(NULL, size)) == NULL)
            return -1;
        PyList_SET_ITEM(outputs, i, out);
        *total += LENGTH(in);
    }
    return 0;
}

/* seal_many and open_many: record i uses sequence number seq + i; all or nothing. */
static PyObject *
many(RecordCipherObject *self, PyObject *args, int sealing)
{
    PyObject *seq, *content_type, *version, *inputs_arg, *ivs_arg = NULL;
    PyObject *inputs = NULL, *ivs = NULL, *result = NULL;
    Py_ssize_t count = 0, i, rc, *lengths = NULL;
    size_t total = 0;
    RecordHeader h;

    if (!PyArg_ParseTuple(args, sealing ? "OOOOO" : "OOOO", &seq, &content_type, &version,
                          &inputs_arg, &ivs_arg)
        || (inputs = bytes_tuple(inputs_arg, sealing ? "plaintexts" : "fragments")) == NULL
        || (sealing && (ivs = bytes_tuple(ivs_arg, "explicit_ivs")) == NULL))
        goto done;
    count = PyTuple_GET_SIZE(inputs);
    if (sealing && PyTuple_GET_SIZE(ivs) != count) {
        fail(PyExc_ValueError, "need one explicit IV per plaintext");
        goto done;
    }
    if (parse_header(seq, content_type, version, count, &h) < 0)
        goto done;
    if (!sealing && (lengths = PyMem_New(Py_ssize_t, count ? count : 1)) == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if ((result = PyList_New(count)) == NULL) /* a tracked object: may collect, so unlocked */
        goto done;
    lock_cipher(self);
    if (CHECK_MAC_KEY(self) < 0 || make_outputs(self, sealing, inputs, ivs, result, &total) < 0) {
        Py_CLEAR(result);
        unlock_cipher(self, NULL);
        goto done;
    }
    if (total >= RELEASE_GIL_AT) {
        Py_BEGIN_ALLOW_THREADS
        rc = many_records(self, &h, sealing, inputs, ivs, result, lengths);
        Py_END_ALLOW_THREADS
    } else {
        rc = many_records(self, &h, sealing, inputs, ivs, result, lengths);
    }
    unlock_cipher(self, NULL);
    if (rc < 0) {
        rc_raise(rc);
        Py_CLEAR(result);
        goto done;
    }
    for (i = 0; !sealing && i < count; i++) {
        PyObject *item = PyList_GET_ITEM(result, i);

        rc = _PyBytes_Resize(&item, lengths[i]); /* on failure it freed the item */
        PyList_SET_ITEM(result, i, item);
        if (rc < 0) {
            Py_CLEAR(result);
            goto done;
        }
    }
done:
    PyMem_Free(lengths);
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

/* The records of seal_stream into `out`, with no Python call: the bytes written, or the
 * negative RC_* code of the first failure. */
static Py_ssize_t
stream_records(RecordCipherObject *self, const RecordHeader *h, const unsigned char *in,
               size_t full, size_t rest, unsigned char *out)
{
    size_t count = full + (rest != 0), i, n;
    Py_ssize_t written, total = 0;

    for (i = 0; i < count; i += n, in += n * PLAINTEXT_MAX, out += written, total += written) {
        n = !self->multiblock ? 1 : full - i >= 8 ? 8 : full - i >= 4 ? 4 : 1;
        if (n > 1)
            written = rc_seal_multiblock(self, h, h->seq + i, in, (unsigned int)n, out);
        else
            written = rc_seal_random_iv(self, h, h->seq + i, in, i < full ? PLAINTEXT_MAX : rest,
                                        out);
        if (written < 0)
            return written;
    }
    return total;
}

/* seal_stream: `data` cut into records of 2^14 bytes (the last shorter), numbered from seq,
 * as whole wire records with explicit IVs from OpenSSL's RNG.  Runs of 8 or 4 full records
 * go through the multi-block path when the cipher has it; the rest record by record. */
static PyObject *
RecordCipher_seal_stream(RecordCipherObject *self, PyObject *args)
{
    PyObject *seq, *content_type, *version, *data, *result;
    size_t length, full, count, rest;
    Py_ssize_t written;
    RecordHeader h;

    if (!PyArg_ParseTuple(args, "OOOO!", &seq, &content_type, &version, &PyBytes_Type, &data))
        return NULL;
    length = LENGTH(data), full = length / PLAINTEXT_MAX, rest = length % PLAINTEXT_MAX;
    count = full + (rest != 0);
    if (parse_header(seq, content_type, version, (Py_ssize_t)count, &h) < 0)
        return NULL;
    lock_cipher(self);
    if (CHECK_MAC_KEY(self) < 0)
        return unlock_cipher(self, NULL);
    if (self->block_size && h.version < TLS1_1) {
        PyErr_Format(PyExc_ValueError, "seal_stream draws explicit IVs: version must "
                     "be TLS 1.1 (0x%04x) or later", TLS1_1);
        return unlock_cipher(self, NULL);
    }
    result = PyBytes_FromStringAndSize(
        NULL, (Py_ssize_t)(full * (HEADER_LENGTH + rc_fragment_length(self, PLAINTEXT_MAX))
                           + (rest ? HEADER_LENGTH + rc_fragment_length(self, rest) : 0)));
    if (result == NULL)
        return unlock_cipher(self, NULL);
    if (length >= RELEASE_GIL_AT) {
        Py_BEGIN_ALLOW_THREADS
        written = stream_records(self, &h, BYTES(data), full, rest, BYTES(result));
        Py_END_ALLOW_THREADS
    } else {
        written = stream_records(self, &h, BYTES(data), full, rest, BYTES(result));
    }
    if (written < 0) {
        Py_DECREF(result);
        rc_raise(written);
        return unlock_cipher(self, NULL);
    }
    return unlock_cipher(self, result);
}

/* Construction: the lock with the object, the contexts by rc_setup in _recordcrypto_core.c. */

static PyObject *
RecordCipher_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    RecordCipherObject *self = (RecordCipherObject *)PyType_GenericNew(type, args, kwargs);

    if (self != NULL && (self->lock = PyThread_allocate_lock()) == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    return (PyObject *)self;
}

static int
RecordCipher_init(RecordCipherObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"cipher", "mac", "enc_key", "mac_key", "stitched", "multiblock",
                             NULL};
    const char *cipher, *mac;
    PyObject *enc_key, *mac_key;
    int want_stitched = 1, want_multiblock = 1, rc = 0;

    lock_cipher(self);
    rc_free_contexts(self);
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "ssO!O!|$pp", kwlist, &cipher, &mac,
                                     &PyBytes_Type, &enc_key, &PyBytes_Type, &mac_key,
                                     &want_stitched, &want_multiblock))
        rc = -1;
    else if (rc_setup(self, cipher, mac, enc_key, mac_key, want_stitched, want_multiblock) < 0) {
        rc_free_contexts(self);
        rc = -1;
    } else {
        self->ready = 1;
    }
    unlock_cipher(self, NULL);
    return rc;
}

static void
RecordCipher_dealloc(RecordCipherObject *self)
{
    rc_free_contexts(self);
    if (self->lock != NULL)
        PyThread_free_lock(self->lock);
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
    {"seal_stream", (PyCFunction)RecordCipher_seal_stream, METH_VARARGS,
     "seal_stream(seq, content_type, version, data) -> whole records, random explicit IVs"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef RecordCipher_members[] = {
    {"mac_length", T_INT, offsetof(RecordCipherObject, mac_length), READONLY, "MAC bytes"},
    {"block_size", T_INT, offsetof(RecordCipherObject, block_size), READONLY, "0 or 16"},
    {"stitched", T_BOOL, offsetof(RecordCipherObject, stitched), READONLY,
     "whether seal/open use OpenSSL's stitched AES-CBC-HMAC cipher"},
    {"multiblock", T_BOOL, offsetof(RecordCipherObject, multiblock), READONLY,
     "whether seal_stream seals runs of 4 or 8 full records in one multi-block pass"},
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
    .tp_new = RecordCipher_new,
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

    if (rc_hmac_algorithm == NULL
        && (rc_hmac_algorithm = EVP_MAC_fetch(NULL, "HMAC", NULL)) == NULL) {
        ERR_clear_error();
        PyErr_SetString(PyExc_ImportError, "libcrypto has no HMAC");
        return NULL;
    }
    if (PyType_Ready(&RecordCipherType) < 0
        || (empty_bytes == NULL && (empty_bytes = PyBytes_FromStringAndSize(NULL, 0)) == NULL)
        || (m = PyModule_Create(&moduledef)) == NULL)
        return NULL;
    rc_RecordCryptoError = PyErr_NewException(MODULE_NAME ".RecordCryptoError", PyExc_ValueError,
                                              NULL);
    if (rc_RecordCryptoError == NULL
        || PyModule_AddObjectRef(m, "RecordCryptoError", rc_RecordCryptoError) < 0
        || PyModule_AddObjectRef(m, "RecordCipher", (PyObject *)&RecordCipherType) < 0
        || PyModule_AddIntConstant(m, "PLAINTEXT_MAX", PLAINTEXT_MAX) < 0
        || PyModule_AddIntConstant(m, "FRAGMENT_MAX", FRAGMENT_MAX) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
