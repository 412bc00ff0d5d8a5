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
    /* (branch-free transitions: a word boundary every few characters mispredicts) */
    Py_ssize_t limit = above >= 0 ? above : PY_SSIZE_T_MAX;
    if (kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *p = (const Py_UCS1 *)data;
        for (Py_ssize_t i = 0; i < n; i++) {
            int ws = is_ws(p[i]);
            runs += in_ws & !ws;
            if (runs > limit)
                return PyLong_FromSsize_t(runs);
            in_ws = ws;
        }
    } else {
        for (Py_ssize_t i = 0; i < n; i++) {
            int ws = is_ws(PyUnicode_READ(kind, data, i));
            runs += in_ws & !ws;
            if (runs > limit)
                return PyLong_FromSsize_t(runs);
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

/* ``ascii_class`` of each ASCII character, as a table */
#define S SPACE
#define L LETTER
#define D DIGIT
#define O OTHER
static const unsigned char ASCII_CLASSES[128] = {
    O, O, O, O, O, O, O, O, O, S, S, S, S, S, O, O,
    O, O, O, O, O, O, O, O, O, O, O, O, O, O, O, O,
    S, O, O, O, O, O, O, O, O, O, O, O, O, O, O, O,
    D, D, D, D, D, D, D, D, D, D, O, O, O, O, O, O,
    O, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L,
    L, L, L, L, L, L, L, L, L, L, L, O, O, O, O, O,
    O, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L,
    L, L, L, L, L, L, L, L, L, L, L, O, O, O, O, O,
};
#undef S
#undef L
#undef D
#undef O

/* ``runs_of`` of ASCII text, without branches on the classes (a run boundary every few
 * characters mispredicts): the same counts. */
static Py_ssize_t ascii_runs_of(const Py_UCS1 *p, Py_ssize_t n, int digits_one,
                                Py_ssize_t limit) {
    Py_ssize_t runs = 0, led = 0;
    int prev = SPACE, prev_single = 0; /* whether the run before this one is one long */
    int digit_extra = digits_one ? 1 : 0;
    /* (over ``limit`` looked at every block: the count never falls as the text goes
     * on, a lead coming with its letter run) */
    for (Py_ssize_t start = 0; start < n; start += 256) {
        Py_ssize_t end = n - start > 256 ? start + 256 : n;
        for (Py_ssize_t i = start; i < end; i++) {
            int c = ASCII_CLASSES[p[i] & 127];
            int changed = c != prev;
            runs += changed ? (c != SPACE) : ((c == DIGIT) & digit_extra);
            led += changed & (c == LETTER) & (prev == OTHER) & prev_single;
            /* (a run is one long when the character after its first changes class) */
            prev_single = changed;
            prev = c;
        }
        if (runs - led > limit)
            return runs - led;
    }
    return runs - led;
}

/* the piece floor of ``text``, each character's class from ``ascii_class`` or, for a
 * non-ASCII one, ``seen`` (a dict: the character -> "a", "0", " ", "!", or "" when
 * unknown): the runs of one class, less the whitespace ones, plus each digit past a
 * run's first where every digit is a piece, less each lone other character right
 * before a letter. Sets ``*missing`` to a character ``seen`` lacks (a new reference)
 * and returns -1; returns -2 for a character of no known class; -3 on an error. */
static Py_ssize_t runs_of(PyObject *text, PyObject *seen, int digits_one,
                          Py_ssize_t above, PyObject **missing) {
    Py_ssize_t limit = above >= 0 ? above : PY_SSIZE_T_MAX;
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    if (PyUnicode_IS_ASCII(text))
        return ascii_runs_of((const Py_UCS1 *)data, n, digits_one, limit);
    Py_ssize_t runs = 0, led = 0;
    int prev = SPACE, prev_single = 0; /* (the text starts after a space) */
    int digit_extra = digits_one ? 1 : 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 ch = PyUnicode_READ(kind, data, i);
        int c;
        if (ch < 128) {
            c = ASCII_CLASSES[ch];
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
        int changed = c != prev; /* (as in ascii_runs_of) */
        runs += changed ? (c != SPACE) : ((c == DIGIT) & digit_extra);
        led += changed & (c == LETTER) & (prev == OTHER) & prev_single;
        prev_single = changed;
        prev = c;
        if (runs - led > limit)
            return runs - led;
    }
    return runs - led;
}

/* piece_runs(text, digits_one, above=-1) -> int: PieceFloor.tokens of ASCII ``text``
 * (classes already mapped); with ``above`` >= 0 the count may stop as soon as it is
 * over ``above`` (what is counted by then is a floor too). */
static PyObject *piece_runs(PyObject *self, PyObject *args) {
    PyObject *text;
    int digits_one;
    Py_ssize_t above = -1;
    if (!PyArg_ParseTuple(args, "Up|n", &text, &digits_one, &above))
        return NULL;
    if (!PyUnicode_IS_ASCII(text)) {
        PyErr_SetString(PyExc_ValueError, "piece_runs reads ASCII text");
        return NULL;
    }
    PyObject *missing = NULL;
    Py_ssize_t got = runs_of(text, NULL, digits_one, above, &missing);
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
    Py_ssize_t got = runs_of(text, seen, digits_one, -1, &missing);
    if (got == -1)
        return missing;
    if (got == -2)
        return PyLong_FromLong(0);
    return got >= 0 ? PyLong_FromSsize_t(got) : NULL;
}

static PyMethodDef methods[] = {
    {"runs_floor", runs_floor, METH_VARARGS, "The runs of non-whitespace (a token floor)."},
    {"later_sum", later_sum, METH_VARARGS, "The memoised counts of a text's later words."},
    {"piece_runs", piece_runs, METH_VARARGS,
     "The piece floor of ASCII text (may stop once over ``above``)."},
    {"seen_piece_runs", seen_piece_runs, METH_VARARGS, "The piece floor of any text."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_words", "Compiled kernels of tokens/word_kernels.py.", -1,
    methods,
};

PyMODINIT_FUNC PyInit__words(void) { return PyModule_Create(&module); }
