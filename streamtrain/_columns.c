/*
 * streamtrain._columns: fill record columns from confluent-kafka Messages in C,
 * and find a chunk's offset runs.
 *
 * The per-record hot path of ingest (see streamtrain/ingest/messages.py; the offset runs
 * are streamtrain/records.py's). Calling five accessor methods per
 * Message from Python costs about a quarter of a microsecond a record; this reads the
 * same fields straight from each Message object instead, at byte offsets that
 * messages.py discovers on first use from probe Messages it builds itself and checks
 * on every call. Nothing here knows confluent-kafka's struct: the offsets come in as
 * arguments, and messages.py falls back to the accessors whenever they are unknown.
 *
 * fill(messages, message_type, layout, batch_records, partitions, offsets, timestamps,
 *      bounds)
 *   messages:     a list of Message objects, all of type message_type
 *   layout:       (value, error, partition, offset, timestamp) byte offsets into a
 *                 Message: PyObject* value and error, int32 partition, int64 offset and
 *                 timestamp
 *   batch_records: the records are cut into batches of this many (the last may have
 *                 fewer): one payload buffer per batch, so a consume()'s records become
 *                 training batches in one call and no payload is copied twice
 *   partitions:   writable int32 buffer of len(messages) items
 *   offsets, timestamps: writable int64 buffers of len(messages) items
 *   bounds:       writable int64 buffer of len(messages) + batches items: each batch's
 *                 payload offsets into its own buffer (its records + 1, from 0), back to
 *                 back (1 item, 0, for no messages)
 * returns (payloads, shortest, longest): the list of payload buffers (bytes), one per
 * batch, and the smallest and largest payload length (0, 0 for no messages; decoders
 * of fixed-size records check these instead of every length), or None when a message
 * is not a plain record (an error event, another type, a value that is not bytes): the
 * caller then takes the accessor path for the whole list. A null value (tombstone) is
 * an empty payload. The payloads are copied without the GIL when there are at least
 * COPY_WITHOUT_GIL_BYTES of them (the trainer's thread runs meanwhile): the source
 * pointers are collected first, so no Python object is touched while it is released.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* The four output buffers of fill(), in argument order. */
enum { PARTITIONS, OFFSETS, TIMESTAMPS, BOUNDS, N_BUFFERS };
static const char *const buffer_names[N_BUFFERS] = {"partitions", "offsets", "timestamps",
                                                    "bounds"};
static const Py_ssize_t buffer_itemsizes[N_BUFFERS] = {4, 8, 8, 8};

/* Below this many payload bytes the copy is shorter than handing the GIL over. */
#define COPY_WITHOUT_GIL_BYTES (64 * 1024)

static void
release_buffers(Py_buffer *views, int count)
{
    for (int k = 0; k < count; k++)
        PyBuffer_Release(&views[k]);
}

/* Writable, C-contiguous views of objects[k] with n items (bounds: n + batches); on
 * failure nothing stays acquired and an exception is set. */
static int
get_buffers(PyObject *const *objects, Py_buffer *views, Py_ssize_t n, Py_ssize_t batches)
{
    for (int k = 0; k < N_BUFFERS; k++) {
        Py_ssize_t expected = (n + (k == BOUNDS ? batches : 0)) * buffer_itemsizes[k];
        if (PyObject_GetBuffer(objects[k], &views[k], PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
            release_buffers(views, k);
            return -1;
        }
        if (views[k].len != expected) {
            PyErr_Format(PyExc_ValueError, "%s: expected %zd bytes, got %zd", buffer_names[k],
                         expected, views[k].len);
            release_buffers(views, k + 1);
            return -1;
        }
    }
    return 0;
}

/* Copy each record's payload into its batch's buffer (touches no Python object). */
static void
copy_payloads(const char *const *sources, char *const *outs, const int64_t *bnd, Py_ssize_t n,
              Py_ssize_t batch)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t k = i / batch;
        int64_t from = bnd[i + k], to = bnd[i + k + 1];
        if (to > from)
            memcpy(outs[k] + from, sources[i], (size_t)(to - from));
    }
}

