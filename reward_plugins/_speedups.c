/* Compiled twins of three pure-Python hot paths of reward_plugins.
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
 * ngram_matches(predicted, gold, max_order) -> (p1, g1, m1, p2, g2, m2, ...)
 *     reward_plugins.metrics.ngrams.ngram_matches_python: for n = 1 .. max_order, the number of
 *     n-grams of each sequence and their clipped matches (the sum over distinct n-grams of the
 *     smaller count). The items are the characters of two str, or the tokens of two lists of
 *     str. Each item gets a dense number from an open-addressing hash table (a str token: keyed
 *     by its hash, every hit checked by content); the n-gram of order n at i is then numbered
 *     as the pair (number of the (n-1)-gram at i, number of item i + n - 1), which identifies
 *     it exactly, in one more pass over a table emptied by a new generation stamp. Counting the
 *     prediction's n-grams per number and letting each gold n-gram take one gives the clipped
 *     matches. Time and memory are linear in the two lengths per order; after an order without
 *     a match, the higher orders have none either and are not counted.
 *
 * The Python functions are the reference; tests compare the two on generated inputs. Each
 * function reads the text once, so its time is linear in the text's length.
 *
 * The C code reads the characters of exact str objects only, and takes the flag only as a bool.
 * Any other argument (a str subclass, whose methods such as lower(), rfind() or __getitem__ the
 * reference calls and a subclass may override; a non-str; a flag that is not a bool) is passed
 * to the Python reference, so that the result, or the exception, is the reference's. So are, for
 * ngram_matches, sequences that are not two exact str or two exact lists of exact str (a list
 * item that is a str subclass may define its own __eq__ and __hash__), and a max_order that is
 * not an exact int in 0 .. PY_SSIZE_T_MAX / 3.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
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

/* ------------------------------------------------------------------ n-gram matches */

/* A slot of an open-addressing hash table. A slot is in use in the current generation when its
 * stamp equals the table's; moving to the next generation empties the table without clearing. */
typedef struct {
    uint64_t key;
    uint32_t id;
    uint32_t stamp;
} Slot;

typedef struct {
    Slot *slots;
    size_t mask;     /* capacity - 1, the capacity a power of two at least twice the keys */
    uint32_t stamp;  /* the generation: 1 for the items, n for the n-grams of order n >= 2 */
    uint32_t size;   /* keys in this generation, which are numbered 0 .. size - 1 */
} Table;

/* The finalizer of splitmix64: every bit of the key moves the slot. */
static inline size_t
slot_of(uint64_t key, size_t mask)
{
    key ^= key >> 30;
    key *= UINT64_C(0xbf58476d1ce4e5b9);
    key ^= key >> 27;
    key *= UINT64_C(0x94d049bb133111eb);
    key ^= key >> 31;
    return (size_t)key & mask;
}

/* The number of `key` in this generation; a new key gets the next number. */
static inline uint32_t
number_of(Table *table, uint64_t key)
{
    for (size_t i = slot_of(key, table->mask);; i = (i + 1) & table->mask) {
        Slot *slot = &table->slots[i];
        if (slot->stamp != table->stamp) {
            slot->stamp = table->stamp;
            slot->key = key;
            slot->id = table->size;
            return table->size++;
        }
        if (slot->key == key) {
            return slot->id;
        }
    }
}

/* Equal contents of two exact, ready str objects (whose kind is then the narrowest). */
static inline int
same_text(PyObject *a, PyObject *b)
{
    if (a == b) {
        return 1;
    }
    const Py_ssize_t length = PyUnicode_GET_LENGTH(a);
    const int kind = PyUnicode_KIND(a);
    return length == PyUnicode_GET_LENGTH(b) && kind == PyUnicode_KIND(b)
           && memcmp(PyUnicode_DATA(a), PyUnicode_DATA(b), (size_t)length * (size_t)kind) == 0;
}

/* The number of `token` among the distinct tokens so far; `first[number]` is the first token
 * seen with that number. The table's keys are str hashes, each match checked by content. */
static inline uint32_t
number_of_token(Table *table, PyObject *token, Py_hash_t hash, PyObject **first)
{
    const uint64_t key = (uint64_t)hash;
    for (size_t i = slot_of(key, table->mask);; i = (i + 1) & table->mask) {
        Slot *slot = &table->slots[i];
        if (slot->stamp != table->stamp) {
            slot->stamp = table->stamp;
            slot->key = key;
            slot->id = table->size;
            first[table->size] = token;
            return table->size++;
        }
        if (slot->key == key && same_text(first[slot->id], token)) {
            return slot->id;
        }
    }
}

