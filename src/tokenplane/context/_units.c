/* Compiled kernels over a text's units (context/unit_kernels.py holds their pure-Python
 * definitions and falls back to them when this extension was not built):
 *
 * - unit_hashes(data, seed): each unit's 64-bit hash, ``data`` the units as UTF-8
 *   separated by spaces (context/text.py, ``unit_bytes``);
 * - analyse(data, seed): those hashes, the 3-unit shingle hashes (as made: neither
 *   sorted nor deduplicated), the MinHash signature and the exact-duplicate key
 *   (context/minhash.py's definitions over these unit hashes);
 * - term_counts(data, terms): the number of units and how often each of ``terms``
 *   (distinct bytes) occurs among them;
 * - query_counts(texts, terms, encoded): the same of each text (its units as
 *   ``text.unit_bytes`` makes them, read straight from it), the terms that occur as a
 *   dictionary; None for a Chinese or Japanese text (context/query_counts.py);
 * - lower_unit_bytes(text, lowered): ``text.unit_bytes`` of a text holding a non-ASCII
 *   character (False: lower-case it first);
 * - near(sig, kept, floor): which of the kept signatures ``minhash.estimates`` puts at
 *   ``floor`` or more.
 *
 * A unit's hash is a seeded hash of its bytes (the seed is Python's salted hash of a
 * constant, so it changes per process as Python's string hashes do); only its equality
 * for equal units within the process matters. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define BINS 128
#define BIN_SHIFT 57 /* 64 - log2(BINS) */
#define VALUE_MASK ((UINT64_C(1) << 57) - 1)
#define EMPTY UINT64_MAX
#define P1 UINT64_C(0x9E3779B97F4A7C15)
#define P2 UINT64_C(0xC2B2AE3D27D4EB4F)
#define M1 UINT64_C(0xBF58476D1CE4E5B9)
#define M2 UINT64_C(0x94D049BB133111EB)

static inline uint64_t mix(uint64_t h) { /* the splitmix64 finalizer */
    h ^= h >> 30;
    h *= M1;
    h ^= h >> 27;
    h *= M2;
    h ^= h >> 31;
    return h;
}

static inline uint64_t hash_unit(const unsigned char *p, Py_ssize_t n, uint64_t seed) {
    uint64_t h = seed ^ ((uint64_t)n * P1);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ mix(w ^ P2)) * P1;
        p += 8;
        n -= 8;
    }
    if (n > 0) {
        uint64_t w = 0;
        memcpy(&w, p, (size_t)n);
        h = (h ^ mix(w ^ P2)) * P1;
    }
    return mix(h);
}

/* Units are found 64 bytes at a time: a mask of the spaces (8 bytes at a time on
 * little-endian machines, no branch per byte), then each unit's start (a non-space
 * after a space) and end (a space after a non-space) read off the masks, so the scan
 * does not mispredict a branch at every unit's ends. */
typedef struct {
    const unsigned char *s;
    Py_ssize_t len, base, open; /* open: the start of a unit not yet ended, or -1 */
    uint64_t starts, ends, prev;
} Units;

/* bit j: p[j] is a space, for j < n (n <= 64); set for j >= n */
static inline uint64_t space_mask(const unsigned char *p, Py_ssize_t n) {
    uint64_t m = 0;
#if PY_LITTLE_ENDIAN
    for (Py_ssize_t q = 0; q < n; q += 8) {
        uint64_t w = UINT64_C(0x2020202020202020);
        memcpy(&w, p + q, (size_t)(n - q < 8 ? n - q : 8));
        uint64_t y = w ^ UINT64_C(0x2020202020202020); /* a space's byte is 0 */
        uint64_t z = ~(((y & UINT64_C(0x7f7f7f7f7f7f7f7f)) + UINT64_C(0x7f7f7f7f7f7f7f7f)) | y |
                       UINT64_C(0x7f7f7f7f7f7f7f7f)); /* 0x80 in each zero byte, exactly */
        m |= (((z >> 7) * UINT64_C(0x0102040810204080)) >> 56) << q; /* byte i -> bit i */
    }
#else
    for (Py_ssize_t j = 0; j < n; j++)
        m |= (uint64_t)(p[j] == ' ') << j;
#endif
    if (n < 64)
        m |= ~UINT64_C(0) << n;
    return m;
}

