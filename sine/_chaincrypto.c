/*
 * sine._chaincrypto: verification of a run of SINE hash-chain records in one call.
 *
 * FORMAT.md section 3 and 5: record Y_i = B_i || h_{i+1} is trusted when H(Y_i) == h_i, and
 * it hands over the next trusted value h_{i+1}.  verify_run() takes the trusted h_i and a
 * buffer of consecutive records in the wire format and checks as many whole records as the
 * buffer (and max_records) holds, stopping at the first one whose hash differs.  In the
 * separate-tag form (section 7) the record is the bare block B_i and the links h_{i+1} come
 * from a second buffer.  The last record of a chain (padding, terminator) is not handled
 * here: the caller stops the run before it (sine/verifier.py).
 *
 * verify_run_joined() makes the same checks and returns the verified blocks as one bytes
 * object instead of a list of them (one allocation per run, not per block).
 *
 * Only bytes and int cross the boundary; sine/chaincrypto.py documents the interface and
 * selects the backend, and sine/_chaincrypto_py.py is the pure-Python twin the tests hold
 * this file to, result for result.
 *
 * SHA-2 comes from libcrypto (EVP, fetched once at import); nothing here is a hash.  Each
 * block is copied into the bytes object that will be returned *before* it is hashed, and the
 * link into a local array, so the bytes released are exactly the bytes checked even if the
 * caller's buffer changes under a released GIL.  Runs of at least GIL_RELEASE_BYTES are
 * hashed without the GIL; the digests are compared with CRYPTO_memcmp.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <string.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>

#define MODULE_NAME "sine._chaincrypto"
#define MIN_BLOCK_SIZE 16
#define MAX_BLOCK_SIZE (1 << 20)
#define HASH_MAX 64
#define GIL_RELEASE_BYTES (64 * 1024)
#define CACHE_LINE 64

/* A body larger than the caches comes from memory: without a prefetch, each record's copy
 * waits for it (some 0.05-0.1 us a 1 KiB record, benchmarks/bench_sine.py). */
#if defined(__GNUC__) || defined(__clang__)
#define PREFETCH(p) __builtin_prefetch(p)
#else
#define PREFETCH(p) ((void)(p))
#endif

typedef struct {
    const char *name;      /* the hash_name argument (hashlib's name) */
    const char *evp_name;  /* OpenSSL's name */
    int length;
    EVP_MD *md;            /* fetched at import */
} Hash;

static Hash hashes[] = {
    {"sha256", "SHA2-256", 32, NULL},
    {"sha384", "SHA2-384", 48, NULL},
    {"sha512", "SHA2-512", 64, NULL},
};
#define HASH_COUNT ((int)(sizeof(hashes) / sizeof(hashes[0])))

static const Hash *
find_hash(PyObject *name)
{
    const char *s;
    int i;

    if (!PyUnicode_Check(name)) {
        PyErr_SetString(PyExc_TypeError, "hash_name must be a str");
        return NULL;
    }
    if ((s = PyUnicode_AsUTF8(name)) == NULL)
        return NULL;
    for (i = 0; i < HASH_COUNT; i++)
        if (strcmp(s, hashes[i].name) == 0)
            return &hashes[i];
    PyErr_Format(PyExc_ValueError, "unsupported hash %R", name);
    return NULL;
}

/* A non-negative int; values beyond Py_ssize_t are clamped (as many as there are). */
static int
parse_count(PyObject *obj, const char *what, Py_ssize_t *out)
{
    long long value;
    int overflow;

    if (!PyLong_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be an int", what);
        return -1;
    }
    value = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (value == -1 && PyErr_Occurred())
        return -1;
    if (overflow < 0 || (overflow == 0 && value < 0)) {
        PyErr_Format(PyExc_ValueError, "%s must not be negative", what);
        return -1;
    }
    *out = (overflow > 0 || value > PY_SSIZE_T_MAX) ? PY_SSIZE_T_MAX : (Py_ssize_t)value;
    return 0;
}

