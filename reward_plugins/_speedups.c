/* Compiled twins of two pure-Python hot paths of reward_plugins.
 *
 * scan_tags(text, tag, first) -> (content, opening, closing)
 *     reward_plugins.extract.scan_tags_python: counts "<tag>" and "</tag>" and replays the
 *     lazy regex "<tag>(.*?)</tag>" (DOTALL) on the sequence of tags. content is the
 *     str.strip()-ped content of the last (first if `first`) match, None without a match.
 *
 * normalize_squad(text, spaced) -> str
 *     SQuAD v1.1 answer normalization, as reward_plugins.text.normalize_squad computes it:
 *     str.lower(), delete (spaced: replace by a space) the 32 ASCII punctuation characters,
 *     replace the whole words a/an/the by a space (word characters as in the `re` module's
 *     Unicode \b), then " ".join(text.split()).
 *
 * The Python functions are the reference; tests compare the two on generated inputs. Each
 * function reads the text once, so its time is linear in the text's length.
 *
 * The C code reads the characters of exact str objects only, and takes the flag only as a bool.
 * Any other argument (a str subclass, whose methods such as lower(), rfind() or __getitem__ the
 * reference calls and a subclass may override; a non-str; a flag that is not a bool) is passed
 * to the Python reference, so that the result, or the exception, is the reference's.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

static int
is_ascii_punctuation(Py_UCS4 c)
{
    return c < 128 && c > ' ' && c != 127 && !Py_UNICODE_ISALNUM(c);
}

/* reward_plugins.<module_name>.<function_name>(*args): the Python reference, for the arguments
 * that the C code does not read itself. */
static PyObject *
call_reference(const char *module_name, const char *function_name, PyObject *const *args,
               Py_ssize_t nargs)
{
    PyObject *module = PyImport_ImportModule(module_name);
    if (module == NULL) {
        return NULL;
    }
    PyObject *function = PyObject_GetAttrString(module, function_name);
    Py_DECREF(module);
    if (function == NULL) {
        return NULL;
    }
    PyObject *result = PyObject_Vectorcall(function, args, (size_t)nargs, NULL);
    Py_DECREF(function);
    return result;
}

/* \w of the `re` module on a str pattern. */
static int
is_word(Py_UCS4 c)
{
    return Py_UNICODE_ISALNUM(c) || c == '_';
}

/* Index of the next '<' at or after i, or -1. */
static Py_ssize_t
find_lt(int kind, const void *data, Py_ssize_t i, Py_ssize_t n)
{
    if (kind == PyUnicode_1BYTE_KIND) {
        const char *p = memchr((const char *)data + i, '<', (size_t)(n - i));
        return p == NULL ? -1 : p - (const char *)data;
    }
    for (; i < n; i++) {
        if (PyUnicode_READ(kind, data, i) == '<') {
            return i;
        }
    }
    return -1;
}

/* True if text[i:] starts with tag + ">". */
static int
tag_at(int kind, const void *data, Py_ssize_t n, Py_ssize_t i,
       int tag_kind, const void *tag_data, Py_ssize_t tag_length)
{
    if (i + tag_length >= n) {
        return 0;
    }
    for (Py_ssize_t k = 0; k < tag_length; k++) {
        if (PyUnicode_READ(kind, data, i + k) != PyUnicode_READ(tag_kind, tag_data, k)) {
            return 0;
        }
    }
    return PyUnicode_READ(kind, data, i + tag_length) == '>';
}

static PyObject *
scan_tags(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "scan_tags() takes 3 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *text = args[0], *tag = args[1];
    if (!PyUnicode_CheckExact(text) || !PyUnicode_CheckExact(tag) || !PyBool_Check(args[2])) {
        return call_reference("reward_plugins.extract", "scan_tags_python", args, nargs);
    }
    const int first = args[2] == Py_True;
    const int kind = PyUnicode_KIND(text), tag_kind = PyUnicode_KIND(tag);
    const void *data = PyUnicode_DATA(text), *tag_data = PyUnicode_DATA(tag);
    const Py_ssize_t n = PyUnicode_GET_LENGTH(text), tag_length = PyUnicode_GET_LENGTH(tag);
    Py_ssize_t opening = 0, closing = 0, pending = -1, start = -1, end = -1;
    int chosen = 0; /* `first` and a match has been found: later tags are only counted */

    Py_ssize_t i = 0;
    while (i < n && (i = find_lt(kind, data, i, n)) >= 0) {
        /* As the regex "<(/?)tag>": a closer if "/tag>" follows, else an opener if "tag>". */
        if (i + 1 < n && PyUnicode_READ(kind, data, i + 1) == '/'
            && tag_at(kind, data, n, i + 2, tag_kind, tag_data, tag_length)) {
            closing++;
            if (pending >= 0 && !chosen) {
                start = pending;
                end = i;
                pending = -1;
                chosen = first;
            }
            i += tag_length + 3;
        }
        else if (tag_at(kind, data, n, i + 1, tag_kind, tag_data, tag_length)) {
            opening++;
            i += tag_length + 2;
            if (pending < 0) {
                pending = i;
            }
        }
        else {
            i++;
        }
    }
    if (start < 0) {
        return Py_BuildValue("Onn", Py_None, opening, closing);
    }
    while (start < end && Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, start))) {
        start++;
    }
    while (end > start && Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, end - 1))) {
        end--;
    }
    PyObject *content = PyUnicode_Substring(text, start, end);
    if (content == NULL) {
        return NULL;
    }
    return Py_BuildValue("Nnn", content, opening, closing);
}