static inline void units_block(Units *u) {
    Py_ssize_t n = u->len - u->base < 64 ? u->len - u->base : 64;
    uint64_t sp = space_mask(u->s + u->base, n);
    uint64_t before = (sp << 1) | u->prev; /* bit j: the byte before j is a space */
    u->starts = ~sp & before;
    u->ends = sp & ~before;
    u->prev = sp >> 63;
}

static void units_init(Units *u, const unsigned char *s, Py_ssize_t len) {
    u->s = s;
    u->len = len;
    u->base = 0;
    u->open = -1;
    u->prev = 1; /* (a space before the text) */
    u->starts = u->ends = 0;
    if (len > 0)
        units_block(u);
}

/* the next unit's start and size; 0 when there is none */
static inline int units_next(Units *u, Py_ssize_t *start, Py_ssize_t *size) {
    for (;;) {
        if (u->open < 0 && u->starts) {
            u->open = u->base + __builtin_ctzll(u->starts);
            u->starts &= u->starts - 1;
        }
        if (u->open >= 0 && u->ends) {
            Py_ssize_t end = u->base + __builtin_ctzll(u->ends);
            u->ends &= u->ends - 1;
            *start = u->open;
            *size = end - u->open;
            u->open = -1;
            return 1;
        }
        u->base += 64; /* (starts and ends alternate: this block has no more) */
        if (u->base >= u->len) {
            if (u->open < 0)
                return 0;
            *start = u->open; /* a unit running to the end */
            *size = u->len - u->open;
            u->open = -1;
            return 1;
        }
        units_block(u);
    }
}

/* the units' hashes into ``out`` (room for len / 2 + 1), their number returned */
static Py_ssize_t hash_units(const unsigned char *s, Py_ssize_t len, uint64_t seed,
                             uint64_t *out) {
    Py_ssize_t k = 0, start, size;
    Units u;
    units_init(&u, s, len);
    while (units_next(&u, &start, &size))
        out[k++] = hash_unit(s + start, size, seed);
    return k;
}

static int parse_seed(PyObject *obj, uint64_t *seed) {
    long long v = PyLong_AsLongLong(obj);
    if (v == -1 && PyErr_Occurred())
        return 0;
    *seed = (uint64_t)v;
    return 1;
}

static PyObject *unit_hashes(PyObject *self, PyObject *args) {
    Py_buffer data;
    PyObject *seed_obj;
    uint64_t seed;
    if (!PyArg_ParseTuple(args, "y*O", &data, &seed_obj))
        return NULL;
    if (!parse_seed(seed_obj, &seed)) {
        PyBuffer_Release(&data);
        return NULL;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, (data.len / 2 + 1) * 8);
    if (out == NULL) {
        PyBuffer_Release(&data);
        return NULL;
    }
    Py_ssize_t k = hash_units((const unsigned char *)data.buf, data.len, seed,
                              (uint64_t *)PyBytes_AS_STRING(out));
    PyBuffer_Release(&data);
    if (_PyBytes_Resize(&out, k * 8) < 0)
        return NULL;
    return out;
}