/* items[i] = the number of item i of `text` (numbers dense from 0, equal items equal numbers)
 * for the characters of an exact str. */
static void
number_characters(Table *table, PyObject *text, uint32_t *items)
{
    const int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    const Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    for (Py_ssize_t i = 0; i < n; i++) {
        items[i] = number_of(table, PyUnicode_READ(kind, data, i));
    }
}

/* The same for the items of an exact list. Returns 1 if every item is an exact str, 0 if one is
 * not (nothing else read), -1 with an exception set. No Python code runs here. */
static int
number_tokens(Table *table, PyObject *list, uint32_t *items, PyObject **first)
{
    const Py_ssize_t n = PyList_GET_SIZE(list);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *token = PyList_GET_ITEM(list, i);
        if (!PyUnicode_CheckExact(token)) {
            return 0;
        }
#if PY_VERSION_HEX < 0x030C0000
        if (PyUnicode_READY(token) < 0) {
            return -1;
        }
#endif
        const Py_hash_t hash = PyObject_Hash(token); /* cached in the str after the first call */
        if (hash == -1) {
            return -1;
        }
        items[i] = number_of_token(table, token, hash, first);
    }
    return 1;
}

/* Clipped matches of the n-grams of one order: counts[number] the occurrences in the prediction
 * not yet matched, each gold n-gram taking one while any is left (so min(count, gold count) per
 * distinct n-gram). counts has room for `distinct` numbers. */
static Py_ssize_t
clipped_matches(const uint32_t *predicted, Py_ssize_t predicted_count, const uint32_t *gold,
                Py_ssize_t gold_count, uint32_t *counts, uint32_t distinct)
{
    memset(counts, 0, (size_t)distinct * sizeof(uint32_t));
    for (Py_ssize_t i = 0; i < predicted_count; i++) {
        counts[predicted[i]]++;
    }
    Py_ssize_t matches = 0;
    for (Py_ssize_t i = 0; i < gold_count; i++) {
        if (counts[gold[i]]) {
            counts[gold[i]]--;
            matches++;
        }
    }
    return matches;
}

/* Number the n-grams of one more order, in place: grams[i] held the number of the n-gram of
 * order n - 1 at i; it becomes the number of the pair (that n-gram, the item at i + n - 1),
 * which identifies the n-gram of order n exactly. */
static void
extend_grams(Table *table, uint32_t *grams, const uint32_t *items, Py_ssize_t count,
             Py_ssize_t order)
{
    for (Py_ssize_t i = 0; i < count; i++) {
        grams[i] = number_of(table, (uint64_t)grams[i] << 32 | items[i + order - 1]);
    }
}

static int
set_count(PyObject *tuple, Py_ssize_t index, Py_ssize_t value)
{
    PyObject *number = PyLong_FromSsize_t(value);
    if (number == NULL) {
        return -1;
    }
    PyTuple_SET_ITEM(tuple, index, number);
    return 0;
}

#define STACK_WORDS 2048 /* 16 KiB: two texts of about 250 items together need no heap */

