/* The packet capture's per-packet path, compiled: forwarder/observe/capture.py's taps.
 *
 * Why C: in Python the tap around each face's receive and send (look up the block layout,
 * read the clock, struct.pack the block, append it) cost 0.5-1 us per packet, four taps per
 * forwarded exchange: 8-21 % of the forwarder's throughput (bench/fwd_throughput.py --pcap).
 * Here a tap is a vectorcall object that appends the whole Enhanced Packet Block to one
 * growing buffer (one memcpy of the packet) and calls the face's own callback.  Everything
 * else (the file, its rotation, the interface blocks, the counters) stays in Python; the
 * buffer leaves by Sink.take() in batches.
 *
 * Block layout (pcapng, little-endian, as icn/wire/pcapng.py writes and reads it): type 6,
 * total length, interface id, time high and low (nanoseconds since the epoch: the interface
 * blocks say if_tsresol 9), captured and original length (the packet + 2), PPP protocol
 * 0x0077, the packet, padding to 4 bytes, the epb_flags option (direction: 1 in, 2 out),
 * the end of options, the total length again.
 *
 * Bounded: the buffer holds at most `limit` bytes; a packet that would pass it is counted in
 * `dropped` (the capture adds those to capture.not_written), never buffered.  The Python side
 * is called back (`on_full`) when the buffer reaches `flush_at` bytes.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#define EPB_TYPE 6u
#define HEAD_SIZE 30  /* seven u32 and the two PPP protocol bytes */
#define TAIL_SIZE 16  /* epb_flags (8), end of options (4), total length (4) */

static inline void put_u32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16);
    p[3] = (unsigned char)(v >> 24);
}

/* ---- Sink: the buffer every tap of one capture appends to ------------------------------ */

typedef struct {
    PyObject_HEAD
    unsigned char *buf;
    Py_ssize_t len;
    Py_ssize_t cap;
    Py_ssize_t flush_at;
    Py_ssize_t limit;
    Py_ssize_t packets;   /* blocks in buf */
    Py_ssize_t dropped;   /* packets refused because buf was full (since creation) */
    int flushing;         /* on_full is running: a tap inside it does not call it again */
    PyObject *on_full;
} Sink;

typedef struct {
    PyObject_HEAD
    Sink *sink;
    PyObject *target;
    uint32_t interface;
    uint32_t flags;       /* 1 inbound, 2 outbound */
    vectorcallfunc vectorcall;
} Tap;

static PyTypeObject SinkType;
static PyTypeObject TapType;
static PyObject *tap_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
                                PyObject *kwnames);

static int sink_grow(Sink *s, Py_ssize_t need) {
    Py_ssize_t cap = s->cap ? s->cap : 65536;
    while (cap < need) {
        cap *= 2;
    }
    unsigned char *nb = PyMem_Realloc(s->buf, (size_t)cap);
    if (nb == NULL) {
        return -1;
    }
    s->buf = nb;
    s->cap = cap;
    return 0;
}

/* Append one block around data[0:n]; 1 appended, 0 dropped (full), -1 error. */
static int sink_append(Sink *s, const char *data, Py_ssize_t n, uint32_t interface,
                       uint32_t flags) {
    Py_ssize_t pad = (-(n + 2)) & 3;
    Py_ssize_t total = HEAD_SIZE + n + pad + TAIL_SIZE;
    if (total > (Py_ssize_t)UINT32_MAX || s->len + total > s->limit) {
        s->dropped++;
        return 0;
    }
    if (s->len + total > s->cap && sink_grow(s, s->len + total) < 0) {
        s->dropped++;
        return 0;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    unsigned char *p = s->buf + s->len;
    put_u32(p, EPB_TYPE);
    put_u32(p + 4, (uint32_t)total);
    put_u32(p + 8, interface);
    put_u32(p + 12, (uint32_t)(ns >> 32));
    put_u32(p + 16, (uint32_t)ns);
    put_u32(p + 20, (uint32_t)(n + 2));
    put_u32(p + 24, (uint32_t)(n + 2));
    p[28] = 0x00;
    p[29] = 0x77;
    memcpy(p + HEAD_SIZE, data, (size_t)n);
    p += HEAD_SIZE + n;
    memset(p, 0, (size_t)pad);
    p += pad;
    p[0] = 2; p[1] = 0; p[2] = 4; p[3] = 0;  /* epb_flags, 4 bytes */
    put_u32(p + 4, flags);
    memset(p + 8, 0, 4);                     /* end of options */
    put_u32(p + 12, (uint32_t)total);
    s->len += total;
    s->packets++;
    return 1;
}

static PyObject *sink_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"flush_at", "limit", "on_full", NULL};
    Py_ssize_t flush_at, limit;
    PyObject *on_full;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "nnO", kwlist, &flush_at, &limit, &on_full)) {
        return NULL;
    }
    if (flush_at <= 0 || limit <= 0) {
        PyErr_SetString(PyExc_ValueError, "Sink: flush_at and limit must be positive");
        return NULL;
    }
    if (!PyCallable_Check(on_full)) {
        PyErr_SetString(PyExc_TypeError, "Sink: on_full must be callable");
        return NULL;
    }
    Sink *s = (Sink *)type->tp_alloc(type, 0);
    if (s == NULL) {
        return NULL;
    }
    s->flush_at = flush_at;
    s->limit = limit;
    Py_INCREF(on_full);
    s->on_full = on_full;
    return (PyObject *)s;
}