static PyObject *analyse(PyObject *self, PyObject *args) {
    Py_buffer data;
    PyObject *seed_obj;
    uint64_t seed;
    if (!PyArg_ParseTuple(args, "y*O", &data, &seed_obj))
        return NULL;
    if (!parse_seed(seed_obj, &seed)) {
        PyBuffer_Release(&data);
        return NULL;
    }
    Py_ssize_t room = data.len / 2 + 1;
    uint64_t *work = PyMem_Malloc((size_t)room * 2 * sizeof(uint64_t));
    if (work == NULL) {
        PyBuffer_Release(&data);
        return PyErr_NoMemory();
    }
    uint64_t *u = work, *h = work + room;
    Py_ssize_t n = hash_units((const unsigned char *)data.buf, data.len, seed, u);
    PyBuffer_Release(&data);
    /* the exact-duplicate key: the sequence of unit hashes, folded */
    uint64_t key = (uint64_t)n * P2;
    for (Py_ssize_t i = 0; i < n; i++)
        key = (key ^ u[i]) * P1 + P2;
    key = mix(key ^ seed);
    /* shingles: the polynomial of 3 consecutive units (of all of them below 3), mixed */
    Py_ssize_t m = 0;
    if (n >= 3) {
        for (Py_ssize_t i = 0; i + 2 < n; i++)
            h[i] = mix(u[i] * P1 + u[i + 1] * P2 + u[i + 2]);
        m = n - 2;
    } else if (n > 0) {
        uint64_t v = 0;
        for (Py_ssize_t i = 0; i < n; i++)
            v = v * P1 + u[i];
        h[0] = mix(v);
        m = 1;
    }
    uint64_t sig[BINS];
    for (int b = 0; b < BINS; b++)
        sig[b] = EMPTY;
    for (Py_ssize_t i = 0; i < m; i++) { /* each bin's smallest hash */
        int b = (int)(h[i] >> BIN_SHIFT);
        uint64_t v = h[i] & VALUE_MASK;
        if (v < sig[b])
            sig[b] = v;
    }
    Py_ssize_t d = m; /* (the shingles as made: minhash.jaccard takes their set) */
    PyObject *result = Py_BuildValue("(y#y#y#L)", (const char *)u, n * 8, (const char *)h,
                                     d * 8, (const char *)sig, (Py_ssize_t)sizeof(sig),
                                     (long long)key);
    PyMem_Free(work);
    return result;
}

/* query terms: their UTF-8 bytes, and which (first byte, length up to 31) some has */
typedef struct {
    Py_ssize_t t;
    const char **tp;
    Py_ssize_t *tl;
    Py_ssize_t *counts;
    unsigned char first[256][32];
} Terms;

static void terms_free(Terms *q) {
    PyMem_Free(q->tp);
    PyMem_Free(q->tl);
    PyMem_Free(q->counts);
}

static int terms_init(Terms *q, PyObject *encoded) { /* a tuple of distinct bytes */
    Py_ssize_t t = PyTuple_GET_SIZE(encoded);
    q->t = t;
    q->tp = PyMem_Malloc((size_t)(t + 1) * sizeof(char *));
    q->tl = PyMem_Malloc((size_t)(t + 1) * sizeof(Py_ssize_t));
    q->counts = PyMem_Calloc((size_t)t + 1, sizeof(Py_ssize_t));
    memset(q->first, 0, sizeof(q->first));
    if (q->tp == NULL || q->tl == NULL || q->counts == NULL) {
        terms_free(q);
        PyErr_NoMemory();
        return 0;
    }
    for (Py_ssize_t j = 0; j < t; j++) {
        PyObject *e = PyTuple_GET_ITEM(encoded, j);
        if (!PyBytes_Check(e)) {
            terms_free(q);
            PyErr_SetString(PyExc_TypeError, "terms must be bytes");
            return 0;
        }
        q->tp[j] = PyBytes_AS_STRING(e);
        q->tl[j] = PyBytes_GET_SIZE(e);
        if (q->tl[j] > 0)
            q->first[(unsigned char)q->tp[j][0]][q->tl[j] < 31 ? q->tl[j] : 31] = 1;
    }
    return 1;
}

/* the number of units of ``s`` (units separated by spaces), and each term's
 * occurrences among them into ``q->counts`` */
