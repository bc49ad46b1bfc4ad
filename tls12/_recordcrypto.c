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
    rc_write_aad(aad, h.seq, &h, LENGTH(plaintext));
    if (rc_hmac_compute(self, aad, BYTES(plaintext), LENGTH(plaintext), BYTES(result)) < 0) {
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
    result = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)rc_fragment_length(self, length));
    if (result == NULL)
        return NULL;
    if (mac == NULL && self->stitched)
        rc = rc_seal_stitched(self, h, seq, BYTES(plaintext), length, BYTES(iv), BYTES(result));
    else {
        if (mac == NULL)
            rc_write_aad(aad, seq, h, length);
        rc = rc_seal_generic(self, aad, BYTES(plaintext), length, mac == NULL ? NULL : BYTES(mac),
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
    length = rc_open_one(self, &h, h.seq, BYTES(fragment), LENGTH(fragment), &plaintext);
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
            length = rc_open_one(self, &h, h.seq + (uint64_t)i, BYTES(in), LENGTH(in), &plaintext);
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

/* seal_stream: `data` cut into records of 2^14 bytes (the last shorter), numbered from seq,
 * as whole wire records with explicit IVs from OpenSSL's RNG.  Runs of 8 or 4 full records
 * go through the multi-block path when the cipher has it; the rest record by record. */
static PyObject *
RecordCipher_seal_stream(RecordCipherObject *self, PyObject *args)
{
    PyObject *seq, *content_type, *version, *data, *result;
    size_t length, full, count, rest, i, n;
    const unsigned char *in;
    unsigned char *out;
    Py_ssize_t written;
    RecordHeader h;

    if (!PyArg_ParseTuple(args, "OOOO!", &seq, &content_type, &version, &PyBytes_Type, &data)
        || CHECK_MAC_KEY(self) < 0)
        return NULL;
    length = LENGTH(data), full = length / PLAINTEXT_MAX, rest = length % PLAINTEXT_MAX;
    count = full + (rest != 0);
    if (parse_header(seq, content_type, version, (Py_ssize_t)count, &h) < 0)
        return NULL;
    if (self->block_size && h.version < TLS1_1)
        return PyErr_Format(PyExc_ValueError, "seal_stream draws explicit IVs: version must "
                            "be TLS 1.1 (0x%04x) or later", TLS1_1);
    result = PyBytes_FromStringAndSize(
        NULL, (Py_ssize_t)(full * (HEADER_LENGTH + rc_fragment_length(self, PLAINTEXT_MAX))
                           + (rest ? HEADER_LENGTH + rc_fragment_length(self, rest) : 0)));
    if (result == NULL)
        return NULL;
    in = BYTES(data), out = BYTES(result);
    for (i = 0; i < count; i += n, in += n * PLAINTEXT_MAX, out += written) {
        n = !self->multiblock ? 1 : full - i >= 8 ? 8 : full - i >= 4 ? 4 : 1;
        if (n > 1)
            written = rc_seal_multiblock(self, &h, h.seq + i, in, (unsigned int)n, out);
        else
            written = rc_seal_random_iv(self, &h, h.seq + i, in,
                                        i < full ? PLAINTEXT_MAX : rest, out);
        if (written < 0) {
            Py_DECREF(result);
            return NULL;
        }
    }
    return result;
}

/* Construction: the contexts are set up by rc_setup in _recordcrypto_core.c. */

static int
RecordCipher_init(RecordCipherObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"cipher", "mac", "enc_key", "mac_key", "stitched", "multiblock",
                             NULL};
    const char *cipher, *mac;
    PyObject *enc_key, *mac_key;
    int want_stitched = 1, want_multiblock = 1;

    rc_free_contexts(self);
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "ssO!O!|$pp", kwlist, &cipher, &mac,
                                     &PyBytes_Type, &enc_key, &PyBytes_Type, &mac_key,
                                     &want_stitched, &want_multiblock))
        return -1;
    if (rc_setup(self, cipher, mac, enc_key, mac_key, want_stitched, want_multiblock) < 0) {
        rc_free_contexts(self);
        return -1;
    }
    self->ready = 1;
    return 0;
}

static void
RecordCipher_dealloc(RecordCipherObject *self)
{
    rc_free_contexts(self);
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