static int sink_traverse(Sink *s, visitproc visit, void *arg) {
    Py_VISIT(s->on_full);
    return 0;
}

static int sink_clear(Sink *s) {
    Py_CLEAR(s->on_full);
    return 0;
}

static void sink_dealloc(Sink *s) {
    PyObject_GC_UnTrack(s);
    sink_clear(s);
    PyMem_Free(s->buf);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

static PyObject *sink_take(Sink *s, PyObject *Py_UNUSED(ignored)) {
    PyObject *data = PyBytes_FromStringAndSize((const char *)s->buf, s->len);
    if (data == NULL) {
        return NULL;
    }
    PyObject *result = Py_BuildValue("(Nn)", data, s->packets);
    if (result == NULL) {
        return NULL;
    }
    s->len = 0;
    s->packets = 0;
    if (s->cap > 4 * s->flush_at) {  /* a burst grew it: give the memory back */
        PyMem_Free(s->buf);
        s->buf = NULL;
        s->cap = 0;
    }
    return result;
}

static PyObject *sink_append_py(Sink *s, PyObject *args) {
    Py_buffer view;
    unsigned int interface, flags;
    if (!PyArg_ParseTuple(args, "y*II", &view, &interface, &flags)) {
        return NULL;
    }
    int r = sink_append(s, view.buf, view.len, interface, flags);
    PyBuffer_Release(&view);
    return PyBool_FromLong(r);
}

static PyObject *sink_tap(Sink *s, PyObject *args) {
    unsigned int interface;
    int inbound;
    PyObject *target;
    if (!PyArg_ParseTuple(args, "IpO", &interface, &inbound, &target)) {
        return NULL;
    }
    if (!PyCallable_Check(target)) {
        PyErr_SetString(PyExc_TypeError, "Sink.tap: the target must be callable");
        return NULL;
    }
    Tap *t = PyObject_GC_New(Tap, &TapType);
    if (t == NULL) {
        return NULL;
    }
    Py_INCREF(s);
    t->sink = s;
    Py_INCREF(target);
    t->target = target;
    t->interface = interface;
    t->flags = inbound ? 1u : 2u;
    t->vectorcall = tap_vectorcall;
    PyObject_GC_Track(t);
    return (PyObject *)t;
}

static PyObject *sink_get_size(Sink *s, void *Py_UNUSED(c)) { return PyLong_FromSsize_t(s->len); }
static PyObject *sink_get_packets(Sink *s, void *Py_UNUSED(c)) {
    return PyLong_FromSsize_t(s->packets);
}
static PyObject *sink_get_dropped(Sink *s, void *Py_UNUSED(c)) {
    return PyLong_FromSsize_t(s->dropped);
}

static PyGetSetDef sink_getset[] = {
    {"size", (getter)sink_get_size, NULL, "bytes of blocks waiting to be taken", NULL},
    {"packets", (getter)sink_get_packets, NULL, "blocks waiting to be taken", NULL},
    {"dropped", (getter)sink_get_dropped, NULL, "packets refused because the buffer was full",
     NULL},
    {NULL},
};

static PyMethodDef sink_methods[] = {
    {"take", (PyCFunction)sink_take, METH_NOARGS,
     "take() -> (blocks, count): the blocks appended so far, and empty the buffer"},
    {"tap", (PyCFunction)sink_tap, METH_VARARGS,
     "tap(interface, inbound, target) -> callable(wire): appends wire's block, then target(wire)"},
    {"append", (PyCFunction)sink_append_py, METH_VARARGS,
     "append(wire, interface, flags) -> bool: one block, as a tap appends it (False: full)"},
    {NULL},
};

static PyTypeObject SinkType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "forwarder.observe._tap.Sink",
    .tp_basicsize = sizeof(Sink),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Sink(flush_at, limit, on_full): the buffer of a capture's packet blocks",
    .tp_new = sink_new,
    .tp_dealloc = (destructor)sink_dealloc,
    .tp_traverse = (traverseproc)sink_traverse,
    .tp_clear = (inquiry)sink_clear,
    .tp_methods = sink_methods,
    .tp_getset = sink_getset,
};