static Py_ssize_t count_terms(Terms *q, const unsigned char *s, Py_ssize_t len) {
    memset(q->counts, 0, (size_t)(q->t + 1) * sizeof(Py_ssize_t));
    Py_ssize_t units = 0, start, size;
    Units u;
    units_init(&u, s, len);
    while (units_next(&u, &start, &size)) {
        units++;
        if (!q->first[s[start]][size < 31 ? size : 31])
            continue;
        for (Py_ssize_t j = 0; j < q->t; j++)
            if (q->tl[j] == size && memcmp(q->tp[j], s + start, (size_t)size) == 0) {
                q->counts[j]++;
                break; /* (the terms are distinct) */
            }
    }
    return units;
}

/* text.unit_bytes' table for ASCII text: lower case; punctuation and whitespace to
 * spaces; the rest (control characters too) kept (filled when the module loads) */
static unsigned char ascii_units[128];

static void fill_ascii_units(void) {
    for (int c = 0; c < 128; c++) {
        if (c >= 'A' && c <= 'Z')
            ascii_units[c] = (unsigned char)(c + 32);
        else if ((c >= 9 && c <= 13) || (c >= 28 && c <= 47) || (c >= 58 && c <= 64) ||
                 (c >= 91 && c <= 96) || (c >= 123 && c <= 126))
            ascii_units[c] = ' ';
        else
            ascii_units[c] = (unsigned char)c;
    }
}

/* the same for the ASCII characters of a text holding others: lower case; every
 * character not a letter or digit (control characters too) to a space */
static unsigned char alnum_units[128];

static void fill_alnum_units(void) {
    for (int c = 0; c < 128; c++)
        alnum_units[c] = (c >= 'A' && c <= 'Z') ? (unsigned char)(c + 32)
                         : ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z')) ? (unsigned char)c
                                                                              : ' ';
}

static inline int is_cjk(Py_UCS4 c) { /* text._CJK */
    return (c >= 0x3040 && c <= 0x30ff) || (c >= 0x3400 && c <= 0x4dbf) ||
           (c >= 0x4e00 && c <= 0x9fff) || (c >= 0xf900 && c <= 0xfaff);
}

/* the units of a text holding a non-ASCII character (a new reference): each
 * alphanumeric character (str.isalnum) lower-cased as UTF-8, each other one as a
 * space; None when it holds a Chinese or Japanese character. ``lowered``: ``low`` is
 * lower-cased already; else only its ASCII letters are lower-cased here, and False is
 * answered for a text with another character that ``str.lower`` changes (to its lower
 * case, or, for U+03A3 at a word's end and U+0130, otherwise): lower-case it first. */
static PyObject *non_ascii_units(PyObject *low, int lowered) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(low);
    int kind = PyUnicode_KIND(low);
    const void *data = PyUnicode_DATA(low);
    PyObject *out = PyBytes_FromStringAndSize(NULL, n * 4 + 1);
    if (out == NULL)
        return NULL;
    unsigned char *o = (unsigned char *)PyBytes_AS_STRING(out);
    Py_ssize_t k = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c < 128) {
            o[k++] = alnum_units[c];
        } else if (!lowered && (Py_UNICODE_TOLOWER(c) != c || c == 0x3a3)) {
            Py_DECREF(out);
            Py_RETURN_FALSE;
        } else if (is_cjk(c)) {
            Py_DECREF(out);
            Py_RETURN_NONE;
        } else if (!Py_UNICODE_ISALNUM(c)) {
            o[k++] = ' ';
        } else if (c < 0x800) {
            o[k++] = (unsigned char)(0xc0 | (c >> 6));
            o[k++] = (unsigned char)(0x80 | (c & 0x3f));
        } else if (c < 0x10000) {
            o[k++] = (unsigned char)(0xe0 | (c >> 12));
            o[k++] = (unsigned char)(0x80 | ((c >> 6) & 0x3f));
            o[k++] = (unsigned char)(0x80 | (c & 0x3f));
        } else {
            o[k++] = (unsigned char)(0xf0 | (c >> 18));
            o[k++] = (unsigned char)(0x80 | ((c >> 12) & 0x3f));
            o[k++] = (unsigned char)(0x80 | ((c >> 6) & 0x3f));
            o[k++] = (unsigned char)(0x80 | (c & 0x3f));
        }
    }
    if (_PyBytes_Resize(&out, k) < 0)
        return NULL;
    return out;
}