static PyObject *
fill(PyObject *self, PyObject *args)
{
    PyObject *messages, *layout, *outputs[N_BUFFERS];
    PyTypeObject *message_type;
    Py_ssize_t value_at, error_at, partition_at, offset_at, timestamp_at, batch;
    (void)self;

    if (!PyArg_ParseTuple(args, "O!O!O!nOOOO", &PyList_Type, &messages, &PyType_Type,
                          &message_type, &PyTuple_Type, &layout, &batch, &outputs[PARTITIONS],
                          &outputs[OFFSETS], &outputs[TIMESTAMPS], &outputs[BOUNDS]))
        return NULL;
    if (!PyArg_ParseTuple(layout, "nnnnn", &value_at, &error_at, &partition_at, &offset_at,
                          &timestamp_at))
        return NULL;
    if (batch < 1) {
        PyErr_SetString(PyExc_ValueError, "batch_records must be at least 1");
        return NULL;
    }
    Py_ssize_t size = message_type->tp_basicsize;
    if (value_at < 0 || value_at + (Py_ssize_t)sizeof(PyObject *) > size || error_at < 0 ||
        error_at + (Py_ssize_t)sizeof(PyObject *) > size || partition_at < 0 ||
        partition_at + 4 > size || offset_at < 0 || offset_at + 8 > size ||
        timestamp_at < 0 || timestamp_at + 8 > size) {
        PyErr_SetString(PyExc_ValueError, "layout offsets outside the message object");
        return NULL;
    }

    Py_ssize_t n = PyList_GET_SIZE(messages);
    Py_ssize_t batches = n ? (n + batch - 1) / batch : 1;
    Py_buffer views[N_BUFFERS];
    if (get_buffers(outputs, views, n, batches) < 0)
        return NULL;

    int32_t *part = (int32_t *)views[PARTITIONS].buf;
    int64_t *offs = (int64_t *)views[OFFSETS].buf;
    int64_t *ts = (int64_t *)views[TIMESTAMPS].buf;
    int64_t *bnd = (int64_t *)views[BOUNDS].buf;
    PyObject *result = NULL, *payloads = NULL;
    int64_t all = 0, shortest = INT64_MAX, longest = 0;
    const char **sources = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(const char *));
    char **outs = PyMem_Malloc((size_t)batches * sizeof(char *));
    if (sources == NULL || outs == NULL) {
        PyErr_NoMemory();
        goto done;
    }

    /* Pass 1: check every message, read the fixed-size fields, the batch-local payload
     * bounds: record i of batch k = i / batch has its bounds at i + k and i + k + 1. */
    int64_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *m = PyList_GET_ITEM(messages, i);
        if (Py_TYPE(m) != message_type)
            goto not_plain;
        const char *base = (const char *)m;
        PyObject *error, *value;
        memcpy(&error, base + error_at, sizeof error);
        if (error != NULL && error != Py_None)
            goto not_plain;
        memcpy(&value, base + value_at, sizeof value);
        Py_ssize_t k = i / batch;
        if (i % batch == 0) {
            total = 0;
            bnd[i + k] = 0;
        }
        sources[i] = NULL;
        int64_t length = 0;
        if (value != NULL && value != Py_None) {
            if (!PyBytes_CheckExact(value))
                goto not_plain;
            length = PyBytes_GET_SIZE(value);
            sources[i] = PyBytes_AS_STRING(value);
        }
        total += length;
        all += length;
        if (length < shortest)
            shortest = length;
        if (length > longest)
            longest = length;
        bnd[i + k + 1] = total;
        memcpy(&part[i], base + partition_at, 4);
        memcpy(&offs[i], base + offset_at, 8);
        memcpy(&ts[i], base + timestamp_at, 8);
    }
    if (n == 0) {
        bnd[0] = 0;
        shortest = 0;
    }

    /* Pass 2: one payload buffer per batch. */
    payloads = PyList_New(batches);
    if (payloads == NULL)
        goto done;
    for (Py_ssize_t k = 0; k < batches; k++) {
        Py_ssize_t last = (k + 1) * batch < n ? (k + 1) * batch : n; /* one past */
        PyObject *buffer = PyBytes_FromStringAndSize(NULL, n ? (Py_ssize_t)bnd[last + k] : 0);
        if (buffer == NULL)
            goto done;
        outs[k] = PyBytes_AS_STRING(buffer);
        PyList_SET_ITEM(payloads, k, buffer);
    }
    /* The list and its messages' values stay referenced by the caller meanwhile. */
    if (all >= COPY_WITHOUT_GIL_BYTES) {
        Py_BEGIN_ALLOW_THREADS
        copy_payloads(sources, outs, bnd, n, batch);
        Py_END_ALLOW_THREADS
    } else {
        copy_payloads(sources, outs, bnd, n, batch);
    }
    result = Py_BuildValue("(OLL)", payloads, (long long)shortest, (long long)longest);
    goto done;

