/* Compiled kernels over a text's units (context/unit_kernels.py holds their pure-Python
 * definitions and falls back to them when this extension was not built):
 *
 * - unit_hashes(data, seed): each unit's 64-bit hash, ``data`` the units as UTF-8
 *   separated by spaces (context/text.py, ``unit_bytes``);
 * - analyse(data, seed): those hashes, the distinct 3-unit shingle hashes sorted, the
 *   MinHash signature and the exact-duplicate key (context/minhash.py's definitions
 *   over these unit hashes);
 * - term_counts(data, terms): the number of units and how often each of ``terms``
 *   occurs among them.
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

/* the units' hashes into ``out`` (room for len / 2 + 1), their number returned */
static Py_ssize_t hash_units(const unsigned char *s, Py_ssize_t len, uint64_t seed,
                             uint64_t *out) {
    Py_ssize_t k = 0, i = 0;
    while (i < len) {
        while (i < len && s[i] == ' ')
            i++;
        if (i >= len)
            break;
        Py_ssize_t start = i;
        while (i < len && s[i] != ' ')
            i++;
        out[k++] = hash_unit(s + start, i - start, seed);
    }
    return k;
}

static void sift_down(uint64_t *a, Py_ssize_t root, Py_ssize_t n) {
    for (;;) {
        Py_ssize_t child = 2 * root + 1;
        if (child >= n)
            return;
        if (child + 1 < n && a[child + 1] > a[child])
            child++;
        if (a[root] >= a[child])
            return;
        uint64_t t = a[root];
        a[root] = a[child];
        a[child] = t;
        root = child;
    }
}

static void heap_sort(uint64_t *a, Py_ssize_t n) {
    for (Py_ssize_t i = n / 2 - 1; i >= 0; i--)
        sift_down(a, i, n);
    for (Py_ssize_t end = n - 1; end > 0; end--) {
        uint64_t t = a[0];
        a[0] = a[end];
        a[end] = t;
        sift_down(a, 0, end);
    }
}

static void sort_u64(uint64_t *a, Py_ssize_t n) { /* quicksort, insertion sort below 16 */
    while (n > 16) {
        uint64_t x = a[0], y = a[n / 2], z = a[n - 1];
        uint64_t pivot = x < y ? (y < z ? y : (x < z ? z : x)) : (x < z ? x : (y < z ? z : y));
        Py_ssize_t i = 0, j = n - 1;
        for (;;) {
            while (a[i] < pivot)
                i++;
            while (a[j] > pivot)
                j--;
            if (i >= j)
                break;
            uint64_t t = a[i];
            a[i] = a[j];
            a[j] = t;
            i++;
            j--;
        }
        /* a[0..j] <= pivot <= a[j+1..n-1]: recurse on the smaller side */
        Py_ssize_t left = j + 1, right = n - left;
        if (left <= 0 || right <= 0) { /* no progress (never with a median pivot) */
            heap_sort(a, n);
            return;
        }
        if (left < right) {
            sort_u64(a, left);
            a += left;
            n = right;
        } else {
            sort_u64(a + left, right);
            n = left;
        }
    }
    for (Py_ssize_t i = 1; i < n; i++) {
        uint64_t v = a[i];
        Py_ssize_t j = i;
        while (j > 0 && a[j - 1] > v) {
            a[j] = a[j - 1];
            j--;
        }
        a[j] = v;
    }
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
    sort_u64(h, m);
    Py_ssize_t d = 0;
    for (Py_ssize_t i = 0; i < m; i++)
        if (d == 0 || h[i] != h[d - 1])
            h[d++] = h[i];
    uint64_t sig[BINS];
    for (int b = 0; b < BINS; b++)
        sig[b] = EMPTY;
    for (Py_ssize_t i = 0; i < d; i++) { /* sorted: a bin's first is its smallest */
        int b = (int)(h[i] >> BIN_SHIFT);
        if (sig[b] == EMPTY)
            sig[b] = h[i] & VALUE_MASK;
    }
    PyObject *result = Py_BuildValue("(y#y#y#L)", (const char *)u, n * 8, (const char *)h,
                                     d * 8, (const char *)sig, (Py_ssize_t)sizeof(sig),
                                     (long long)key);
    PyMem_Free(work);
    return result;
}

static PyObject *term_counts(PyObject *self, PyObject *args) {
    Py_buffer data;
    PyObject *terms;
    if (!PyArg_ParseTuple(args, "y*O!", &data, &PyTuple_Type, &terms))
        return NULL;
    Py_ssize_t t = PyTuple_GET_SIZE(terms);
    const char **tp = PyMem_Malloc((size_t)(t + 1) * sizeof(char *));
    Py_ssize_t *tl = PyMem_Malloc((size_t)(t + 1) * sizeof(Py_ssize_t));
    Py_ssize_t *counts = PyMem_Calloc((size_t)t + 1, sizeof(Py_ssize_t));
    PyObject *result = NULL;
    if (tp == NULL || tl == NULL || counts == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    unsigned char first[256] = {0};
    for (Py_ssize_t j = 0; j < t; j++) {
        PyObject *e = PyTuple_GET_ITEM(terms, j);
        if (!PyBytes_Check(e)) {
            PyErr_SetString(PyExc_TypeError, "terms must be bytes");
            goto done;
        }
        tp[j] = PyBytes_AS_STRING(e);
        tl[j] = PyBytes_GET_SIZE(e);
        if (tl[j] > 0)
            first[(unsigned char)tp[j][0]] = 1;
    }
    const unsigned char *s = (const unsigned char *)data.buf;
    Py_ssize_t len = data.len, i = 0, units = 0;
    while (i < len) {
        while (i < len && s[i] == ' ')
            i++;
        if (i >= len)
            break;
        Py_ssize_t start = i;
        while (i < len && s[i] != ' ')
            i++;
        units++;
        if (!first[s[start]])
            continue;
        Py_ssize_t size = i - start;
        for (Py_ssize_t j = 0; j < t; j++)
            if (tl[j] == size && memcmp(tp[j], s + start, (size_t)size) == 0) {
                counts[j]++;
                break; /* (the terms are distinct) */
            }
    }
    PyObject *list = PyList_New(t);
    if (list == NULL)
        goto done;
    for (Py_ssize_t j = 0; j < t; j++) {
        PyObject *v = PyLong_FromSsize_t(counts[j]);
        if (v == NULL) {
            Py_DECREF(list);
            goto done;
        }
        PyList_SET_ITEM(list, j, v);
    }
    result = Py_BuildValue("(nN)", units, list);
done:
    PyMem_Free(tp);
    PyMem_Free(tl);
    PyMem_Free(counts);
    PyBuffer_Release(&data);
    return result;
}

static PyMethodDef methods[] = {
    {"unit_hashes", unit_hashes, METH_VARARGS, "Each unit's hash, as int64 bytes."},
    {"analyse", analyse, METH_VARARGS, "Unit hashes, shingles, signature and key."},
    {"term_counts", term_counts, METH_VARARGS, "Units and occurrences of some of them."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_units", "Compiled kernels of context/unit_kernels.py.", -1,
    methods,
};

PyMODINIT_FUNC PyInit__units(void) { return PyModule_Create(&module); }