/* Length of the article a/an/the that starts at buffer[i] and ends before a non-word
 * character (or the end), else 0. The caller checks the character before i. */
static Py_ssize_t
article_at(const Py_UCS4 *buffer, Py_ssize_t i, Py_ssize_t n)
{
    Py_ssize_t length = 0;
    if (buffer[i] == 'a') {
        length = (i + 1 < n && buffer[i + 1] == 'n' && (i + 2 == n || !is_word(buffer[i + 2])))
                     ? 2
                     : 1;
    }
    else if (i + 2 < n && buffer[i] == 't' && buffer[i + 1] == 'h' && buffer[i + 2] == 'e') {
        length = 3;
    }
    if (length == 0 || (i + length < n && is_word(buffer[i + length]))) {
        return 0;
    }
    return length;
}

#define STACK_CHARS 256

static PyObject *
normalize_squad(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "normalize_squad() takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *text = args[0];
    if (!PyUnicode_CheckExact(text) || !PyBool_Check(args[1])) {
        return call_reference("reward_plugins.text.normalize", "normalize_squad_python", args,
                              nargs);
    }
    const int spaced = args[1] == Py_True;
    PyObject *lower = PyObject_CallMethod(text, "lower", NULL);
    if (lower == NULL) {
        return NULL;
    }
    if (!PyUnicode_CheckExact(lower)) { /* str.lower() of an exact str returns one: never taken */
        Py_DECREF(lower);
        return call_reference("reward_plugins.text.normalize", "normalize_squad_python", args,
                              nargs);
    }
    const int kind = PyUnicode_KIND(lower);
    const void *data = PyUnicode_DATA(lower);
    const Py_ssize_t n = PyUnicode_GET_LENGTH(lower);

    /* Two buffers of n characters: the text without punctuation, then the result. */
    Py_UCS4 stack[2 * STACK_CHARS];
    Py_UCS4 *kept = stack;
    if (n > STACK_CHARS) {
        kept = PyMem_New(Py_UCS4, 2 * (size_t)n);
        if (kept == NULL) {
            Py_DECREF(lower);
            return PyErr_NoMemory();
        }
    }
    Py_UCS4 *out = kept + (n > STACK_CHARS ? n : STACK_CHARS);

    Py_ssize_t length = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (!is_ascii_punctuation(c)) {
            kept[length++] = c;
        }
        else if (spaced) {
            kept[length++] = ' ';
        }
    }
    Py_DECREF(lower);

    /* Articles become a space; runs of whitespace become one space between words. */
    Py_ssize_t written = 0;
    int space_pending = 0;
    for (Py_ssize_t i = 0; i < length;) {
        Py_UCS4 c = kept[i];
        Py_ssize_t article = 0;
        if (!Py_UNICODE_ISSPACE(c) && (i == 0 || !is_word(kept[i - 1]))) {
            article = article_at(kept, i, length);
        }
        if (Py_UNICODE_ISSPACE(c) || article) {
            space_pending = written > 0;
            i += article ? article : 1;
            continue;
        }
        if (space_pending) {
            out[written++] = ' ';
            space_pending = 0;
        }
        out[written++] = c;
        i++;
    }
    PyObject *result = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, out, written);
    if (kept != stack) {
        PyMem_Free(kept);
    }
    return result;
}

static PyMethodDef methods[] = {
    {"scan_tags", (PyCFunction)(void (*)(void))scan_tags, METH_FASTCALL,
     "scan_tags(text, tag, first) -> (content, opening, closing)"},
    {"normalize_squad", (PyCFunction)(void (*)(void))normalize_squad, METH_FASTCALL,
     "normalize_squad(text, spaced) -> SQuAD v1.1 normalized text"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_definition = {
    PyModuleDef_HEAD_INIT, "reward_plugins._speedups",
    "Compiled twins of the tag scan and the SQuAD normalizer.", -1, methods,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    return PyModule_Create(&module_definition);
}