static PyObject *lower_unit_bytes(PyObject *self, PyObject *args) {
    PyObject *low;
    int lowered;
    if (!PyArg_ParseTuple(args, "Up", &low, &lowered))
        return NULL;
    return non_ascii_units(low, lowered);
}

static PyObject *term_counts(PyObject *self, PyObject *args) {
    Py_buffer data;
    PyObject *encoded;
    if (!PyArg_ParseTuple(args, "y*O!", &data, &PyTuple_Type, &encoded))
        return NULL;
    Terms q;
    PyObject *result = NULL;
    if (terms_init(&q, encoded)) {
        Py_ssize_t units = count_terms(&q, (const unsigned char *)data.buf, data.len);
        PyObject *list = PyList_New(q.t);
        for (Py_ssize_t j = 0; list != NULL && j < q.t; j++) {
            PyObject *v = PyLong_FromSsize_t(q.counts[j]);
            if (v == NULL)
                Py_CLEAR(list);
            else
                PyList_SET_ITEM(list, j, v);
        }
        if (list != NULL)
            result = Py_BuildValue("(nN)", units, list);
        terms_free(&q);
    }
    PyBuffer_Release(&data);
    return result;
}

/* one text's (units, {term: occurrences}) or None (a new reference) */
static PyObject *text_counts(Terms *q, PyObject *text, PyObject *terms,
                             unsigned char **scratch, Py_ssize_t *room) {
    PyObject *made = NULL;
    const unsigned char *s;
    Py_ssize_t len;
    if (PyUnicode_IS_ASCII(text)) {
        len = PyUnicode_GET_LENGTH(text);
        if (len > *room) {
            PyMem_Free(*scratch);
            *scratch = PyMem_Malloc((size_t)len + 1);
            *room = *scratch != NULL ? len : 0;
            if (*scratch == NULL)
                return PyErr_NoMemory();
        }
        const Py_UCS1 *p = PyUnicode_1BYTE_DATA(text);
        for (Py_ssize_t i = 0; i < len; i++)
            (*scratch)[i] = ascii_units[p[i]];
        s = *scratch;
    } else {
        made = non_ascii_units(text, 0);
        if (made == Py_False) {
            Py_DECREF(made);
            PyObject *low = PyObject_CallMethod(text, "lower", NULL);
            if (low == NULL)
                return NULL;
            made = non_ascii_units(low, 1);
            Py_DECREF(low);
        }
        if (made == NULL || made == Py_None)
            return made;
        s = (const unsigned char *)PyBytes_AS_STRING(made);
        len = PyBytes_GET_SIZE(made);
    }
    Py_ssize_t units = count_terms(q, s, len);
    Py_XDECREF(made);
    PyObject *found = PyDict_New();
    if (found == NULL)
        return NULL;
    for (Py_ssize_t j = 0; j < q->t; j++) {
        if (!q->counts[j])
            continue;
        PyObject *v = PyLong_FromSsize_t(q->counts[j]);
        if (v == NULL || PyDict_SetItem(found, PyTuple_GET_ITEM(terms, j), v) < 0) {
            Py_XDECREF(v);
            Py_DECREF(found);
            return NULL;
        }
        Py_DECREF(v);
    }
    return Py_BuildValue("(nN)", units, found);
}

/* query_counts(texts, terms, encoded) -> list[(units, {term: n}) | None]: for each text
 * its number of units and the occurrences of the ``terms`` (distinct str, ``encoded``
 * their UTF-8) among them, those that occur; None for a Chinese or Japanese text */
