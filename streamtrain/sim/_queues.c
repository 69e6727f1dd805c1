/*
 * streamtrain.sim._queues: one tick of the simulator's partition queues in C.
 *
 * The per-tick hot path of streamtrain/sim/engine.py: a week at 15-s ticks is 40,320
 * ticks, and each computes the arrivals, the consumption and the lag of every partition
 * (800 by default). partitions.py's Partitions does it with a dozen numpy calls a tick
 * (a few dozen microseconds, mostly call overhead); this does the same arithmetic in
 * one loop over the partitions. It is the same arithmetic, operation for operation and
 * in the same order, so a replay's every number is the same with or without it:
 *
 *   - elementwise: the same IEEE double operations as numpy's (built with
 *     -ffp-contract=off, so that no multiply-add is fused);
 *   - per-worker sums: in partition order, as np.bincount adds its weights;
 *   - the sums numpy reduces with .sum(): numpy's pairwise summation
 *     (pairwise_sum below, as numpy's loops_utils.h.src: blocks of 128 in eight
 *     accumulators, halves rounded down to a multiple of 8, starting from -0.0);
 *   - maxima and comparisons: exact in any order.
 *
 * engine.py keeps the numpy version as the reference and uses it when this module is
 * not built; tests/unit/sim/test_queues.py checks that both give bit-identical runs.
 *
 * Queues(cumulative, per_step, rank, consumed, pointer, tolerance, step_s, max_workers)
 *   cumulative:  float64, (steps + 1) x partitions, C-contiguous: arrivals at each step
 *                boundary
 *   per_step:    float64, steps x partitions: arrivals within each step
 *   rank:        int64, partitions: each partition's place in the fixed random order
 *                (its worker is rank % training)
 *   consumed:    float64, partitions, writable: cumulative consumption (updated)
 *   pointer:     int64, partitions, writable: the lag inversion's step per partition
 *   tolerance:   float64, partitions: the backlog up to which a partition is not
 *                lagging (records)
 *   step_s:      the trace step (s)
 *   max_workers: the largest training count tick() accepts
 * Queues.tick(step, fraction, training, capacity_records, shuffle, forward_cost, now_s)
 *   -> (consumed_records, forwarded_records, lag_s, backlog_records): see
 *   partitions.py's Partitions.tick, which this mirrors (backlog_records is 0.0 when
 *   drained).
 * Queues.drained: every arrival so far consumed.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define PW_BLOCKSIZE 128

/* numpy's pairwise summation of a contiguous float64 array (what ndarray.sum() does). */
static double
pairwise_sum(const double *a, Py_ssize_t n)
{
    if (n < 8) {
        double res = -0.0;
        for (Py_ssize_t i = 0; i < n; i++)
            res += a[i];
        return res;
    }
    if (n <= PW_BLOCKSIZE) {
        double r[8], res;
        Py_ssize_t i;
        for (int j = 0; j < 8; j++)
            r[j] = a[j];
        for (i = 8; i < n - (n % 8); i += 8)
            for (int j = 0; j < 8; j++)
                r[j] += a[i + j];
        res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++)
            res += a[i];
        return res;
    }
    Py_ssize_t n2 = n / 2;
    n2 -= n2 % 8;
    return pairwise_sum(a, n2) + pairwise_sum(a + n2, n - n2);
}

enum { CUMULATIVE, PER_STEP, RANK, CONSUMED, POINTER, TOLERANCE, N_BUFFERS };
static const char *const buffer_names[N_BUFFERS] = {"cumulative", "per_step", "rank",
                                                    "consumed", "pointer", "tolerance"};
static const char buffer_kinds[N_BUFFERS] = {'d', 'd', 'q', 'd', 'q', 'd'};

typedef struct {
    PyObject_HEAD
    Py_buffer views[N_BUFFERS];
    int acquired; /* views[0 .. acquired) are held */
    Py_ssize_t partitions, steps;
    long max_workers;
    double step_s;
    int drained;
    int64_t *owners;     /* (max_workers + 1) x partitions: row w is rank % w */
    char *owner_ready;   /* max_workers + 1 flags */
    double *arrived;     /* partitions */
    double *backlog;     /* partitions */
    double *per_worker;  /* max_workers + 1 */
    double *local;       /* max_workers + 1 */
    double *ratio;       /* max_workers + 1 */
} Queues;