not_plain:
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(payloads);
    PyMem_Free(sources);
    PyMem_Free(outs);
    release_buffers(views, N_BUFFERS);
    return result;
}

/*
 * offset_runs(partitions, offsets, max_runs) -> list[tuple[int, int, int]] | None
 *   partitions: int32 buffer, offsets: int64 buffer of the same length (C-contiguous)
 * The (partition, first_offset, last_offset) runs of consecutive offsets in record
 * order (what RecordColumns.offset_ranges computes with numpy), or None when there are
 * more than max_runs of them (the caller then sorts by partition first).
 */
static PyObject *
offset_runs(PyObject *self, PyObject *args)
{
    PyObject *py_partitions, *py_offsets;
    Py_ssize_t max_runs;
    Py_buffer partitions, offsets;
    (void)self;

    if (!PyArg_ParseTuple(args, "OOn", &py_partitions, &py_offsets, &max_runs))
        return NULL;
    if (PyObject_GetBuffer(py_partitions, &partitions, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return NULL;
    if (PyObject_GetBuffer(py_offsets, &offsets, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyBuffer_Release(&partitions);
        return NULL;
    }
    PyObject *result = NULL;
    Py_ssize_t n = partitions.len / 4;
    if (partitions.itemsize != 4 || offsets.itemsize != 8 || offsets.len / 8 != n) {
        PyErr_SetString(PyExc_ValueError, "offset_runs needs int32 partitions and as many "
                                          "int64 offsets");
        goto done;
    }
    const int32_t *part = (const int32_t *)partitions.buf;
    const int64_t *offs = (const int64_t *)offsets.buf;
    Py_ssize_t runs = n ? 1 : 0;
    for (Py_ssize_t i = 1; i < n; i++)
        if (part[i] != part[i - 1] || offs[i] != offs[i - 1] + 1)
            runs++;
    if (runs > max_runs) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    result = PyList_New(runs);
    if (result == NULL)
        goto done;
    Py_ssize_t start = 0, k = 0;
    for (Py_ssize_t i = 1; i <= n; i++) {
        if (i < n && part[i] == part[i - 1] && offs[i] == offs[i - 1] + 1)
            continue;
        PyObject *run = Py_BuildValue("(iLL)", (int)part[start], (long long)offs[start],
                                      (long long)offs[i - 1]);
        if (run == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, k++, run);
        start = i;
    }
done:
    PyBuffer_Release(&partitions);
    PyBuffer_Release(&offsets);
    return result;
}

static PyMethodDef methods[] = {
    {"fill", fill, METH_VARARGS,
     "fill(messages, message_type, layout, batch_records, partitions, offsets, timestamps, "
     "bounds) -> tuple[list[bytes], int, int] | None"},
    {"offset_runs", offset_runs, METH_VARARGS,
     "offset_runs(partitions, offsets, max_runs) -> list[tuple[int, int, int]] | None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_columns",
    "Record columns from confluent-kafka Messages (see streamtrain/ingest/messages.py).", -1,
    methods,
};

PyMODINIT_FUNC
PyInit__columns(void)
{
    PyObject *m = PyModule_Create(&module);
    /* fill()'s signature: 2 since it cuts batches (messages.py refuses other versions) */
    if (m != NULL && PyModule_AddIntConstant(m, "FILL_VERSION", 2) < 0)
        Py_CLEAR(m);
    return m;
}