static PyObject *query_counts(PyObject *self, PyObject *args) {
    PyObject *texts, *terms, *encoded;
    if (!PyArg_ParseTuple(args, "O!O!O!", &PyList_Type, &texts, &PyTuple_Type, &terms,
                          &PyTuple_Type, &encoded))
        return NULL;
    if (PyTuple_GET_SIZE(terms) != PyTuple_GET_SIZE(encoded)) {
        PyErr_SetString(PyExc_ValueError, "one encoding per term");
        return NULL;
    }
    Terms q;
    if (!terms_init(&q, encoded))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(texts), room = 0;
    unsigned char *scratch = NULL;
    PyObject *out = PyList_New(n);
    for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
        PyObject *text = PyList_GET_ITEM(texts, i);
        PyObject *item = NULL;
        if (!PyUnicode_Check(text))
            PyErr_SetString(PyExc_TypeError, "texts must be str");
        else
            item = text_counts(&q, text, terms, &scratch, &room);
        if (item == NULL)
            Py_CLEAR(out);
        else
            PyList_SET_ITEM(out, i, item);
    }
    PyMem_Free(scratch);
    terms_free(&q);
    return out;
}

/* near(sig, kept, floor) -> list[int]: the rows of ``kept`` (signatures end to end)
 * whose estimated similarity to ``sig`` (minhash.estimates: the share of equal minima
 * among the bins not empty in both) is ``floor`` or more. */
static PyObject *near(PyObject *self, PyObject *args) {
    Py_buffer sig, kept;
    double floor;
    if (!PyArg_ParseTuple(args, "y*y*d", &sig, &kept, &floor))
        return NULL;
    PyObject *out = NULL;
    if (sig.len != BINS * 8 || kept.len % (BINS * 8) != 0) {
        PyErr_SetString(PyExc_ValueError, "signatures are 128 64-bit minima");
        goto done;
    }
    out = PyList_New(0);
    if (out == NULL)
        goto done;
    const uint64_t *a = (const uint64_t *)sig.buf;
    Py_ssize_t rows = kept.len / (BINS * 8);
    for (Py_ssize_t r = 0; r < rows; r++) {
        const uint64_t *b = (const uint64_t *)kept.buf + r * BINS;
        long eq = 0, both_empty = 0;
        for (int k = 0; k < BINS; k++)
            if (a[k] == b[k]) {
                eq++;
                both_empty += a[k] == EMPTY;
            }
        long bins = BINS - both_empty;
        double est = (double)(eq - both_empty) / (double)(bins > 1 ? bins : 1);
        if (est >= floor) {
            PyObject *v = PyLong_FromSsize_t(r);
            if (v == NULL || PyList_Append(out, v) < 0) {
                Py_XDECREF(v);
                Py_CLEAR(out);
                goto done;
            }
            Py_DECREF(v);
        }
    }
done:
    PyBuffer_Release(&sig);
    PyBuffer_Release(&kept);
    return out;
}

static PyMethodDef methods[] = {
    {"unit_hashes", unit_hashes, METH_VARARGS, "Each unit's hash, as int64 bytes."},
    {"analyse", analyse, METH_VARARGS, "Unit hashes, shingles, signature and key."},
    {"term_counts", term_counts, METH_VARARGS, "Units and occurrences of some of them."},
    {"query_counts", query_counts, METH_VARARGS, "Units and query terms of texts."},
    {"lower_unit_bytes", lower_unit_bytes, METH_VARARGS, "A lower-cased text's units."},
    {"near", near, METH_VARARGS, "The kept signatures estimated near one."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_units", "Compiled kernels of context/unit_kernels.py.", -1,
    methods,
};

PyMODINIT_FUNC PyInit__units(void) {
    fill_ascii_units();
    fill_alnum_units();
    return PyModule_Create(&module);
}