/*
 * Check records 0..count-1; record i is rec(i) (block_size bytes, already copied into
 * out[i]) followed by its link link(i) (hlen bytes).  Returns the number of records that
 * verified, trusted updated to the link of the last of them, or -1 when OpenSSL failed.
 * Runs with or without the GIL: it touches only C memory and the private bytes of out[].
 */
static Py_ssize_t
check_records(const Hash *hash, EVP_MD_CTX *ctx, unsigned char *trusted, const char *data,
              Py_ssize_t stride, const char *links, Py_ssize_t block_size, Py_ssize_t count,
              char *const *out)
{
    unsigned char digest[HASH_MAX], link[HASH_MAX];
    unsigned int digest_length;
    size_t hlen = (size_t)hash->length;
    Py_ssize_t i;

    for (i = 0; i < count; i++) {
        const char *record = data + i * stride;
        Py_ssize_t k;
        if (i + 1 < count)  /* the next record comes from memory while this one is hashed */
            for (k = 0; k < stride; k += CACHE_LINE)
                PREFETCH(record + stride + k);
        memcpy(out[i], record, (size_t)block_size);
        memcpy(link, links != NULL ? links + i * (Py_ssize_t)hlen : record + block_size, hlen);
        if (!EVP_DigestInit_ex2(ctx, hash->md, NULL)
            || !EVP_DigestUpdate(ctx, out[i], (size_t)block_size)
            || !EVP_DigestUpdate(ctx, link, hlen)
            || !EVP_DigestFinal_ex(ctx, digest, &digest_length) || digest_length != hlen)
            return -1;
        if (CRYPTO_memcmp(digest, trusted, hlen) != 0)
            break;
        memcpy(trusted, link, hlen);
    }
    return i;
}

/*
 * verify_run() and verify_run_joined(): the same checks; the verified blocks come back as a
 * list of bytes objects, one per block, or (joined) as one bytes object, the blocks in order.
 */
