/* The arithmetic of crawler/fingerprint.py in C: the shingles' hashes, the
 * SimHash vote, the sorted unique set resemblance is judged on, its 128
 * one-permutation MinHash bins and its bottom-k 32-bit sample.
 *
 * The module computes exactly what fingerprint.py's numpy code computes
 * (tests/test_fingerprint.py compares the two on every kind of text); that
 * code stays the reference and the fallback when this module is not built.
 * Tokenizing and the units' md5 hashes stay in Python (the regex engine and
 * a dict cache already run in C); this module takes the units' hashes. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define M1 0xBF58476D1CE4E5B9ULL
#define M2 0x94D049BB133111EBULL
#define GOLDEN 0x9E3779B97F4A7C15ULL
#define BINS 128
#define LOW57 ((1ULL << 57) - 1)
#define EMPTY UINT64_MAX

static uint64_t SEEDS[8];

static inline uint64_t mix(uint64_t x)
{
    x ^= x >> 30;
    x *= M1;
    x ^= x >> 27;
    x *= M2;
    return x ^ (x >> 31);
}

/* The features of one token stream: CJK runs (lengths in runs[], their
 * characters' hashes first in units[]), then words (the rest of units[]).
 * Writes every feature occurrence's hash to out (when not NULL) and those
 * resemblance is judged on to judged; returns how many of each. Capacity:
 * at most 2 * n_units + 1 of each. */
