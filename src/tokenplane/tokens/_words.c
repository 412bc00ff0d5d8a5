/* Compiled kernels of the word memo (tokens/word_counts.py), of the runs floor
 * (tokens/space_splits.py) and of the piece floor (tokens/piece_floor.py); tokens/word_kernels.py holds their pure-Python definitions,
 * which these equal exactly (tests/tokens/test_word_kernels.py), and falls back to them
 * when this extension was not built. Both hold the GIL throughout. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* whitespace to every tokenizer: ASCII " \t\n\v\f\r" (space_splits._RUNS) */
static inline int is_ws(Py_UCS4 c) {
    return c == 32 || (c >= 9 && c <= 13);
}

/* runs_floor(text, above) -> int: the runs of non-whitespace of ``text``; with
 * ``above`` >= 0 the count may stop as soon as it is over ``above``. */
static PyObject *runs_floor(PyObject *self, PyObject *args) {
    PyObject *text;
    Py_ssize_t above;
    if (!PyArg_ParseTuple(args, "Un", &text, &above))
        return NULL;
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t runs = 0;
    int in_ws = 1;
    if (kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *p = (const Py_UCS1 *)data;
        for (Py_ssize_t i = 0; i < n; i++) {
            int ws = is_ws(p[i]);
            if (in_ws && !ws) {
                runs++;
                if (above >= 0 && runs > above)
                    return PyLong_FromSsize_t(runs);
            }
            in_ws = ws;
        }
    } else {
        for (Py_ssize_t i = 0; i < n; i++) {
            int ws = is_ws(PyUnicode_READ(kind, data, i));
            if (in_ws && !ws) {
                runs++;
                if (above >= 0 && runs > above)
                    return PyLong_FromSsize_t(runs);
            }
            in_ws = ws;
        }
    }
    return PyLong_FromSsize_t(runs);
}

/* the count of ``piece`` in ``memo`` (borrowed), or NULL with no error when absent */
static PyObject *look_up(PyObject *memo, PyObject *text, Py_ssize_t start, Py_ssize_t end) {
    PyObject *piece = PyUnicode_Substring(text, start, end);
    if (piece == NULL)
        return NULL;
    PyObject *found = PyDict_GetItemWithError(memo, piece);
    Py_DECREF(piece);
    return found;
}

/* later_sum(text, rest, last) -> int | None: the sum of the counts of
 * ``text.split(" ")[1:]``, the pieces before the last one from ``rest``, the last one
 * from ``rest`` else ``last``; None when one is missing; 0 with no space. */
static PyObject *later_sum(PyObject *self, PyObject *args) {
    PyObject *text, *rest, *last;
    if (!PyArg_ParseTuple(args, "UO!O!", &text, &PyDict_Type, &rest, &PyDict_Type, &last))
        return NULL;
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    Py_ssize_t at = PyUnicode_FindChar(text, ' ', 0, n, 1);
    if (at == -2)
        return NULL;
    long long sum = 0;
    while (at >= 0) {
        Py_ssize_t start = at + 1;
        Py_ssize_t next = start < n ? PyUnicode_FindChar(text, ' ', start, n, 1) : -1;
        if (next == -2)
            return NULL;
        Py_ssize_t end = next >= 0 ? next : n;
        PyObject *found = look_up(rest, text, start, end);
        if (found == NULL && next < 0 && !PyErr_Occurred())
            found = look_up(last, text, start, end);
        if (found == NULL) {
            if (PyErr_Occurred())
                return NULL;
            Py_RETURN_NONE;
        }
        long long v = PyLong_AsLongLong(found);
        if (v == -1 && PyErr_Occurred())
            return NULL;
        sum += v;
        at = next;
    }
    return PyLong_FromLongLong(sum);
}

/* piece_floor.PieceFloor's classes of ASCII characters */
enum { SPACE, LETTER, DIGIT, OTHER };

static inline int ascii_class(Py_UCS4 c) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
        return LETTER;
    if (c >= '0' && c <= '9')
        return DIGIT;
    if (c == ' ' || (c >= 9 && c <= 13))
        return SPACE;
    return OTHER;
}