static PyObject *
verify_any(PyObject *const *args, Py_ssize_t nargs, int joined)
{
    const Hash *hash;
    Py_ssize_t block_size, max_records, stride, count, verified = -1, i;
    Py_buffer data = {0}, links = {0};
    unsigned char trusted[HASH_MAX];
    PyObject *blocks = NULL, *result = NULL;
    char **out = NULL;
    EVP_MD_CTX *ctx = NULL;
    int have_links;

    if (nargs < 5 || nargs > 6) {
        PyErr_Format(PyExc_TypeError, "%s expected 5 or 6 positional arguments, got %zd",
                     joined ? "verify_run_joined" : "verify_run", nargs);
        return NULL;
    }
    if ((hash = find_hash(args[0])) == NULL || parse_count(args[1], "block_size", &block_size) < 0)
        return NULL;
    if (block_size < MIN_BLOCK_SIZE || block_size > MAX_BLOCK_SIZE) {
        PyErr_Format(PyExc_ValueError, "block_size must be in %d..%d", MIN_BLOCK_SIZE,
                     MAX_BLOCK_SIZE);
        return NULL;
    }
    if (!PyBytes_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "trusted must be bytes");
        return NULL;
    }
    if (PyBytes_GET_SIZE(args[2]) != hash->length) {
        PyErr_Format(PyExc_ValueError, "trusted must be %d bytes for %s", hash->length,
                     hash->name);
        return NULL;
    }
    memcpy(trusted, PyBytes_AS_STRING(args[2]), (size_t)hash->length);
    if (parse_count(args[4], "max_records", &max_records) < 0)
        return NULL;
    have_links = nargs == 6 && args[5] != Py_None;
    if (PyObject_GetBuffer(args[3], &data, PyBUF_SIMPLE) < 0)
        return NULL;
    if (have_links && PyObject_GetBuffer(args[5], &links, PyBUF_SIMPLE) < 0)
        goto done;

    stride = have_links ? block_size : block_size + hash->length;
    count = data.len / stride;
    if (have_links && links.len / hash->length < count)
        count = links.len / hash->length;
    if (max_records < count)
        count = max_records;

    if (count > 0 && (out = PyMem_Malloc((size_t)count * sizeof(char *))) == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (joined) {  /* count * block_size <= data.len: no overflow */
        if ((blocks = PyBytes_FromStringAndSize(NULL, count * block_size)) == NULL)
            goto done;
        for (i = 0; i < count; i++)
            out[i] = PyBytes_AS_STRING(blocks) + i * block_size;
    } else {
        if ((blocks = PyList_New(count)) == NULL)
            goto done;
        for (i = 0; i < count; i++) {
            PyObject *block = PyBytes_FromStringAndSize(NULL, block_size);
            if (block == NULL)
                goto done;
            PyList_SET_ITEM(blocks, i, block);
            out[i] = PyBytes_AS_STRING(block);
        }
    }
    if ((ctx = EVP_MD_CTX_new()) == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (count * stride >= GIL_RELEASE_BYTES) {
        Py_BEGIN_ALLOW_THREADS
        verified = check_records(hash, ctx, trusted, data.buf, stride,
                                 have_links ? links.buf : NULL, block_size, count, out);
        Py_END_ALLOW_THREADS
    } else {
        verified = check_records(hash, ctx, trusted, data.buf, stride,
                                 have_links ? links.buf : NULL, block_size, count, out);
    }
    if (verified < 0) {
        ERR_clear_error();
        PyErr_SetString(PyExc_ValueError, "OpenSSL call failed");
        goto done;
    }
    /* Keep the blocks that verified; the rest were copied but never released. */
    if (verified < count) {
        if (joined ? _PyBytes_Resize(&blocks, verified * block_size) < 0
                   : PyList_SetSlice(blocks, verified, count, NULL) < 0)
            goto done;  /* _PyBytes_Resize set blocks to NULL */
    }
    result = Py_BuildValue("(Oy#O)", blocks, (const char *)trusted, (Py_ssize_t)hash->length,
                           verified < count ? Py_True : Py_False);
done:
    EVP_MD_CTX_free(ctx);
    PyMem_Free(out);
    Py_XDECREF(blocks);
    if (links.obj != NULL)
        PyBuffer_Release(&links);
    PyBuffer_Release(&data);
    return result;
}

static PyObject *
verify_run(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    return verify_any(args, nargs, 0);
}

static PyObject *
verify_run_joined(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    return verify_any(args, nargs, 1);
}

static PyMethodDef methods[] = {
    {"verify_run", (PyCFunction)(void (*)(void))verify_run, METH_FASTCALL,
     "verify_run(hash_name, block_size, trusted, data, max_records, links=None, /)\n"
     "-> (blocks, trusted, mismatch): see sine/chaincrypto.py"},
    {"verify_run_joined", (PyCFunction)(void (*)(void))verify_run_joined, METH_FASTCALL,
     "verify_run_joined(hash_name, block_size, trusted, data, max_records, links=None, /)\n"
     "-> (joined_blocks, trusted, mismatch): see sine/chaincrypto.py"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT,
    .m_name = MODULE_NAME,
    .m_doc = "SINE hash-chain verification of a run of records, backed by libcrypto.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__chaincrypto(void)
{
    PyObject *m;
    int i;

    for (i = 0; i < HASH_COUNT; i++) {
        if (hashes[i].md == NULL
            && (hashes[i].md = EVP_MD_fetch(NULL, hashes[i].evp_name, NULL)) == NULL) {
            ERR_clear_error();
            PyErr_Format(PyExc_ImportError, "libcrypto has no %s", hashes[i].evp_name);
            return NULL;
        }
    }
    if ((m = PyModule_Create(&moduledef)) == NULL)
        return NULL;
    if (PyModule_AddIntConstant(m, "MIN_BLOCK_SIZE", MIN_BLOCK_SIZE) < 0
        || PyModule_AddIntConstant(m, "MAX_BLOCK_SIZE", MAX_BLOCK_SIZE) < 0
        || PyModule_AddIntConstant(m, "GIL_RELEASE_BYTES", GIL_RELEASE_BYTES) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