static void
Queues_dealloc(Queues *self)
{
    for (int k = 0; k < self->acquired; k++)
        PyBuffer_Release(&self->views[k]);
    free(self->owners);
    free(self->owner_ready);
    free(self->arrived);
    free(self->backlog);
    free(self->per_worker);
    free(self->local);
    free(self->ratio);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* A C-contiguous view of an array of the given kind ('d' float64, 'q' int64); the
 * integer format may also read 'l' where long is 64 bits. */
static int
kind_matches(const Py_buffer *view, char kind)
{
    const char *format = view->format ? view->format : "B";
    if (*format == '<' || *format == '=' || *format == '@')
        format++;
    if (view->itemsize != 8 || format[1] != '\0')
        return 0;
    return format[0] == kind || (kind == 'q' && format[0] == 'l' && sizeof(long) == 8);
}

static int
Queues_init(Queues *self, PyObject *args, PyObject *kwds)
{
    static char *keywords[] = {"cumulative", "per_step", "rank", "consumed", "pointer",
                               "tolerance", "step_s", "max_workers", NULL};
    PyObject *objects[N_BUFFERS];
    double step_s;
    long max_workers;
    if (self->acquired) {
        PyErr_SetString(PyExc_RuntimeError, "Queues is initialized once");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOOOdl", keywords, &objects[0],
                                     &objects[1], &objects[2], &objects[3], &objects[4],
                                     &objects[5], &step_s, &max_workers))
        return -1;
    for (int k = 0; k < N_BUFFERS; k++) {
        int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT;
        if (k == CONSUMED || k == POINTER)
            flags |= PyBUF_WRITABLE;
        if (PyObject_GetBuffer(objects[k], &self->views[k], flags) < 0)
            return -1;
        self->acquired = k + 1;
        if (!kind_matches(&self->views[k], buffer_kinds[k])) {
            PyErr_Format(PyExc_TypeError, "%s must be a C-contiguous %s array",
                         buffer_names[k], buffer_kinds[k] == 'd' ? "float64" : "int64");
            return -1;
        }
    }
    const Py_buffer *cumulative = &self->views[CUMULATIVE], *per_step = &self->views[PER_STEP];
    if (cumulative->ndim != 2 || per_step->ndim != 2 ||
        cumulative->shape[0] != per_step->shape[0] + 1 ||
        cumulative->shape[1] != per_step->shape[1] || per_step->shape[0] < 1) {
        PyErr_SetString(PyExc_ValueError,
                        "cumulative must be (steps + 1) x partitions and per_step steps x "
                        "partitions, with at least one step");
        return -1;
    }
    self->steps = per_step->shape[0];
    self->partitions = per_step->shape[1];
    for (int k = RANK; k < N_BUFFERS; k++) {
        if (self->views[k].ndim != 1 || self->views[k].shape[0] != self->partitions) {
            PyErr_Format(PyExc_ValueError, "%s must hold one item per partition",
                         buffer_names[k]);
            return -1;
        }
    }
    if (max_workers < 1 || self->partitions < 1 || !(step_s > 0)) {
        PyErr_SetString(PyExc_ValueError,
                        "need max_workers >= 1, a partition and a positive step");
        return -1;
    }
    const int64_t *rank = (const int64_t *)self->views[RANK].buf;
    for (Py_ssize_t p = 0; p < self->partitions; p++) {
        if (rank[p] < 0) {
            PyErr_SetString(PyExc_ValueError, "ranks cannot be negative");
            return -1;
        }
    }
    const int64_t *pointer = (const int64_t *)self->views[POINTER].buf;
    for (Py_ssize_t p = 0; p < self->partitions; p++) {
        if (pointer[p] < 0 || pointer[p] > self->steps) {
            PyErr_SetString(PyExc_ValueError, "pointers must be steps of the window");
            return -1;
        }
    }
    self->max_workers = max_workers;
    self->step_s = step_s;
    self->drained = 1;
    size_t p = (size_t)self->partitions, w = (size_t)max_workers + 1;
    self->owners = malloc(w * p * sizeof(int64_t));
    self->owner_ready = calloc(w, 1);
    self->arrived = malloc(p * sizeof(double));
    self->backlog = malloc(p * sizeof(double));
    self->per_worker = malloc(w * sizeof(double));
    self->local = malloc(w * sizeof(double));
    self->ratio = malloc(w * sizeof(double));
    if (!self->owners || !self->owner_ready || !self->arrived || !self->backlog ||
        !self->per_worker || !self->local || !self->ratio) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static const int64_t *
owners_of(Queues *self, long training)
{
    int64_t *row = self->owners + (size_t)training * (size_t)self->partitions;
    if (!self->owner_ready[training]) {
        const int64_t *rank = (const int64_t *)self->views[RANK].buf;
        for (Py_ssize_t p = 0; p < self->partitions; p++)
            row[p] = rank[p] % training;
        self->owner_ready[training] = 1;
    }
    return row;
}

/* Partitions.consume: returns the records consumed, sets *forwarded. */
static double
consume(Queues *self, long training, double capacity, int shuffle, double forward_cost,
        double *forwarded_out)
{
    Py_ssize_t n = self->partitions;
    const double *arrived = self->arrived;
    double *consumed = (double *)self->views[CONSUMED].buf, *backlog = self->backlog;
    *forwarded_out = 0.0;
    for (Py_ssize_t p = 0; p < n; p++) {
        double b = arrived[p] - consumed[p];
        backlog[p] = b >= 0.0 ? b : 0.0; /* np.maximum(b, 0.0): a NaN stays NaN */
        if (b != b)
            backlog[p] = b;
    }
    if (training <= 0 || capacity <= 0) {
        self->drained = 0;
        return 0.0;
    }
    const int64_t *owner = owners_of(self, training);
    double *per_worker = self->per_worker, *local = self->local, *ratio = self->ratio;
    for (long k = 0; k < training; k++)
        per_worker[k] = 0.0;
    for (Py_ssize_t p = 0; p < n; p++)
        per_worker[owner[p]] += backlog[p];
    double limit = capacity / (double)training;
    double most = per_worker[0];
    for (long k = 1; k < training; k++)
        if (per_worker[k] > most)
            most = per_worker[k];
    if (most <= limit) {
        memcpy(consumed, arrived, (size_t)n * sizeof(double));
        self->drained = 1;
        return pairwise_sum(per_worker, training);
    }
    self->drained = 0;
    for (long k = 0; k < training; k++) {
        local[k] = per_worker[k] <= limit ? per_worker[k] : limit; /* np.minimum */
        ratio[k] = per_worker[k] > 0 ? local[k] / per_worker[k] : 1.0;
    }
    double served = pairwise_sum(local, training);
    double forwarded = 0.0;
    double overflow = pairwise_sum(per_worker, training) - served;
    if (shuffle && overflow > 0) {
        double spare = capacity - served;
        if (!(spare > 0.0)) /* Python's max(0.0, spare) */
            spare = 0.0;
        double can = spare / (1.0 + forward_cost);
        forwarded = can < overflow ? can : overflow; /* Python's min(overflow, can) */
        double part = forwarded / overflow;
        for (long k = 0; k < training; k++)
            ratio[k] = ratio[k] + (1.0 - ratio[k]) * part;
    }
    for (Py_ssize_t p = 0; p < n; p++) {
        double share = ratio[owner[p]];
        consumed[p] = share >= 1.0 ? arrived[p] : consumed[p] + backlog[p] * share;
    }
    *forwarded_out = forwarded;
    return served + forwarded;
}

/* Partitions.max_lag_s. */
static double
max_lag_s(Queues *self, Py_ssize_t step, double now_s)
{
    if (self->drained)
        return 0.0;
    Py_ssize_t n = self->partitions;
    const double *arrived = self->arrived;
    const double *consumed = (const double *)self->views[CONSUMED].buf;
    const double *tolerance = (const double *)self->views[TOLERANCE].buf;
    int any = 0;
    for (Py_ssize_t p = 0; p < n && !any; p++)
        any = arrived[p] - consumed[p] > tolerance[p];
    if (!any)
        return 0.0;
    const double *cumulative = (const double *)self->views[CUMULATIVE].buf;
    const double *per_step = (const double *)self->views[PER_STEP].buf;
    int64_t *pointer = (int64_t *)self->views[POINTER].buf;
    double lag = -HUGE_VAL;
    for (Py_ssize_t p = 0; p < n; p++) {
        int64_t ptr = pointer[p];
        while (ptr < step && cumulative[(ptr + 1) * n + p] <= consumed[p])
            ptr++;
        pointer[p] = ptr;
        double value = 0.0;
        if (arrived[p] - consumed[p] > tolerance[p]) {
            double arriving = per_step[ptr * n + p], within = 0.0;
            if (arriving > 0)
                within = (consumed[p] - cumulative[ptr * n + p]) / arriving;
            within = within >= 0.0 ? within : 0.0; /* np.maximum(within, 0.0) */
            within = within <= 1.0 ? within : 1.0; /* np.minimum(within, 1.0) */
            value = now_s - ((double)ptr + within) * self->step_s;
        }
        if (value > lag || value != value)
            lag = value;
    }
    return lag;
}

static PyObject *
Queues_tick(Queues *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (!self->acquired || self->owners == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Queues was not initialized");
        return NULL;
    }
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError,
                        "tick(step, fraction, training, capacity_records, shuffle, "
                        "forward_cost, now_s) takes 7 arguments");
        return NULL;
    }
    Py_ssize_t step = PyLong_AsSsize_t(args[0]);
    double fraction = PyFloat_AsDouble(args[1]);
    long training = PyLong_AsLong(args[2]);
    double capacity = PyFloat_AsDouble(args[3]);
    int shuffle = PyObject_IsTrue(args[4]);
    double forward_cost = PyFloat_AsDouble(args[5]);
    double now_s = PyFloat_AsDouble(args[6]);
    if (PyErr_Occurred())
        return NULL;
    if (step < 0 || step >= self->steps) {
        PyErr_Format(PyExc_IndexError, "step %zd outside the window's %zd", step, self->steps);
        return NULL;
    }
    if (training > self->max_workers) {
        PyErr_Format(PyExc_ValueError, "%ld training workers, more than the %ld allowed",
                     training, self->max_workers);
        return NULL;
    }
    Py_ssize_t n = self->partitions;
    const double *cumulative = (const double *)self->views[CUMULATIVE].buf + step * n;
    const double *per_step = (const double *)self->views[PER_STEP].buf + step * n;
    for (Py_ssize_t p = 0; p < n; p++)
        self->arrived[p] = cumulative[p] + fraction * per_step[p];
    double forwarded;
    double consumed = consume(self, training, capacity, shuffle, forward_cost, &forwarded);
    double lag = max_lag_s(self, step, now_s);
    double backlog = 0.0;
    if (!self->drained) {
        const double *done = (const double *)self->views[CONSUMED].buf;
        for (Py_ssize_t p = 0; p < n; p++)
            self->backlog[p] = self->arrived[p] - done[p];
        backlog = pairwise_sum(self->backlog, n);
    }
    return Py_BuildValue("(dddd)", consumed, forwarded, lag, backlog);
}