static PyObject *
ngram_matches(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "ngram_matches() takes 3 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *predicted = args[0], *gold = args[1];
    const int characters = PyUnicode_CheckExact(predicted) && PyUnicode_CheckExact(gold);
    const int tokens = PyList_CheckExact(predicted) && PyList_CheckExact(gold);
    Py_ssize_t max_order = -1;
    if (PyLong_CheckExact(args[2])) {
        max_order = PyLong_AsSsize_t(args[2]);
        if (max_order == -1 && PyErr_Occurred()) {
            PyErr_Clear(); /* too large for C: the reference says what happens */
        }
    }
    const Py_ssize_t predicted_length =
        characters ? PyUnicode_GET_LENGTH(predicted) : tokens ? PyList_GET_SIZE(predicted) : 0;
    const Py_ssize_t gold_length =
        characters ? PyUnicode_GET_LENGTH(gold) : tokens ? PyList_GET_SIZE(gold) : 0;
    if (!(characters || tokens) || max_order < 0 || max_order > PY_SSIZE_T_MAX / 3
        || predicted_length > INT32_MAX / 4 - gold_length) {
        return call_reference("reward_plugins.metrics.ngrams", "ngram_matches_python", args,
                              nargs);
    }
    const Py_ssize_t total = predicted_length + gold_length;
    size_t capacity = 16;
    while (capacity < 2 * (size_t)total) {
        capacity *= 2;
    }
    /* One block: the table, then per item its number, its n-gram's number and a count (uint32
     * each), then for tokens the first token of each number. */
    const size_t table_bytes = capacity * sizeof(Slot);
    const size_t items_bytes = 3 * (size_t)total * sizeof(uint32_t);
    const size_t bytes = table_bytes + (items_bytes + 7) / 8 * 8
                         + (tokens ? (size_t)total * sizeof(PyObject *) : 0);
    uint64_t stack[STACK_WORDS];
    void *block = stack;
    if (bytes > sizeof(stack)) {
        block = PyMem_Malloc(bytes);
        if (block == NULL) {
            return PyErr_NoMemory();
        }
    }
    Table table = {(Slot *)block, capacity - 1, 1, 0};
    memset(table.slots, 0, table_bytes);
    uint32_t *items = (uint32_t *)((char *)block + table_bytes);
    uint32_t *grams = items + total;
    uint32_t *counts = grams + total;
    PyObject *result = NULL;

    if (characters) {
        number_characters(&table, predicted, items);
        number_characters(&table, gold, items + predicted_length);
    }
    else {
        PyObject **first = (PyObject **)((char *)block + table_bytes + (items_bytes + 7) / 8 * 8);
        int read = number_tokens(&table, predicted, items, first);
        if (read == 1) {
            read = number_tokens(&table, gold, items + predicted_length, first);
        }
        if (read == 0) { /* an item that is not an exact str */
            result = call_reference("reward_plugins.metrics.ngrams", "ngram_matches_python",
                                    args, nargs);
        }
        if (read != 1) {
            goto done;
        }
    }
    /* From here on no list item is read, so Python code run by an allocation (a garbage
     * collection calling __del__) cannot change what is counted. */
    result = PyTuple_New(3 * max_order);
    if (result == NULL) {
        goto done;
    }
    memcpy(grams, items, (size_t)total * sizeof(uint32_t));
    uint32_t distinct = table.size;
    Py_ssize_t matches = 1;
    for (Py_ssize_t order = 1; order <= max_order; order++) {
        const Py_ssize_t predicted_count =
            predicted_length >= order ? predicted_length - order + 1 : 0;
        const Py_ssize_t gold_count = gold_length >= order ? gold_length - order + 1 : 0;
        if (matches > 0) { /* no match of order n - 1: none of order n either */
            if (order > 1) {
                table.stamp++;
                table.size = 0;
                extend_grams(&table, grams, items, predicted_count, order);
                extend_grams(&table, grams + predicted_length, items + predicted_length,
                             gold_count, order);
                distinct = table.size;
            }
            matches = clipped_matches(grams, predicted_count, grams + predicted_length,
                                      gold_count, counts, distinct);
        }
        if (set_count(result, 3 * (order - 1), predicted_count) < 0
            || set_count(result, 3 * (order - 1) + 1, gold_count) < 0
            || set_count(result, 3 * (order - 1) + 2, matches) < 0) {
            Py_CLEAR(result);
            goto done;
        }
    }
done:
    if (block != stack) {
        PyMem_Free(block);
    }
    return result;
}

static PyMethodDef methods[] = {
    {"scan_tags", (PyCFunction)(void (*)(void))scan_tags, METH_FASTCALL,
     "scan_tags(text, tag, first) -> (content, opening, closing)"},
    {"normalize_squad", (PyCFunction)(void (*)(void))normalize_squad, METH_FASTCALL,
     "normalize_squad(text, spaced) -> SQuAD v1.1 normalized text"},
    {"ngram_matches", (PyCFunction)(void (*)(void))ngram_matches, METH_FASTCALL,
     "ngram_matches(predicted, gold, max_order) -> (predicted n-grams, gold n-grams, clipped "
     "matches) for n = 1 .. max_order, flat"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_definition = {
    PyModuleDef_HEAD_INIT, "reward_plugins._speedups",
    "Compiled twins of the tag scan, the SQuAD normalizer and the n-gram matcher.", -1, methods,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    return PyModule_Create(&module_definition);
}