/* the piece floor of ``text``, each character's class from ``ascii_class`` or, for a
 * non-ASCII one, ``seen`` (a dict: the character -> "a", "0", " ", "!", or "" when
 * unknown): the runs of one class, less the whitespace ones, plus each digit past a
 * run's first where every digit is a piece, less each lone other character right
 * before a letter. Sets ``*missing`` to a character ``seen`` lacks (a new reference)
 * and returns -1; returns -2 for a character of no known class; -3 on an error. */
static Py_ssize_t runs_of(PyObject *text, PyObject *seen, int digits_one,
                          PyObject **missing) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t runs = 0, led = 0, run_len = 0;
    int prev = SPACE; /* (the text starts after a space) */
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 ch = PyUnicode_READ(kind, data, i);
        int c;
        if (ch < 128) {
            c = ascii_class(ch);
        } else {
            if (seen == NULL)
                return -3;
            PyObject *key = PyUnicode_FromOrdinal((int)ch);
            if (key == NULL)
                return -3;
            PyObject *found = PyDict_GetItemWithError(seen, key);
            if (found == NULL) {
                if (PyErr_Occurred()) {
                    Py_DECREF(key);
                    return -3;
                }
                *missing = key;
                return -1;
            }
            Py_DECREF(key);
            if (!PyUnicode_Check(found) || PyUnicode_GET_LENGTH(found) != 1)
                return -2;
            c = ascii_class(PyUnicode_READ_CHAR(found, 0));
        }
        if (c != prev) {
            if (c != SPACE)
                runs++;
            if (c == LETTER && prev == OTHER && run_len == 1)
                led++;
            prev = c;
            run_len = 1;
        } else {
            run_len++;
            if (c == DIGIT && digits_one)
                runs++;
        }
    }
    return runs - led;
}

/* piece_runs(text, digits_one) -> int: PieceFloor.tokens of ASCII ``text`` (classes
 * already mapped). */
static PyObject *piece_runs(PyObject *self, PyObject *args) {
    PyObject *text;
    int digits_one;
    if (!PyArg_ParseTuple(args, "Up", &text, &digits_one))
        return NULL;
    if (!PyUnicode_IS_ASCII(text)) {
        PyErr_SetString(PyExc_ValueError, "piece_runs reads ASCII text");
        return NULL;
    }
    PyObject *missing = NULL;
    Py_ssize_t got = runs_of(text, NULL, digits_one, &missing);
    return got >= 0 ? PyLong_FromSsize_t(got) : NULL;
}

/* seen_piece_runs(text, seen, digits_one) -> int | str: the same of any text, its
 * non-ASCII characters' classes read from ``seen``: 0 for one of no known class (""),
 * a character ``seen`` lacks (to be classified, then asked again). */
static PyObject *seen_piece_runs(PyObject *self, PyObject *args) {
    PyObject *text, *seen;
    int digits_one;
    if (!PyArg_ParseTuple(args, "UO!p", &text, &PyDict_Type, &seen, &digits_one))
        return NULL;
    PyObject *missing = NULL;
    Py_ssize_t got = runs_of(text, seen, digits_one, &missing);
    if (got == -1)
        return missing;
    if (got == -2)
        return PyLong_FromLong(0);
    return got >= 0 ? PyLong_FromSsize_t(got) : NULL;
}

static PyMethodDef methods[] = {
    {"runs_floor", runs_floor, METH_VARARGS, "The runs of non-whitespace (a token floor)."},
    {"later_sum", later_sum, METH_VARARGS, "The memoised counts of a text's later words."},
    {"piece_runs", piece_runs, METH_VARARGS, "The piece floor of ASCII text."},
    {"seen_piece_runs", seen_piece_runs, METH_VARARGS, "The piece floor of any text."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_words", "Compiled kernels of tokens/word_kernels.py.", -1,
    methods,
};

PyMODINIT_FUNC PyInit__words(void) { return PyModule_Create(&module); }