/* ---- Tap: one face's receive or send, recorded first ----------------------------------- */

static PyObject *tap_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
                                PyObject *kwnames) {
    Tap *t = (Tap *)self;
    if (PyVectorcall_NARGS(nargsf) != 1 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames))) {
        PyErr_SetString(PyExc_TypeError, "a tap takes one argument: the packet");
        return NULL;
    }
    PyObject *wire = args[0];
    Sink *s = t->sink;
    if (PyBytes_CheckExact(wire)) {
        sink_append(s, PyBytes_AS_STRING(wire), PyBytes_GET_SIZE(wire), t->interface, t->flags);
    } else {
        Py_buffer view;
        if (PyObject_GetBuffer(wire, &view, PyBUF_SIMPLE) < 0) {
            return NULL;
        }
        sink_append(s, view.buf, view.len, t->interface, t->flags);
        PyBuffer_Release(&view);
    }
    if (s->len >= s->flush_at && !s->flushing && s->on_full != NULL) {
        s->flushing = 1;
        PyObject *r = PyObject_CallNoArgs(s->on_full);
        s->flushing = 0;
        if (r == NULL) {
            return NULL;
        }
        Py_DECREF(r);
    }
    return PyObject_Vectorcall(t->target, args, 1, NULL);
}

static int tap_traverse(Tap *t, visitproc visit, void *arg) {
    Py_VISIT(t->sink);
    Py_VISIT(t->target);
    return 0;
}

static int tap_clear(Tap *t) {
    Py_CLEAR(t->sink);
    Py_CLEAR(t->target);
    return 0;
}

static void tap_dealloc(Tap *t) {
    PyObject_GC_UnTrack(t);
    tap_clear(t);
    PyObject_GC_Del(t);
}

static PyObject *tap_get_target(Tap *t, void *Py_UNUSED(c)) {
    if (t->target == NULL) {
        Py_RETURN_NONE;
    }
    Py_INCREF(t->target);
    return t->target;
}

static PyGetSetDef tap_getset[] = {
    {"target", (getter)tap_get_target, NULL, "the callback each packet goes on to", NULL},
    {NULL},
};

static PyTypeObject TapType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "forwarder.observe._tap.Tap",
    .tp_basicsize = sizeof(Tap),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A face's receive or send with its packets recorded (made by Sink.tap)",
    .tp_vectorcall_offset = offsetof(Tap, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_dealloc = (destructor)tap_dealloc,
    .tp_traverse = (traverseproc)tap_traverse,
    .tp_clear = (inquiry)tap_clear,
    .tp_getset = tap_getset,
};

static struct PyModuleDef tapmodule = {
    PyModuleDef_HEAD_INIT,
    .m_name = "forwarder.observe._tap",
    .m_doc = "The packet capture's compiled per-packet path (see forwarder/observe/capture.py).",
    .m_size = -1,
};

PyMODINIT_FUNC PyInit__tap(void) {
    if (PyType_Ready(&SinkType) < 0 || PyType_Ready(&TapType) < 0) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&tapmodule);
    if (m == NULL) {
        return NULL;
    }
    if (PyModule_AddObjectRef(m, "Sink", (PyObject *)&SinkType) < 0
        || PyModule_AddObjectRef(m, "Tap", (PyObject *)&TapType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
