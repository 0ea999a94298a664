/* The arithmetic of crawler/fingerprint.py in C: the shingles' hashes, the
 * SimHash vote, the sorted unique set resemblance is judged on, its 128
 * one-permutation MinHash bins and its bottom-k 32-bit sample.
 *
 * The module computes exactly what fingerprint.py's numpy code computes
 * (tests/test_fingerprint.py compares the two on every kind of text); that
 * code stays the reference and the fallback when this module is not built.
 * It also tokenizes (stream below), with a cache of the units' hashes;
 * the hashes themselves (md5) and the dates stay in Python. */

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


/* ---- Tokenizing: the units of a text and their hashes ---------------------
 *
 * stream(text, unit_hash) is fingerprint.py's _stream(*_split(text)): the
 * text's tokens as the regex [CJK]+|[^\W CJK]+ finds them (CJK: the ranges
 * of fingerprint._CJK; \w: what the regex engine takes for a word
 * character, Py_UNICODE_ISALNUM or "_"), each CJK run's characters and
 * each other token a unit; returned as the units' hashes (uint64: the runs'
 * characters, then the words, in order) and the runs' lengths (int64).
 * A unit's hash is unit_hash(unit) (fingerprint._unit_md5), kept in a
 * cache of this module: most units were seen before, and neither a str
 * object nor a dict lookup is made for them. */

#define CACHE_SLOTS (1 << 19)   /* a power of two, twice CACHE_MAX */
#define CACHE_MAX (1 << 18)     /* entries; full, the cache starts again empty */
#define CACHE_POOL (1 << 22)    /* code points of the cached units' text */
#define CACHE_UNIT_MAX 64       /* longer units are hashed every time */

typedef struct {
    uint64_t key; /* the unit's hash of its code points; 0: an empty slot */
    uint64_t value;
    uint32_t at, len; /* where its code points are in the pool */
} slot_t;

static slot_t *cache;
static Py_UCS4 *pool;
static Py_ssize_t cache_n, pool_n;

static void cache_clear(void)
{
    if (cache)
        memset(cache, 0, sizeof(slot_t) * CACHE_SLOTS);
    cache_n = pool_n = 0;
}

static inline int kind_of(Py_UCS4 c)
{
    if (c < 128)
        return ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || c == '_') ? 2 : 0;
    if ((c >= 0x3040 && c <= 0x30ff) || (c >= 0x3400 && c <= 0x4dbf) || (c >= 0x4e00 && c <= 0x9fff) ||
        (c >= 0xac00 && c <= 0xd7af) || (c >= 0xf900 && c <= 0xfaff))
        return 1;
    return (Py_UNICODE_ISALNUM(c) || c == '_') ? 2 : 0;
}

/* The hash of the unit text[start:end], from the cache or unit_hash. */
static int unit_of(PyObject *text, int kind, const void *data, Py_ssize_t start, Py_ssize_t end,
                   PyObject *unit_hash, uint64_t *value)
{
    Py_ssize_t len = end - start;
    uint64_t key = 0xcbf29ce484222325ULL; /* FNV-1a over the code points, then mixed */
    for (Py_ssize_t i = start; i < end; i++)
        key = (key ^ PyUnicode_READ(kind, data, i)) * 0x100000001b3ULL;
    key = mix(key ^ (uint64_t)len) | 1; /* never 0: 0 marks an empty slot */
    slot_t *slot = NULL;
    if (len <= CACHE_UNIT_MAX && cache) {
        for (size_t i = key & (CACHE_SLOTS - 1);; i = (i + 1) & (CACHE_SLOTS - 1)) {
            slot = &cache[i];
            if (!slot->key)
                break;
            if (slot->key == key && slot->len == (uint32_t)len) {
                const Py_UCS4 *p = pool + slot->at;
                Py_ssize_t k = 0;
                while (k < len && p[k] == PyUnicode_READ(kind, data, start + k))
                    k++;
                if (k == len) {
                    *value = slot->value;
                    return 0;
                }
            }
        }
    }
    PyObject *unit = PyUnicode_Substring(text, start, end);
    if (!unit)
        return -1;
    PyObject *h = PyObject_CallOneArg(unit_hash, unit);
    Py_DECREF(unit);
    if (!h)
        return -1;
    *value = PyLong_AsUnsignedLongLong(h);
    Py_DECREF(h);
    if (*value == (uint64_t)-1 && PyErr_Occurred())
        return -1;
    if (slot) {
        if (cache_n >= CACHE_MAX || pool_n + len > CACHE_POOL) {
            cache_clear(); /* as fingerprint._UNITS at _UNITS_MAX: start again */
            for (size_t i = key & (CACHE_SLOTS - 1);; i = (i + 1) & (CACHE_SLOTS - 1))
                if (!cache[i].key) {
                    slot = &cache[i];
                    break;
                }
        }
        for (Py_ssize_t k = 0; k < len; k++)
            pool[pool_n + k] = PyUnicode_READ(kind, data, start + k);
        slot->key = key;
        slot->value = *value;
        slot->at = (uint32_t)pool_n;
        slot->len = (uint32_t)len;
        pool_n += len;
        cache_n++;
    }
    return 0;
}