static PyObject *
Queues_drained(Queues *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(self->drained);
}

static PyObject *
pairwise_sum_py(PyObject *module, PyObject *arg)
{
    (void)module;
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return NULL;
    if (!kind_matches(&view, 'd') || view.ndim != 1) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_TypeError, "need a C-contiguous 1-D float64 array");
        return NULL;
    }
    double result = pairwise_sum((const double *)view.buf, view.shape[0]);
    PyBuffer_Release(&view);
    return PyFloat_FromDouble(result);
}

static PyMethodDef Queues_methods[] = {
    {"tick", (PyCFunction)(void (*)(void))Queues_tick, METH_FASTCALL,
     "tick(step, fraction, training, capacity_records, shuffle, forward_cost, now_s) -> "
     "(consumed_records, forwarded_records, lag_s, backlog_records)"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Queues_getset[] = {
    {"drained", (getter)Queues_drained, NULL, "every arrival so far consumed", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject QueuesType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "streamtrain.sim._queues.Queues",
    .tp_basicsize = sizeof(Queues),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The partition queues of one replay (see the module's source comment).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Queues_init,
    .tp_dealloc = (destructor)Queues_dealloc,
    .tp_methods = Queues_methods,
    .tp_getset = Queues_getset,
};

static PyMethodDef methods[] = {
    {"pairwise_sum", pairwise_sum_py, METH_O,
     "pairwise_sum(values) -> float: numpy's sum of a 1-D float64 array, as this module "
     "computes it"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_queues",
    "The simulator's partition queues, a tick at a time (see streamtrain/sim/engine.py).", -1,
    methods,
};

PyMODINIT_FUNC
PyInit__queues(void)
{
    if (PyType_Ready(&QueuesType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&QueuesType);
    if (PyModule_AddObject(m, "Queues", (PyObject *)&QueuesType) < 0) {
        Py_DECREF(&QueuesType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