static void features(const uint64_t *units, Py_ssize_t n_units, const int64_t *runs, Py_ssize_t n_runs,
                     uint64_t *out, Py_ssize_t *n_out, uint64_t *judged, Py_ssize_t *n_judged)
{
    Py_ssize_t o = 0, j = 0, at = 0;
    for (Py_ssize_t r = 0; r < n_runs; r++) {
        const uint64_t *u = units + at;
        int64_t len = runs[r];
        at += len;
        if (len <= 3) {
            uint64_t acc = SEEDS[len];
            for (int64_t i = 0; i < len; i++)
                acc = mix(acc ^ u[i]);
            if (out) out[o++] = acc;
            judged[j++] = acc;
        } else {
            for (int64_t i = 0; i + 2 < len; i++) {
                uint64_t acc = mix(mix(mix(SEEDS[3] ^ u[i]) ^ u[i + 1]) ^ u[i + 2]);
                if (out) out[o++] = acc;
                judged[j++] = acc;
            }
        }
    }
    const uint64_t *w = units + at;
    Py_ssize_t n = n_units - at;
    if (n == 1) {
        uint64_t acc = mix(SEEDS[1] ^ w[0]);
        if (out) out[o++] = acc;
        judged[j++] = acc;
    } else if (n > 1) {
        for (Py_ssize_t i = 0; i + 1 < n; i++) {
            uint64_t acc = mix(mix(SEEDS[2] ^ w[i]) ^ w[i + 1]);
            if (out) out[o++] = acc;
            if (n == 2) judged[j++] = acc;
        }
        for (Py_ssize_t i = 0; i + 2 < n; i++) {
            uint64_t acc = mix(mix(mix(SEEDS[3] ^ w[i]) ^ w[i + 1]) ^ w[i + 2]);
            if (out) out[o++] = acc;
            judged[j++] = acc;
        }
    }
    if (n_out) *n_out = o;
    *n_judged = j;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static int read_stream(PyObject *units_obj, PyObject *runs_obj, Py_buffer *units, Py_buffer *runs)
{
    if (PyObject_GetBuffer(units_obj, units, PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    if (PyObject_GetBuffer(runs_obj, runs, PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(units);
        return -1;
    }
    if (units->len % 8 || runs->len % 8) {
        PyErr_SetString(PyExc_ValueError, "units and runs are arrays of 64-bit integers");
        goto fail;
    }
    const int64_t *r = (const int64_t *)runs->buf;
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < runs->len / 8; i++) {
        if (r[i] < 1 || r[i] > units->len / 8) {
            PyErr_SetString(PyExc_ValueError, "a run's length is out of range");
            goto fail;
        }
        total += r[i];
    }
    if (total > units->len / 8) {
        PyErr_SetString(PyExc_ValueError, "the runs are longer than the units");
        goto fail;
    }
    return 0;
fail:
    PyBuffer_Release(units);
    PyBuffer_Release(runs);
    return -1;
}

/* fingerprint(units, runs, judged_units, judged_runs, sample)
 *   -> (simhash, judged_unique: bytes, bins: bytes, sample: bytes)
 *
 * units, runs: the text's token stream (dates left out), as arrays of
 * uint64 / int64. judged_units, judged_runs: the stream resemblance is
 * judged on (dates kept), or None for the same stream. simhash: the vote of
 * every feature occurrence (0 when there is none). judged_unique: the sorted
 * unique judged hashes (uint64, native order). bins: 128 uint64, each bin's
 * smallest value (its low 57 bits), EMPTY (2**64 - 1) for an empty bin.
 * sample: the `sample` smallest unique low 32 bits (uint32, native order). */
static PyObject *fingerprint(PyObject *self, PyObject *args)
{
    PyObject *units_obj, *runs_obj, *j_units_obj, *j_runs_obj;
    Py_ssize_t sample;
    if (!PyArg_ParseTuple(args, "OOOOn", &units_obj, &runs_obj, &j_units_obj, &j_runs_obj, &sample))
        return NULL;
    if (sample < 0) {
        PyErr_SetString(PyExc_ValueError, "sample must not be negative");
        return NULL;
    }
    Py_buffer units, runs, j_units, j_runs;
    if (read_stream(units_obj, runs_obj, &units, &runs) < 0)
        return NULL;
    int separate = j_units_obj != Py_None;
    if (separate && read_stream(j_units_obj, j_runs_obj, &j_units, &j_runs) < 0) {
        PyBuffer_Release(&units);
        PyBuffer_Release(&runs);
        return NULL;
    }
    Py_ssize_t n_units = units.len / 8;
    Py_ssize_t n_j_units = separate ? j_units.len / 8 : n_units;
    /* judged holds the first stream's judged hashes too, overwritten by the
     * second's when there is one. */
    Py_ssize_t cap = 2 * (n_units > n_j_units ? n_units : n_j_units) + 1;
    uint64_t *out = PyMem_Malloc(sizeof(uint64_t) * (2 * n_units + 1));
    uint64_t *judged = PyMem_Malloc(sizeof(uint64_t) * cap);
    uint32_t *low = PyMem_Malloc(sizeof(uint32_t) * cap);
    PyObject *result = NULL;
    if (!out || !judged || !low) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t n_out = 0, n_judged = 0;
    features(units.buf, n_units, runs.buf, runs.len / 8, out, &n_out, judged, &n_judged);
    if (separate)
        features(j_units.buf, n_j_units, j_runs.buf, j_runs.len / 8, NULL, NULL, judged, &n_judged);

    /* The vote: bit b is set when more than half of the features have it. */
    uint64_t simhash = 0;
    if (n_out) {
        int64_t counts[64] = {0};
        for (Py_ssize_t i = 0; i < n_out; i++) {
            uint64_t h = out[i];
            for (int b = 0; b < 64; b++)
                counts[b] += (h >> b) & 1;
        }
        for (int b = 0; b < 64; b++)
            if (2 * counts[b] > n_out)
                simhash |= 1ULL << b;
    }

    qsort(judged, n_judged, sizeof(uint64_t), cmp_u64);
    Py_ssize_t n_unique = 0;
    for (Py_ssize_t i = 0; i < n_judged; i++)
        if (!n_unique || judged[i] != judged[n_unique - 1])
            judged[n_unique++] = judged[i];

    uint64_t bins[BINS];
    for (int b = 0; b < BINS; b++)
        bins[b] = EMPTY;
    for (Py_ssize_t i = 0; i < n_unique; i++) {
        int b = (int)(judged[i] >> 57);
        if (bins[b] == EMPTY)
            bins[b] = judged[i] & LOW57; /* sorted: a bin's first is its smallest */
    }

    for (Py_ssize_t i = 0; i < n_unique; i++)
        low[i] = (uint32_t)judged[i];
    qsort(low, n_unique, sizeof(uint32_t), cmp_u32);
    Py_ssize_t n_low = 0;
    for (Py_ssize_t i = 0; i < n_unique && n_low < sample; i++)
        if (!n_low || low[i] != low[n_low - 1])
            low[n_low++] = low[i];

    result = Py_BuildValue("(Ny#y#y#)", PyLong_FromUnsignedLongLong(simhash),
                           (const char *)judged, n_unique * (Py_ssize_t)sizeof(uint64_t),
                           (const char *)bins, (Py_ssize_t)sizeof(bins),
                           (const char *)low, n_low * (Py_ssize_t)sizeof(uint32_t));
done:
    PyMem_Free(out);
    PyMem_Free(judged);
    PyMem_Free(low);
    PyBuffer_Release(&units);
    PyBuffer_Release(&runs);
    if (separate) {
        PyBuffer_Release(&j_units);
        PyBuffer_Release(&j_runs);
    }
    return result;
}

static PyMethodDef methods[] = {
    {"fingerprint", fingerprint, METH_VARARGS,
     "fingerprint(units, runs, judged_units, judged_runs, sample) -> "
     "(simhash, judged_unique, bins, sample): see crawler/fingerprint.py"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "crawler._fpcore",
                                    "The arithmetic of crawler/fingerprint.py in C.", -1, methods};

PyMODINIT_FUNC PyInit__fpcore(void)
{
    for (uint64_t n = 0; n < 8; n++)
        SEEDS[n] = mix(n * GOLDEN);
    return PyModule_Create(&module);
}