static PyObject *stream(PyObject *self, PyObject *args)
{
    PyObject *text, *unit_hash;
    if (!PyArg_ParseTuple(args, "UO", &text, &unit_hash))
        return NULL;
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(text) < 0) /* a legacy string: its code points made ready to read */
        return NULL;
#endif
    if (!PyCallable_Check(unit_hash)) {
        PyErr_SetString(PyExc_TypeError, "unit_hash must be callable");
        return NULL;
    }
    if (!cache) {
        cache = PyMem_Calloc(CACHE_SLOTS, sizeof(slot_t));
        pool = PyMem_Malloc(sizeof(Py_UCS4) * CACHE_POOL);
        if (!cache || !pool) {
            PyMem_Free(cache);
            PyMem_Free(pool);
            cache = NULL;
            pool = NULL;
            return PyErr_NoMemory();
        }
    }
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    /* At most n units and n runs: the characters' units fill chars from the
     * start, the words' fill words; chars then words are returned. */
    uint64_t *chars = PyMem_Malloc(sizeof(uint64_t) * (n + 1));
    uint64_t *words = PyMem_Malloc(sizeof(uint64_t) * (n + 1));
    int64_t *runs = PyMem_Malloc(sizeof(int64_t) * (n + 1));
    PyObject *result = NULL, *units_bytes = NULL;
    if (!chars || !words || !runs) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t n_chars = 0, n_words = 0, n_runs = 0;
    for (Py_ssize_t i = 0; i < n;) {
        int k = kind_of(PyUnicode_READ(kind, data, i));
        if (!k) {
            i++;
            continue;
        }
        Py_ssize_t j = i + 1;
        while (j < n && kind_of(PyUnicode_READ(kind, data, j)) == k)
            j++;
        if (k == 1) {
            runs[n_runs++] = j - i;
            for (Py_ssize_t c = i; c < j; c++)
                if (unit_of(text, kind, data, c, c + 1, unit_hash, &chars[n_chars++]) < 0)
                    goto done;
        } else if (unit_of(text, kind, data, i, j, unit_hash, &words[n_words++]) < 0) {
            goto done;
        }
        i = j;
    }
    units_bytes = PyBytes_FromStringAndSize(NULL, (n_chars + n_words) * (Py_ssize_t)sizeof(uint64_t));
    if (!units_bytes)
        goto done;
    memcpy(PyBytes_AS_STRING(units_bytes), chars, n_chars * sizeof(uint64_t));
    memcpy(PyBytes_AS_STRING(units_bytes) + n_chars * sizeof(uint64_t), words, n_words * sizeof(uint64_t));
    result = Py_BuildValue("(Oy#)", units_bytes, (const char *)runs, n_runs * (Py_ssize_t)sizeof(int64_t));
done:
    Py_XDECREF(units_bytes);
    PyMem_Free(chars);
    PyMem_Free(words);
    PyMem_Free(runs);
    return result;
}

static PyObject *stream_cache(PyObject *self, PyObject *args)
{
    return Py_BuildValue("(nn)", cache_n, pool_n);
}

static PyObject *stream_cache_clear(PyObject *self, PyObject *args)
{
    cache_clear();
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"fingerprint", fingerprint, METH_VARARGS,
     "fingerprint(units, runs, judged_units, judged_runs, sample) -> "
     "(simhash, judged_unique, bins, sample): see crawler/fingerprint.py"},
    {"stream", stream, METH_VARARGS,
     "stream(text, unit_hash) -> (units, runs): fingerprint._stream(*fingerprint._split(text))"},
    {"stream_cache", stream_cache, METH_NOARGS, "stream_cache() -> (units cached, code points they hold)"},
    {"stream_cache_clear", stream_cache_clear, METH_NOARGS, "stream_cache_clear(): empty the units' cache"},
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
