# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled hot path: packet validation, encoding, the heartbeat template and
the index that recognises known members' heartbeats without parsing.

Same names and verdicts as ``_fast_py.py`` (the tests hold them to it). The
wire numbers are read from ``wire.layout`` once at import, so they still live in
one place. Buffers are taken with the buffer protocol directly (no memoryview
objects), so recognising a known heartbeat allocates nothing.
"""

from cpython.buffer cimport (PyObject_GetBuffer, PyBuffer_Release, PyBuffer_FillInfo,
                             PyBUF_SIMPLE, PyBUF_WRITABLE)
from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport malloc, free, calloc
from libc.string cimport memcmp, memcpy
from libc.math cimport sqrt

cdef extern from "<errno.h>" nogil:
    int errno
    int EAGAIN
    int ESHUTDOWN

cdef extern from "<sys/socket.h>" nogil:
    ssize_t recv(int fd, void* buf, size_t n, int flags)
    ssize_t send(int fd, const void* buf, size_t n, int flags)

# Batched receive: recvmmsg on Linux; elsewhere a stand-in that reads one
# datagram per call, so the module still builds and behaves the same.
cdef extern from *:
    """
    #include <sys/types.h>
    #include <sys/socket.h>
    #include <sys/uio.h>
    #include <string.h>
    #define MCM_BATCH 32
    #define MCM_SLOT 65536
    #include <netinet/in.h>
    #if defined(__linux__)
    typedef struct mmsghdr mcm_mmsghdr;
    #else
    typedef struct { struct msghdr msg_hdr; unsigned int msg_len; } mcm_mmsghdr;
    #endif
    /* With ``names``, each slot's sender address is kept, for the slow path
       (who may join by unicast); without, the kernel copies none, which the
       multicast socket's receive loop does not pay for. */
    static int mcm_recv_batch(int fd, mcm_mmsghdr *v, unsigned int n,
                              struct sockaddr_storage *names) {
        for (unsigned int i = 0; i < n; i++) {
            v[i].msg_hdr.msg_name = names ? &names[i] : NULL;
            v[i].msg_hdr.msg_namelen = names ? sizeof(struct sockaddr_storage) : 0;
        }
    #if defined(__linux__)
        return recvmmsg(fd, v, n, MSG_WAITFORONE, NULL);
    #else
        ssize_t r = recvmsg(fd, &v[0].msg_hdr, 0);
        if (r < 0) return -1;
        v[0].msg_len = (unsigned int)r;
        return 1;
    #endif
    }
    static void mcm_batch_setup(mcm_mmsghdr *v, struct iovec *iov, unsigned char *mem,
                                struct sockaddr_storage *names) {
        memset(v, 0, sizeof(mcm_mmsghdr) * MCM_BATCH);
        for (int i = 0; i < MCM_BATCH; i++) {
            iov[i].iov_base = mem + (size_t)i * MCM_SLOT;
            iov[i].iov_len = MCM_SLOT;
            v[i].msg_hdr.msg_iov = &iov[i];
            v[i].msg_hdr.msg_iovlen = 1;
            v[i].msg_hdr.msg_name = &names[i];
            v[i].msg_hdr.msg_namelen = sizeof(struct sockaddr_storage);
        }
    }
    /* The address and port of slot i's sender: 4 or 16 address bytes (an
       IPv4-mapped IPv6 sender gives its 4), 0 when it has no IP address. */
    static int mcm_source(mcm_mmsghdr *v, int i, unsigned char *out, int *port) {
        struct sockaddr *sa = (struct sockaddr *)v[i].msg_hdr.msg_name;
        socklen_t len = v[i].msg_hdr.msg_namelen;
        if (sa == NULL) return 0;
        if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
            struct sockaddr_in *in = (struct sockaddr_in *)sa;
            memcpy(out, &in->sin_addr, 4);
            *port = ntohs(in->sin_port);
            return 4;
        }
        if (sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
            struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)sa;
            *port = ntohs(in6->sin6_port);
            if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
                memcpy(out, (unsigned char *)&in6->sin6_addr + 12, 4);
                return 4;
            }
            memcpy(out, &in6->sin6_addr, 16);
            return 16;
        }
        return 0;
    }

    /* Unicast fan-out: one message per peer, all pointing at one iovec (the
       packet's bytes), sent with sendmmsg (elsewhere: one sendmsg each),
       never blocking even on a socket that is blocking for a receive. */
    #if defined(__linux__)
    static int mcm_send_batch(int fd, mcm_mmsghdr *v, unsigned int n) {
        return sendmmsg(fd, v, n, MSG_DONTWAIT);
    }
    #else
    static int mcm_send_batch(int fd, mcm_mmsghdr *v, unsigned int n) {
        if (sendmsg(fd, &v[0].msg_hdr, MSG_DONTWAIT) < 0) return -1;
        return 1;
    }
    #endif
    /* Fill slot i with a destination: 4 bytes are IPv4 (IPv4-mapped when the
       socket is IPv6), 16 bytes IPv6. 0 on success, -1 when the family
       cannot be reached from the socket's. */
    static int mcm_target(mcm_mmsghdr *v, int i, struct sockaddr_storage *names,
                          struct iovec *iov, int family, const unsigned char *addr,
                          int addr_len, int port, unsigned int scope) {
        struct sockaddr_storage *ss = &names[i];
        memset(ss, 0, sizeof(*ss));
        memset(&v[i], 0, sizeof(v[i]));
        if (family == AF_INET) {
            struct sockaddr_in *in = (struct sockaddr_in *)ss;
            if (addr_len != 4) return -1;
            in->sin_family = AF_INET;
            in->sin_port = htons((unsigned short)port);
            memcpy(&in->sin_addr, addr, 4);
            v[i].msg_hdr.msg_namelen = sizeof(struct sockaddr_in);
        } else if (family == AF_INET6) {
            struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
            in6->sin6_family = AF_INET6;
            in6->sin6_port = htons((unsigned short)port);
            if (addr_len == 4) {
                unsigned char *b = (unsigned char *)&in6->sin6_addr;
                b[10] = b[11] = 0xff;
                memcpy(b + 12, addr, 4);
            } else if (addr_len == 16) {
                memcpy(&in6->sin6_addr, addr, 16);
                in6->sin6_scope_id = scope;
            } else {
                return -1;
            }
            v[i].msg_hdr.msg_namelen = sizeof(struct sockaddr_in6);
        } else {
            return -1;
        }
        v[i].msg_hdr.msg_name = ss;
        v[i].msg_hdr.msg_iov = iov;
        v[i].msg_hdr.msg_iovlen = 1;
        return 0;
    }
    static int mcm_truncated(mcm_mmsghdr *v, int i) {
        return (v[i].msg_hdr.msg_flags & MSG_TRUNC) != 0;
    }
    /* A socket shut down for reading returns 0-byte reads forever, as does a
       genuine empty datagram once: poll tells them apart (Linux reports
       POLLRDHUP for a datagram socket whose receive side is shut down;
       elsewhere POLLHUP is the nearest report). */
    #include <poll.h>
    #ifdef POLLRDHUP
    #define MCM_POLL_SHUT POLLRDHUP
    #else
    #define MCM_POLL_SHUT POLLHUP
    #endif
    static int mcm_read_shut(int fd) {
        struct pollfd p;
        p.fd = fd;
        p.events = MCM_POLL_SHUT;
        p.revents = 0;
        return poll(&p, 1, 0) == 1 && (p.revents & MCM_POLL_SHUT) != 0;
    }
    /* Which socket an fd is now: fd numbers are reused as soon as a socket is
       closed, so a batch read from one socket is told from another by inode. */
    #include <sys/stat.h>
    static int mcm_socket_id(int fd, unsigned long long *dev, unsigned long long *ino) {
        struct stat st;
        if (fstat(fd, &st) != 0) return -1;
        *dev = (unsigned long long)st.st_dev;
        *ino = (unsigned long long)st.st_ino;
        return 0;
    }
    /* The clock behind time.monotonic() itself, on every OS (on macOS it is
       not CLOCK_MONOTONIC): heard-at times, deadlines and origins must agree. */
    #if PY_VERSION_HEX >= 0x030D0000
    static inline long long mcm_monotonic_ns(void) {
        PyTime_t t;
        return PyTime_MonotonicRaw(&t) == 0 ? (long long)t : 0;
    }
    #else
    static inline long long mcm_monotonic_ns(void) {
        return (long long)_PyTime_GetMonotonicClock();
    }
    #endif
    """
    int MCM_BATCH
    int MCM_SLOT
    ctypedef struct mcm_mmsghdr:
        unsigned int msg_len
    struct iovec:
        void* iov_base
        size_t iov_len
    struct sockaddr_storage:
        pass
    int AF_INET
    int AF_INET6
    int mcm_recv_batch(int fd, mcm_mmsghdr* v, unsigned int n, sockaddr_storage* names) nogil
    void mcm_batch_setup(mcm_mmsghdr* v, iovec* iov, unsigned char* mem,
                         sockaddr_storage* names) nogil
    int mcm_source(mcm_mmsghdr* v, int i, unsigned char* out, int* port) nogil
    int mcm_send_batch(int fd, mcm_mmsghdr* v, unsigned int n) nogil
    int mcm_target(mcm_mmsghdr* v, int i, sockaddr_storage* names, iovec* iov, int family,
                   const unsigned char* addr, int addr_len, int port, unsigned int scope) nogil
    int mcm_truncated(mcm_mmsghdr* v, int i) nogil
    int mcm_read_shut(int fd) nogil
    int mcm_socket_id(int fd, unsigned long long* dev, unsigned long long* ino) nogil
    long long mcm_monotonic_ns() nogil

# HMAC-SHA256 and the wall clock for the authentication trailer (_auth.h).
cdef extern from "_auth.h" nogil:
    ctypedef struct mcm_sha256_state:
        uint32_t h[8]
    ctypedef struct mcm_hmac_key:
        mcm_sha256_state inner
        mcm_sha256_state outer
    void mcm_hmac_prepare(mcm_hmac_key* k, const unsigned char* key, size_t n)
    void mcm_hmac(const mcm_hmac_key* k, const unsigned char* msg, size_t n, unsigned char* out)
    int mcm_equal_ct(const unsigned char* a, const unsigned char* b, size_t n)
    uint64_t mcm_wall_us()
    int mcm_sha_ni_use(int wanted)

from ..wire import layout as L
from ..wire.errors import MalformedPacket

IMPLEMENTATION = "compiled"

# Wire numbers, copied once from wire.layout (read-only after import).
cdef Py_ssize_t OFF_BODY_LEN = L.OFF_BODY_LEN
cdef Py_ssize_t OFF_ALIVE = L.OFF_ALIVE
cdef Py_ssize_t OFF_PORT = L.OFF_PORT
cdef Py_ssize_t OFF_HOST_LEN = L.OFF_HOST_LEN
cdef Py_ssize_t OFF_HOST = L.OFF_HOST
cdef Py_ssize_t BODY_START = L.BODY_START
cdef Py_ssize_t BODY_FIXED_LEN = L.BODY_FIXED_LEN
cdef Py_ssize_t MARKER_TAG_LEN = L.MARKER_TAG_LEN
cdef Py_ssize_t MARKER_LEN = L.MARKER_LEN
cdef Py_ssize_t UNIQUE_ID_LEN = L.UNIQUE_ID_LEN
cdef Py_ssize_t MAX_PACKET_LEN = L.MAX_PACKET_LEN
cdef Py_ssize_t RECV_BUFFER_LEN = L.RECV_BUFFER_LEN
cdef Py_ssize_t EMPTY_PACKET_LEN = L.EMPTY_PACKET_LEN
cdef Py_ssize_t FRAME_OVERHEAD = L.FRAME_OVERHEAD
cdef int HOST_LEN_IPV4 = L.HOST_LEN_IPV4
cdef int HOST_LEN_IPV6 = L.HOST_LEN_IPV6
cdef int V_OK = L.OK
cdef int V_NOT_MEMBERSHIP = L.NOT_MEMBERSHIP
cdef int V_CHANNEL_FRAME = L.CHANNEL_FRAME
cdef int V_TRUNCATED = L.TRUNCATED
cdef int V_BAD_VERSION = L.BAD_VERSION
cdef int V_BAD_BODY_LENGTH = L.BAD_BODY_LENGTH
cdef int V_BAD_END_MARKER = L.BAD_END_MARKER
cdef int V_BAD_HOST_LENGTH = L.BAD_HOST_LENGTH
cdef int V_FIELD_OVERRUN = L.FIELD_OVERRUN
cdef int V_LENGTH_MISMATCH = L.LENGTH_MISMATCH
cdef int V_OVERSIZED = L.OVERSIZED
cdef int V_DOCTOR_PROBE = L.DOCTOR_PROBE
cdef uint8_t KIND_FREE = L.KIND_FREE
cdef uint8_t KIND_MEMBER = L.KIND_MEMBER
cdef uint8_t KIND_LAST = max(L.KIND_MEMBER, L.KIND_LOCAL, L.KIND_FILTERED)
cdef Py_ssize_t AUTH_HEADER_LEN = L.AUTH_HEADER_LEN
cdef Py_ssize_t AUTH_MAC_LEN = L.AUTH_MAC_LEN
cdef Py_ssize_t AUTH_TRAILER_LEN = L.AUTH_TRAILER_LEN
cdef Py_ssize_t AUTH_KEY_LEN = L.AUTH_KEY_LEN
cdef Py_ssize_t AUTH_MAGIC_LEN = len(L.AUTH_MAGIC)
cdef int AUTH_VERSION = L.AUTH_VERSION
cdef int A_OK = L.AUTH_OK
cdef int A_NO_TRAILER = L.AUTH_NO_TRAILER
cdef int A_BAD_TRAILER = L.AUTH_BAD_TRAILER
cdef int A_UNKNOWN_KEY = L.AUTH_UNKNOWN_KEY
cdef int A_BAD_MAC = L.AUTH_BAD_MAC
cdef int A_REPLAY = L.AUTH_REPLAY
cdef int AUTH_OFF = L.AUTH_OFF
cdef int AUTH_ENFORCE = L.AUTH_ENFORCE
cdef int INDEX_DROPPED = L.INDEX_DROPPED
# What the index does with a known member's datagram once its trailer is judged.
cdef enum:
    ADMIT = 0       # heard: refresh it here
    DROP = 1        # not authentic (enforce) or a replay: counted, dropped
    SLOW = 2        # its authenticated status changes: Python must see it

cdef bytes _BEGIN = L.BEGIN_MARKER
cdef bytes _END = L.END_MARKER
cdef bytes _CHANNEL_TAG = L.CHANNEL_FRAME_TAG
cdef const unsigned char* BEGIN = _BEGIN
cdef const unsigned char* END = _END
cdef const unsigned char* CHANNEL_TAG = _CHANNEL_TAG
cdef bytes _AUTH_MAGIC = L.AUTH_MAGIC
cdef const unsigned char* AUTH_MAGIC = _AUTH_MAGIC
cdef Py_ssize_t CHANNEL_TAG_LEN = len(L.CHANNEL_FRAME_TAG)
cdef bytes _DOCTOR_TAG = L.DOCTOR_DATAGRAM_TAG
cdef const unsigned char* DOCTOR_TAG = _DOCTOR_TAG
cdef Py_ssize_t DOCTOR_TAG_LEN = len(L.DOCTOR_DATAGRAM_TAG)


cdef inline int32_t _get32(const unsigned char* p) noexcept nogil:
    return <int32_t>((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16)
                     | (<uint32_t>p[2] << 8) | <uint32_t>p[3])


cdef inline int64_t _get64(const unsigned char* p) noexcept nogil:
    cdef uint64_t v = 0
    cdef int i
    for i in range(8):
        v = (v << 8) | p[i]
    return <int64_t>v


cdef inline void _put32(unsigned char* p, int32_t value) noexcept nogil:
    cdef uint32_t v = <uint32_t>value
    p[0] = (v >> 24) & 0xff
    p[1] = (v >> 16) & 0xff
    p[2] = (v >> 8) & 0xff
    p[3] = v & 0xff


cdef inline void _put64(unsigned char* p, int64_t value) noexcept nogil:
    cdef uint64_t v = <uint64_t>value
    cdef int i
    for i in range(7, -1, -1):
        p[i] = v & 0xff
        v >>= 8


cdef struct Offsets:
    Py_ssize_t host, command, domain, unique_id, payload


cdef int _scan(const unsigned char* p, Py_ssize_t n, Offsets* out) noexcept nogil:
    """Validation in the same order as _fast_py._scan; fills ``out`` when OK."""
    cdef int64_t body_len, end, pos, flen
    cdef int host_len, i
    if n > MAX_PACKET_LEN:
        return V_OVERSIZED
    if n < MARKER_TAG_LEN or memcmp(p, BEGIN, MARKER_TAG_LEN) != 0:
        if n >= CHANNEL_TAG_LEN and memcmp(p, CHANNEL_TAG, CHANNEL_TAG_LEN) == 0:
            return V_CHANNEL_FRAME
        if n >= DOCTOR_TAG_LEN and memcmp(p, DOCTOR_TAG, DOCTOR_TAG_LEN) == 0:
            return V_DOCTOR_PROBE
        return V_NOT_MEMBERSHIP
    if n < MARKER_LEN:
        return V_TRUNCATED
    if memcmp(p + MARKER_TAG_LEN, BEGIN + MARKER_TAG_LEN, MARKER_LEN - MARKER_TAG_LEN) != 0:
        return V_BAD_VERSION
    if n < BODY_START:
        return V_TRUNCATED
    body_len = _get32(p + OFF_BODY_LEN)
    if body_len < 0:
        return V_BAD_BODY_LENGTH
    end = BODY_START + body_len
    if n < end + MARKER_LEN:
        return V_TRUNCATED
    if memcmp(p + end, END, MARKER_TAG_LEN) != 0:
        return V_BAD_END_MARKER
    if memcmp(p + end + MARKER_TAG_LEN, END + MARKER_TAG_LEN, MARKER_LEN - MARKER_TAG_LEN) != 0:
        return V_BAD_VERSION
    if body_len < BODY_FIXED_LEN:
        return V_FIELD_OVERRUN
    host_len = <signed char>p[OFF_HOST_LEN]
    if host_len != HOST_LEN_IPV4 and host_len != HOST_LEN_IPV6:
        return V_BAD_HOST_LENGTH
    out.host = OFF_HOST
    pos = OFF_HOST + host_len
    for i in range(2):          # command, then domain
        if pos + 4 > end:
            return V_FIELD_OVERRUN
        flen = _get32(p + pos)
        pos += 4
        if flen < 0 or flen > end - pos:
            return V_FIELD_OVERRUN
        if i == 0:
            out.command = pos
        else:
            out.domain = pos
        pos += flen
    if pos + UNIQUE_ID_LEN > end:
        return V_FIELD_OVERRUN
    out.unique_id = pos
    pos += UNIQUE_ID_LEN
    if pos + 4 > end:
        return V_FIELD_OVERRUN
    flen = _get32(p + pos)
    pos += 4
    if flen < 0 or flen > end - pos:
        return V_FIELD_OVERRUN
    out.payload = pos
    pos += flen
    if pos != end:
        return V_LENGTH_MISMATCH
    return V_OK


cdef inline Py_ssize_t _clamp(Py_ssize_t n, Py_ssize_t size) noexcept nogil:
    if n < 0 or n > size:
        return size
    return n


def check(buf, Py_ssize_t n=-1):
    """Verdict for the first ``n`` bytes of ``buf`` (all of it by default):
    ``layout.OK`` or the reason code it is malformed."""
    cdef Py_buffer view
    cdef Offsets offs
    cdef int verdict
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        verdict = _scan(<const unsigned char*>view.buf, _clamp(n, view.len), &offs)
    finally:
        PyBuffer_Release(&view)
    return verdict


cdef int _require_ok(const unsigned char* p, Py_ssize_t n, Offsets* o) except -1:
    """Validate, raising MalformedPacket with the verdict when not well formed."""
    cdef int verdict = _scan(p, n, o)
    if verdict != V_OK:
        raise MalformedPacket(verdict)
    return 0


cdef inline bytes _field(const unsigned char* p, Py_ssize_t at):
    return PyBytes_FromStringAndSize(<const char*>p + at, _get32(p + at - 4))


def parse(buf, Py_ssize_t n=-1):
    """Fields of a well-formed packet as a tuple
    (alive, port, secure_port, udp_port, host, command, domain, unique_id, payload);
    raises MalformedPacket otherwise."""
    cdef Py_buffer view
    cdef Offsets o
    cdef int verdict
    cdef const unsigned char* p
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        p = <const unsigned char*>view.buf
        _require_ok(p, _clamp(n, view.len), &o)
        return (_get64(p + OFF_ALIVE), _get32(p + OFF_PORT), _get32(p + OFF_PORT + 4),
                _get32(p + OFF_PORT + 8),
                PyBytes_FromStringAndSize(<const char*>p + o.host, p[OFF_HOST_LEN]),
                _field(p, o.command), _field(p, o.domain),
                PyBytes_FromStringAndSize(<const char*>p + o.unique_id, UNIQUE_ID_LEN),
                _field(p, o.payload))
    finally:
        PyBuffer_Release(&view)


def identity(buf, Py_ssize_t n=-1):
    """The identity bytes of a well-formed packet (host + port + unique id, as
    ``Member.identity``) without parsing the rest; MalformedPacket otherwise."""
    cdef Py_buffer view
    cdef Offsets o
    cdef int verdict
    cdef Py_ssize_t host_len
    cdef const unsigned char* p
    cdef bytes out
    cdef unsigned char* q
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        p = <const unsigned char*>view.buf
        _require_ok(p, _clamp(n, view.len), &o)
        host_len = p[OFF_HOST_LEN]
        out = PyBytes_FromStringAndSize(NULL, host_len + 4 + UNIQUE_ID_LEN)
        q = <unsigned char*>PyBytes_AS_STRING(out)
        memcpy(q, p + o.host, host_len)
        memcpy(q + host_len, p + OFF_PORT, 4)
        memcpy(q + host_len + 4, p + o.unique_id, UNIQUE_ID_LEN)
        return out
    finally:
        PyBuffer_Release(&view)


cdef _check_int32(str name, object value):
    if not -2**31 <= value < 2**31:
        raise ValueError(f"{name} {value} does not fit a signed 32-bit field")


def encode(alive, port, secure_port, udp_port, host, command, domain, unique_id, payload):
    """The packet bytes for these fields; ValueError when a field cannot be encoded."""
    cdef bytes h = bytes(host), c = bytes(command), d = bytes(domain)
    cdef bytes u = bytes(unique_id), pl = bytes(payload)
    if len(h) != HOST_LEN_IPV4 and len(h) != HOST_LEN_IPV6:
        raise ValueError(f"host must be 4 (IPv4) or 16 (IPv6) bytes, not {len(h)}")
    if len(u) != UNIQUE_ID_LEN:
        raise ValueError(f"unique_id must be {UNIQUE_ID_LEN} bytes, not {len(u)}")
    if not -2**63 <= alive < 2**63:
        raise ValueError(f"alive time {alive} does not fit a signed 64-bit field")
    _check_int32("port", port)
    _check_int32("secure_port", secure_port)
    _check_int32("udp_port", udp_port)
    cdef Py_ssize_t total = EMPTY_PACKET_LEN + len(h) + len(c) + len(d) + len(pl)
    if total > MAX_PACKET_LEN:
        raise ValueError(f"packet would be {total} bytes; the limit is {MAX_PACKET_LEN}")
    cdef bytes out = PyBytes_FromStringAndSize(NULL, total)
    cdef unsigned char* p = <unsigned char*>PyBytes_AS_STRING(out)
    cdef Py_ssize_t pos
    memcpy(p, BEGIN, MARKER_LEN)
    _put32(p + OFF_BODY_LEN, <int32_t>(total - FRAME_OVERHEAD))
    _put64(p + OFF_ALIVE, <int64_t>alive)
    _put32(p + OFF_PORT, <int32_t>port)
    _put32(p + OFF_PORT + 4, <int32_t>secure_port)
    _put32(p + OFF_PORT + 8, <int32_t>udp_port)
    p[OFF_HOST_LEN] = <unsigned char>len(h)
    pos = OFF_HOST
    memcpy(p + pos, <const char*>h, len(h))
    pos += len(h)
    for field in (c, d):
        _put32(p + pos, <int32_t>len(<bytes>field))
        pos += 4
        memcpy(p + pos, <const char*><bytes>field, len(<bytes>field))
        pos += len(<bytes>field)
    memcpy(p + pos, <const char*>u, UNIQUE_ID_LEN)
    pos += UNIQUE_ID_LEN
    _put32(p + pos, <int32_t>len(pl))
    pos += 4
    memcpy(p + pos, <const char*>pl, len(pl))
    pos += len(pl)
    memcpy(p + pos, END, MARKER_LEN)
    return out


cdef inline int64_t _monotonic_ns() noexcept nogil:
    return <int64_t>mcm_monotonic_ns()


cdef class Targets:
    """Where unicast heartbeats go: peers' socket addresses, laid out once as
    the messages of one ``sendmmsg``, so that a fan-out to every peer is one
    system call per 1,024 peers, with no Python object per peer.

    ``peers`` is a sequence of ``(address bytes, port)`` (4 bytes IPv4, 16
    IPv6) or ``(address bytes, port, scope id)``; ``family`` the socket's
    (``socket.AF_INET`` or ``AF_INET6``; an IPv6 socket reaches IPv4 peers as
    IPv4-mapped addresses). ValueError for a peer the socket cannot reach.
    Immutable: a new peer set is a new Targets.
    """
    cdef mcm_mmsghdr* msgs
    cdef sockaddr_storage* names
    cdef iovec iov
    cdef readonly Py_ssize_t count
    cdef readonly int family
    cdef Py_ssize_t start          # where the next fan-out begins (see send_to)
    cdef tuple _peers
    cdef object _all               # count as an int made once: send_to's usual result

    def __cinit__(self, peers, int family):
        cdef Py_ssize_t i
        cdef bytes addr
        cdef int port
        cdef unsigned int scope
        peers = tuple(tuple(peer) for peer in peers)
        if family != AF_INET and family != AF_INET6:
            raise ValueError(f"family {family} is neither AF_INET nor AF_INET6")
        self.count = len(peers)
        self._all = self.count
        self.family = family
        self._peers = peers
        self.msgs = <mcm_mmsghdr*>calloc(self.count or 1, sizeof(mcm_mmsghdr))
        self.names = <sockaddr_storage*>calloc(self.count or 1, sizeof(sockaddr_storage))
        if self.msgs == NULL or self.names == NULL:
            raise MemoryError()
        for i in range(self.count):
            addr = bytes(peers[i][0])
            port = peers[i][1]
            scope = peers[i][2] if len(peers[i]) > 2 else 0
            if not 0 < port < 65536:
                raise ValueError(f"peer port {port} is out of range (1-65535)")
            if mcm_target(self.msgs, i, self.names, &self.iov, family, addr, len(addr),
                          port, scope) != 0:
                raise ValueError(f"peer address of {len(addr)} bytes cannot be reached "
                                 f"from a socket of family {family}")

    def __dealloc__(self):
        free(self.msgs)
        free(self.names)

    def __len__(self):
        return self.count

    @property
    def peers(self):
        return self._peers


cdef Py_ssize_t SEND_BATCH = 1024     # UIO_MAXIOV: sendmmsg sends at most this many


cdef ssize_t _fan_out(int fd, Targets targets, const unsigned char* data, Py_ssize_t length,
                      Py_ssize_t* sent) noexcept nogil:
    """Send ``data`` to every target, from ``targets.start`` round to it
    again. A peer the kernel refuses (no route to it, say) is skipped and
    the others still get theirs; a full socket buffer (EAGAIN) stops the
    round, and the next round begins at the first peer it did not reach, so
    that the same peers are not always the ones left out. Returns 0, or
    -errno of the last failure; ``sent`` gets the datagrams sent."""
    cdef Py_ssize_t n = targets.count, done = 0, at = targets.start, chunk
    cdef int got
    cdef ssize_t failure = 0
    targets.iov.iov_base = <void*>data
    targets.iov.iov_len = length
    while done < n:
        chunk = n - at
        if chunk > n - done:
            chunk = n - done
        if chunk > SEND_BATCH:
            chunk = SEND_BATCH
        got = mcm_send_batch(fd, targets.msgs + at, <unsigned int>chunk)
        if got < 0:
            failure = -errno
            if failure == -EAGAIN:
                break
            got = 1                    # skip the peer it failed on
        else:
            sent[0] += got
        done += got
        at = (at + got) % n
    targets.start = at if n else 0
    targets.iov.iov_base = NULL
    return failure


# -- the authentication trailer (wire/auth.py is the reference) -----------------
cdef inline Py_ssize_t _packet_end(const unsigned char* p, Py_ssize_t n) noexcept nogil:
    """Where the packet in ``p[:n]`` ends by its body length (it may lie
    past ``n``); -1 when there is no body length to read."""
    cdef int64_t body_len
    if n < BODY_START:
        return -1
    body_len = _get32(p + OFF_BODY_LEN)
    if body_len < 0:
        return -1
    return <Py_ssize_t>(BODY_START + body_len + MARKER_LEN)


cdef inline Py_ssize_t _packet_part(const unsigned char* p, Py_ssize_t n) noexcept nogil:
    """The bytes of a datagram the index compares: without the trailer when
    exactly a trailer's length follows the end marker, else all ``n``."""
    cdef Py_ssize_t end = _packet_end(p, n)
    if end >= 0 and n - end == AUTH_TRAILER_LEN:
        return end
    return n


cdef struct KeyTable:
    mcm_hmac_key keys[256]      # prepared keys by id
    uint8_t has[256]            # which ids the ring holds (never 0)


cdef int _verify(const KeyTable* ring, const unsigned char* p, Py_ssize_t n,
                 uint64_t* sequence) noexcept nogil:
    """``auth.check`` for the well-formed datagram ``p[:n]``: the verdict,
    and the sequence when it is AUTH_OK. MACs are compared in constant time."""
    cdef Py_ssize_t end = _packet_end(p, n)
    cdef const unsigned char* t
    cdef unsigned char tag[32]
    cdef int key_id
    if n == end:
        return A_NO_TRAILER
    if end < 0 or n - end != AUTH_TRAILER_LEN:
        return A_BAD_TRAILER
    t = p + end
    if memcmp(t, AUTH_MAGIC, AUTH_MAGIC_LEN) != 0 or t[AUTH_MAGIC_LEN] != AUTH_VERSION:
        return A_BAD_TRAILER
    key_id = t[AUTH_MAGIC_LEN + 1]
    if not ring.has[key_id]:
        return A_UNKNOWN_KEY
    mcm_hmac(&ring.keys[key_id], p, end + AUTH_HEADER_LEN, tag)
    if not mcm_equal_ct(tag, t + AUTH_HEADER_LEN, AUTH_MAC_LEN):
        return A_BAD_MAC
    sequence[0] = <uint64_t>_get64(t + AUTH_MAGIC_LEN + 2)
    return A_OK


cdef inline uint64_t _sign(const mcm_hmac_key* key, unsigned char* p, Py_ssize_t end,
                           uint64_t last) noexcept nogil:
    """Write the sequence (wall-clock microseconds, always above ``last``)
    and the MAC into the trailer header at ``p + end``; return the sequence."""
    cdef uint64_t sequence = mcm_wall_us()
    cdef unsigned char tag[32]
    if sequence <= last:
        sequence = last + 1
    _put64(p + end + AUTH_MAGIC_LEN + 2, <int64_t>sequence)
    mcm_hmac(key, p, end + AUTH_HEADER_LEN, tag)
    memcpy(p + end + AUTH_HEADER_LEN, tag, AUTH_MAC_LEN)
    return sequence


cdef int _prepare_key(mcm_hmac_key* out, secret) except -1:
    cdef Py_buffer view
    PyObject_GetBuffer(secret, &view, PyBUF_SIMPLE)
    try:
        if view.len != AUTH_KEY_LEN:
            raise ValueError(f"a key is {AUTH_KEY_LEN} bytes, not {view.len}")
        mcm_hmac_prepare(out, <const unsigned char*>view.buf, view.len)
    finally:
        PyBuffer_Release(&view)
    return 0


def _use_sha_extensions(bint wanted):
    """Compute SHA-256 with the CPU's SHA extensions when ``wanted`` and
    available (the default), else with portable C; returns which (tests
    check both against hashlib)."""
    return bool(mcm_sha_ni_use(wanted))


def _hmac_sha256(key, msg):
    """HMAC-SHA256 of ``msg`` under ``key`` (at most 64 bytes) as the hot
    path computes it: for tests against ``hmac``/``hashlib``."""
    cdef Py_buffer k, m
    cdef mcm_hmac_key prepared
    cdef unsigned char tag[32]
    PyObject_GetBuffer(key, &k, PyBUF_SIMPLE)
    try:
        if k.len > 64:
            raise ValueError("keys longer than a block are hashed first: not supported")
        mcm_hmac_prepare(&prepared, <const unsigned char*>k.buf, k.len)
    finally:
        PyBuffer_Release(&k)
    PyObject_GetBuffer(msg, &m, PyBUF_SIMPLE)
    try:
        mcm_hmac(&prepared, <const unsigned char*>m.buf, m.len, tag)
    finally:
        PyBuffer_Release(&m)
    return PyBytes_FromStringAndSize(<const char*>tag, 32)


cdef class HeartbeatPacket:
    """A serialized packet whose alive time is the only thing rewritten per send.

    The packet owns its bytes (copied once, when it is made; nothing can
    resize or replace them afterwards). ``buffer`` is a read-only view of
    them, to hand to ``socket.send``. ``stamp_now()`` writes the milliseconds
    since ``origin_ns`` (a ``time.monotonic_ns()`` reading; 0 while that lies
    in the future); when ``alive_cap`` is not negative, values past it wrap
    round to 0, so the alive time stays small yet still changes with every
    heartbeat; with ``below_zero`` the value written is ``-1 - alive``, so it
    is always negative (Tomcat sorts such a member after every Tomcat node).
    It allocates nothing.
    """
    cdef unsigned char* _data
    cdef Py_ssize_t _length
    cdef object _view
    cdef readonly int64_t origin_ns
    cdef readonly int64_t alive_cap
    cdef readonly bint below_zero
    cdef readonly uint64_t sent
    cdef readonly uint64_t errors
    # Authentication (set_key): the packet's own length, the key, the last sequence.
    cdef Py_ssize_t _packet_len
    cdef mcm_hmac_key _mac_key
    cdef readonly int key_id
    cdef readonly uint64_t sequence

    # Everything is set up here, not in __init__: there is no half-made
    # packet (HeartbeatPacket.__new__ needs the packet too), and calling
    # __init__ again changes nothing.
    def __cinit__(self, packet, origin_ns=None, int64_t alive_cap=-1, bint below_zero=False):
        cdef Py_buffer view
        cdef Offsets offs
        cdef int verdict
        cdef int64_t origin = _monotonic_ns() if origin_ns is None else origin_ns
        PyObject_GetBuffer(packet, &view, PyBUF_SIMPLE)
        try:
            verdict = _scan(<const unsigned char*>view.buf, view.len, &offs)
            if verdict != V_OK:
                raise MalformedPacket(verdict)
            # Room for a trailer from the start: set_key never moves the bytes.
            self._data = <unsigned char*>malloc(view.len + AUTH_TRAILER_LEN)
            if self._data == NULL:
                raise MemoryError()
            memcpy(self._data, view.buf, view.len)
            self._length = self._packet_len = view.len
        finally:
            PyBuffer_Release(&view)
        self.origin_ns = origin
        self.alive_cap = alive_cap
        self.below_zero = below_zero

    def __dealloc__(self):
        free(self._data)

    def __getbuffer__(self, Py_buffer* buffer, int flags):
        PyBuffer_FillInfo(buffer, self, self._data, self._length, 1, flags)   # read-only

    def __releasebuffer__(self, Py_buffer* buffer):
        pass

    @property
    def buffer(self):
        if self._view is None or len(self._view) != self._length:   # set_key changed it
            self._view = memoryview(self)
        return self._view

    def stamp(self, int64_t alive_ms):
        _put64(self._data + OFF_ALIVE, alive_ms)
        if self.key_id:
            self._sign_now()

    def set_key(self, int key_id, secret=None, uint64_t after=0):
        """Sign from now on: every stamp also writes the trailer after the
        packet (``buffer`` and what ``send`` sends grow by it), key id
        ``key_id`` (1-255) with ``secret`` (32 bytes), sequences above
        ``after`` (the last one of the packet this one replaces) and above
        every earlier one of this packet. ``key_id`` 0: unsigned again.
        ValueError for a bad key, or a packet with bytes after its end marker."""
        cdef unsigned char* t = self._data + self._packet_len
        if key_id == 0:
            self.key_id = 0
            self._length = self._packet_len
            return
        if not 1 <= key_id <= 255:
            raise ValueError(f"key id {key_id} is not 1-255")
        if _packet_end(self._data, self._packet_len) != self._packet_len:
            raise ValueError("the packet has bytes after its end marker: no room for a trailer")
        _prepare_key(&self._mac_key, secret)
        memcpy(t, AUTH_MAGIC, AUTH_MAGIC_LEN)
        t[AUTH_MAGIC_LEN] = AUTH_VERSION
        t[AUTH_MAGIC_LEN + 1] = key_id
        self.key_id = key_id
        if after > self.sequence:
            self.sequence = after
        self._length = self._packet_len + AUTH_TRAILER_LEN
        self._sign_now()

    cdef inline void _sign_now(self) noexcept nogil:
        self.sequence = _sign(&self._mac_key, self._data, self._packet_len, self.sequence)

    cdef inline void _stamp_now(self) noexcept nogil:
        cdef int64_t elapsed = _monotonic_ns() - self.origin_ns
        cdef int64_t alive = elapsed // 1000000 if elapsed > 0 else 0
        if 0 <= self.alive_cap < alive:
            alive = alive % (self.alive_cap + 1)
        if self.below_zero:
            alive = -1 - alive
        _put64(self._data + OFF_ALIVE, alive)
        if self.key_id:
            self._sign_now()

    def stamp_now(self):
        self._stamp_now()

    def send(self, int fd):
        """Stamp the alive time and send the packet on the connected socket
        ``fd``: one system call, no Python objects. Returns the bytes sent or
        -errno; counts into ``sent`` and ``errors``."""
        cdef ssize_t n
        with nogil:
            self._stamp_now()
            n = send(fd, self._data, self._length, 0)
            if n < 0:
                n = -errno
        if n < 0:
            self.errors += 1
        else:
            self.sent += 1
        return n

    def send_to(self, int fd, Targets targets):
        """Stamp the alive time once and send the packet to every peer of
        ``targets`` from the unconnected socket ``fd`` (sendmmsg). Returns
        the datagrams sent when every peer got one, else -errno of the last
        failure (see ``_fan_out``); counts each datagram into ``sent`` and
        each failed round into ``errors``. Allocates nothing when every peer
        got one (past 256 peers, a new int would be)."""
        cdef Py_ssize_t sent = 0
        cdef ssize_t failure
        with nogil:
            self._stamp_now()
            failure = _fan_out(fd, targets, self._data, self._length, &sent)
        self.sent += sent
        if failure < 0:
            self.errors += 1
            return failure
        return targets._all if sent == targets.count else sent

    @property
    def alive_ms(self):
        return _get64(self._data + OFF_ALIVE)


cdef inline uint64_t _load64(const unsigned char* p) noexcept nogil:
    cdef uint64_t v
    memcpy(&v, p, 8)
    return v


# Per-process seed of the table hash, so that nobody can work out in advance
# which forged identities land in one probe cluster (the twin's dict is keyed
# by Python's own per-process SipHash).
cdef uint64_t HASH_SEED = int.from_bytes(__import__("os").urandom(8), "little")


cdef uint64_t _hash_tail(const unsigned char* p, Py_ssize_t n) noexcept nogil:
    """A fast, seeded 64-bit mix of the packet after the alive field (which
    holds the identity and every field that can change); not cryptographic,
    collisions are settled by comparing bytes."""
    cdef uint64_t h = HASH_SEED ^ 0x9E3779B97F4A7C15ULL ^ <uint64_t>n
    cdef uint64_t w
    while n >= 8:
        h = (h ^ _load64(p)) * 0xff51afd7ed558ccdULL
        h ^= h >> 32
        p += 8
        n -= 8
    if n > 0:
        w = 0
        memcpy(&w, p, n)
        h = (h ^ w) * 0xc4ceb9fe1a85ec53ULL
    h ^= h >> 29
    return h


def _key_hash(buf):
    """The hash the index files ``buf`` under (for tests: it is seeded per process)."""
    cdef Py_buffer view
    cdef uint64_t h
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        if view.len < OFF_PORT:
            raise ValueError("shorter than the fixed header")
        h = _hash_tail(<const unsigned char*>view.buf + OFF_PORT, view.len - OFF_PORT)
    finally:
        PyBuffer_Release(&view)
    return h


cdef inline bint _from_host(mcm_mmsghdr* v, int i, const unsigned char* p) noexcept nogil:
    """Whether batch slot ``i`` came from the address its packet ``p`` (one
    that matched a stored packet, so well formed) advertises as its host."""
    cdef unsigned char addr[16]
    cdef int port = 0
    cdef int length = mcm_source(v, i, addr, &port)
    return length != 0 and length == p[OFF_HOST_LEN] and memcmp(addr, p + OFF_HOST, length) == 0


cdef class MemberIndex:
    """Recognises packets already seen, alive field aside, and keeps entries in
    the order they were last heard so that expiry pops from the front.

    An open-addressing table (linear probing, backward-shift deletion) of slot
    numbers keyed by a hash of the packet after the alive field; per-slot C
    arrays hold a copy of the packet, its hash, when it was last heard, its
    alive time, its kind and its links in the doubly linked expiry list.

    ``pump`` runs without the GIL: while it does (``busy``), every other call
    that changes the index raises RuntimeError instead of racing it.
    """
    cdef readonly Py_ssize_t capacity
    # Datagrams recognised (refreshed here), by the kind of their slot:
    # one indexed increment per datagram, no branch on the kind.
    cdef uint64_t hits_of[4]
    cdef readonly bint busy
    cdef uint64_t dropped_by_verdict[16]    # datagrams pump dropped, by verdict
    cdef Py_ssize_t count, mask
    cdef int32_t* table
    cdef uint64_t* hashes
    cdef unsigned char** keys
    cdef Py_ssize_t* key_lens
    cdef double* heard_at
    cdef int64_t* alive_ms
    # Arrival statistics per slot (phi accrual), kept once set_phi() is called.
    cdef uint32_t* arrivals
    cdef double* interval_mean
    cdef double* interval_var
    cdef bint phi_on
    cdef double phi_y, phi_pause, phi_min_std, phi_first
    cdef uint32_t phi_window
    cdef uint8_t* kinds
    cdef int32_t* prev
    cdef int32_t* next
    cdef int32_t head, tail, free_head
    # recvmmsg batch: datagrams read but not yet handled wait for the next
    # pump on the same socket (batch_dev/batch_ino say which), and are dropped
    # by clear() or when pump is handed another socket.
    cdef unsigned char* batch_mem
    cdef mcm_mmsghdr* batch_msgs
    cdef iovec* batch_iov
    cdef sockaddr_storage* batch_names
    cdef int batch_count, batch_next, batch_fd
    cdef int returned              # batch slot of the datagram pump last returned, or -1
    cdef unsigned long long batch_dev, batch_ino
    # Authentication (set_keys): the mode, the prepared keys, per slot the
    # last sequence accepted and whether it is authenticated (1), not (0) or
    # not known (2: added while off, or not set yet); failures by verdict.
    cdef int auth_mode
    cdef KeyTable* ring
    cdef uint64_t* seqs
    cdef uint8_t* authed
    cdef uint64_t auth_counts[8]

    def __cinit__(self, Py_ssize_t capacity):
        cdef Py_ssize_t size = 8
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        if capacity > 2**30:
            raise ValueError("capacity too large")
        while size < capacity * 2:
            size *= 2
        self.capacity = capacity
        self.mask = size - 1
        self.table = <int32_t*>malloc(size * sizeof(int32_t))
        self.hashes = <uint64_t*>calloc(capacity, sizeof(uint64_t))
        self.keys = <unsigned char**>calloc(capacity, sizeof(unsigned char*))
        self.key_lens = <Py_ssize_t*>calloc(capacity, sizeof(Py_ssize_t))
        self.heard_at = <double*>calloc(capacity, sizeof(double))
        self.alive_ms = <int64_t*>calloc(capacity, sizeof(int64_t))
        self.arrivals = <uint32_t*>calloc(capacity, sizeof(uint32_t))
        self.interval_mean = <double*>calloc(capacity, sizeof(double))
        self.interval_var = <double*>calloc(capacity, sizeof(double))
        self.kinds = <uint8_t*>calloc(capacity, sizeof(uint8_t))
        self.prev = <int32_t*>calloc(capacity, sizeof(int32_t))
        self.next = <int32_t*>calloc(capacity, sizeof(int32_t))
        if not (self.table and self.hashes and self.keys and self.key_lens and self.heard_at
                and self.alive_ms and self.kinds and self.prev and self.next and self.arrivals
                and self.interval_mean and self.interval_var):
            raise MemoryError()
        self.seqs = <uint64_t*>calloc(capacity, sizeof(uint64_t))
        self.authed = <uint8_t*>calloc(capacity, sizeof(uint8_t))
        if not (self.seqs and self.authed):
            raise MemoryError()
        self._reset()

    cdef void _reset(self) noexcept nogil:
        """Empty: no entries, slots handed out lowest first, no batch."""
        cdef Py_ssize_t i
        for i in range(self.mask + 1):
            self.table[i] = -1
        for i in range(self.capacity):
            free(self.keys[i])
            self.keys[i] = NULL
            self.kinds[i] = KIND_FREE
            # Free list through ``next``.
            self.next[i] = i + 1 if i + 1 < self.capacity else -1
        self.free_head = 0
        self.head = self.tail = -1
        self.count = 0
        self.batch_count = self.batch_next = 0
        self.returned = -1

    def __dealloc__(self):
        cdef Py_ssize_t i
        if self.keys:
            for i in range(self.capacity):
                free(self.keys[i])
        free(self.batch_mem); free(self.batch_msgs); free(self.batch_iov); free(self.batch_names)
        free(self.table); free(self.hashes); free(self.keys); free(self.key_lens)
        free(self.heard_at); free(self.alive_ms); free(self.kinds); free(self.prev)
        free(self.next); free(self.arrivals); free(self.interval_mean); free(self.interval_var)
        free(self.ring); free(self.seqs); free(self.authed)

    def __len__(self):
        return self.count

    @property
    def hits(self):
        """Datagrams recognised, whatever their kind (see hits_by_kind)."""
        return self.hits_of[1] + self.hits_of[2] + self.hits_of[3]

    def hits_by_kind(self):
        """{kind: count} of the datagrams recognised (by lookup and pump), by
        the kind their slot was added with; kinds never hit are left out."""
        return {k: self.hits_of[k] for k in range(1, KIND_LAST + 1) if self.hits_of[k]}

    cdef inline int _writable(self) except -1:
        if self.busy:
            raise RuntimeError("MemberIndex is in use by pump() (on another thread)")
        return 0

    # -- expiry list -------------------------------------------------------
    cdef inline void _unlink(self, int32_t s) noexcept nogil:
        if self.prev[s] >= 0:
            self.next[self.prev[s]] = self.next[s]
        else:
            self.head = self.next[s]
        if self.next[s] >= 0:
            self.prev[self.next[s]] = self.prev[s]
        else:
            self.tail = self.prev[s]

    cdef inline void _append(self, int32_t s) noexcept nogil:
        self.prev[s] = self.tail
        self.next[s] = -1
        if self.tail >= 0:
            self.next[self.tail] = s
        else:
            self.head = s
        self.tail = s

    cdef inline void _touch(self, int32_t s, const unsigned char* p, double now) noexcept nogil:
        if self.phi_on and self.arrivals[s]:
            self._arrival(s, now - self.heard_at[s])
        self.heard_at[s] = now
        self.alive_ms[s] = _get64(p + OFF_ALIVE)
        if self.tail != s:
            self._unlink(s)
            self._append(s)

    # -- hash table --------------------------------------------------------
    cdef int32_t _find(self, const unsigned char* p, Py_ssize_t n, uint64_t h) noexcept nogil:
        cdef Py_ssize_t i = h & self.mask
        cdef int32_t s
        while True:
            s = self.table[i]
            if s < 0:
                return -1
            if (self.hashes[s] == h and self.key_lens[s] == n
                    and memcmp(self.keys[s] + OFF_PORT, p + OFF_PORT, n - OFF_PORT) == 0
                    and memcmp(self.keys[s], p, OFF_ALIVE) == 0):
                return s
            i = (i + 1) & self.mask

    cdef void _table_insert(self, int32_t s) noexcept nogil:
        cdef Py_ssize_t i = self.hashes[s] & self.mask
        while self.table[i] >= 0:
            i = (i + 1) & self.mask
        self.table[i] = s

    cdef void _table_delete(self, int32_t s) noexcept nogil:
        cdef Py_ssize_t i = self.hashes[s] & self.mask, j, k
        while self.table[i] != s:
            if self.table[i] < 0:
                return          # not in the table: nothing to delete (never loop)
            i = (i + 1) & self.mask
        j = i
        while True:
            j = (j + 1) & self.mask
            if self.table[j] < 0:
                break
            k = self.hashes[self.table[j]] & self.mask
            # Move the entry at j back to the hole at i unless its home k lies
            # cyclically in (i, j].
            if (i <= j and (k <= i or k > j)) or (i > j and (k <= i and k > j)):
                self.table[i] = self.table[j]
                i = j
        self.table[i] = -1

    cdef unsigned char* _copy_packet(self, buf, Py_ssize_t n, Py_buffer* view) except NULL:
        """Check ``buf[:n]`` (n = -1: all of it) is one well-formed packet and
        return a malloc'd copy, before anything in the index is changed."""
        cdef Offsets offs
        cdef int verdict
        cdef unsigned char* copy
        PyObject_GetBuffer(buf, view, PyBUF_SIMPLE)
        try:
            if n < 0:
                n = view.len
            elif n > view.len:
                raise ValueError(f"n = {n} is past the end of a {view.len}-byte buffer")
            verdict = _scan(<const unsigned char*>view.buf, n, &offs)
            if verdict != V_OK:
                raise MalformedPacket(verdict)
            copy = <unsigned char*>malloc(n)
            if copy == NULL:
                raise MemoryError()
            memcpy(copy, view.buf, n)
            view.len = n
        except BaseException:
            PyBuffer_Release(view)
            raise
        return copy

    cdef void _set_key(self, int32_t s, unsigned char* copy, Py_ssize_t n) noexcept nogil:
        free(self.keys[s])
        self.keys[s] = copy
        self.key_lens[s] = n
        self.hashes[s] = _hash_tail(copy + OFF_PORT, n - OFF_PORT)

    # -- public API --------------------------------------------------------
    cpdef int lookup(self, buf, Py_ssize_t n, double now) except -2:
        """If ``buf[:n]`` equals a stored packet but for the alive time, mark it
        heard at ``now`` and return its kind; otherwise return -1. A trailer
        (exactly its length after the end marker) is not compared; under
        ``set_keys`` it is judged for members: INDEX_DROPPED when the
        datagram is refused, -1 when its authenticated status changes."""
        cdef Py_buffer view
        cdef int32_t s
        cdef const unsigned char* p
        cdef Py_ssize_t m
        cdef int action, result
        self._writable()
        PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
        p = <const unsigned char*>view.buf
        n = _clamp(n, view.len)
        if n < OFF_PORT:
            PyBuffer_Release(&view)
            return -1
        m = _packet_part(p, n)
        s = self._find(p, m, _hash_tail(p + OFF_PORT, m - OFF_PORT))
        result = -1
        if s >= 0:
            action = self._admit(s, p, n)
            if action == ADMIT:
                self._touch(s, p, now)
                result = self.kinds[s]
                self.hits_of[result] += 1
            elif action == DROP:
                result = INDEX_DROPPED
        PyBuffer_Release(&view)
        return result

    cdef int _ensure_batch(self) except -1:
        if self.batch_mem != NULL:
            return 0
        self.batch_mem = <unsigned char*>malloc(<size_t>MCM_BATCH * MCM_SLOT)
        self.batch_msgs = <mcm_mmsghdr*>malloc(MCM_BATCH * sizeof(mcm_mmsghdr))
        self.batch_iov = <iovec*>malloc(MCM_BATCH * sizeof(iovec))
        self.batch_names = <sockaddr_storage*>malloc(MCM_BATCH * sizeof(sockaddr_storage))
        if (self.batch_mem == NULL or self.batch_msgs == NULL or self.batch_iov == NULL
                or self.batch_names == NULL):
            raise MemoryError()
        mcm_batch_setup(self.batch_msgs, self.batch_iov, self.batch_mem, self.batch_names)
        return 0

    cdef void _keep_batch_only_for(self, int fd) noexcept nogil:
        """Drop what is left of the batch unless ``fd`` is the socket it was read from."""
        cdef unsigned long long dev, ino
        if self.batch_next >= self.batch_count:
            return
        if (fd != self.batch_fd or mcm_socket_id(fd, &dev, &ino) != 0
                or dev != self.batch_dev or ino != self.batch_ino):
            self.batch_count = self.batch_next = 0

    def pending(self):
        """Datagrams already read from the socket (in a batch) but not yet handled."""
        return self.batch_count - self.batch_next

    def source(self):
        """``(address bytes, port)`` of the sender of the datagram ``pump``
        last returned (4 address bytes for IPv4, an IPv4-mapped sender
        included; 16 for IPv6), or None: not from an IP socket, or nothing
        returned since the batch was dropped."""
        cdef unsigned char addr[16]
        cdef int port = 0, length
        if self.returned < 0 or self.batch_msgs == NULL:
            return None
        length = mcm_source(self.batch_msgs, self.returned, addr, &port)
        if length == 0:
            return None
        return (addr[:length], port)

    def pump(self, int fd, buf, double deadline, Py_ssize_t budget=-1, bint sources=False):
        """Receive datagrams from ``fd`` and recognise known ones, all without
        the GIL, until a well-formed unknown one needs the slow path: then copy
        it into ``buf`` and return its length. ``buf`` must hold
        ``RECV_BUFFER_LEN`` bytes (ValueError otherwise), so that every
        datagram fits. Malformed and foreign datagrams (an empty one too) are
        counted (``dropped()``) and skipped. Datagrams are read up to 32 per
        system call (recvmmsg); those not handled yet wait for the next call
        on the same socket (``pending()``). Return -EAGAIN when the socket
        has nothing (non-blocking or SO_RCVTIMEO), when a datagram arrives at
        or after ``deadline`` (a monotonic time, seconds), or after ``budget``
        datagrams (-1: no limit); -ESHUTDOWN at once when the socket was shut
        down for reading (it would read 0 bytes forever); other failures
        return -errno. A datagram counts as heard when the system call that
        read it returned. With ``sources`` each datagram's sender is kept, for
        ``source()`` (the unicast socket's admission needs it; without, the
        kernel copies no addresses, about 8% of the receive loop), and a
        known member's datagram from another address than its advertised
        host is returned too, for the caller to admit or refuse."""
        cdef Py_buffer view
        cdef ssize_t n
        cdef int32_t s
        cdef int verdict, got, i
        cdef Offsets offs
        cdef double now
        cdef const unsigned char* q
        cdef Py_ssize_t m
        cdef int action
        self._writable()
        self._ensure_batch()
        PyObject_GetBuffer(buf, &view, PyBUF_WRITABLE)
        if view.len < RECV_BUFFER_LEN:
            PyBuffer_Release(&view)
            raise ValueError(f"pump needs a buffer of at least {RECV_BUFFER_LEN} bytes, "
                             f"not {view.len}")
        self.busy = True
        self.returned = -1
        try:
            with nogil:
                self._keep_batch_only_for(fd)
                # One clock read per system call, not per datagram: the
                # datagrams of one batch were all read at that moment.
                now = <double>_monotonic_ns() / 1e9
                while True:
                    if budget == 0:
                        n = -EAGAIN
                        break
                    if self.batch_next >= self.batch_count:
                        got = mcm_recv_batch(fd, self.batch_msgs, MCM_BATCH,
                                             self.batch_names if sources else NULL)
                        if got <= 0:
                            n = -errno if got < 0 else -EAGAIN
                            break
                        self.batch_count = got
                        self.batch_next = 0
                        now = <double>_monotonic_ns() / 1e9
                    i = self.batch_next
                    self.batch_next += 1
                    q = self.batch_mem + <size_t>i * MCM_SLOT
                    n = self.batch_msgs[i].msg_len
                    if mcm_truncated(self.batch_msgs, i):
                        n = MCM_SLOT + 1       # larger than any packet: oversized
                    elif n == 0 and mcm_read_shut(fd):
                        n = -ESHUTDOWN         # not a datagram: end of input
                        break
                    if budget > 0:
                        budget -= 1
                    s = -1
                    if OFF_PORT <= n <= MAX_PACKET_LEN:
                        m = _packet_part(q, n)
                        s = self._find(q, m, _hash_tail(q + OFF_PORT, m - OFF_PORT))
                    if s >= 0 and sources and not _from_host(self.batch_msgs, i, q):
                        # A known member's bytes from another address than
                        # the one it advertises: whether that sender may
                        # speak for it is the caller's to decide.
                        memcpy(view.buf, q, n)
                        self.returned = i
                        break
                    if s >= 0:
                        action = self._admit(s, q, n)
                        if action == ADMIT:
                            self._touch(s, q, now)
                            self.hits_of[self.kinds[s]] += 1
                        elif action == SLOW:    # authenticated or not, newly: Python
                            memcpy(view.buf, q, n)
                            self.returned = i
                            break
                    else:
                        # Malformed and foreign datagrams are counted and
                        # dropped here, so a flood of them never reaches Python.
                        verdict = _scan(q, n, &offs)
                        if verdict == V_OK:    # well formed but unknown: the slow path
                            memcpy(view.buf, q, n)
                            self.returned = i
                            break
                        self.dropped_by_verdict[verdict] += 1
                    if now >= deadline:
                        n = -EAGAIN
                        break
                if self.batch_next < self.batch_count:
                    # Left for the next pump: remember which socket it came from.
                    self.batch_fd = fd
                    if mcm_socket_id(fd, &self.batch_dev, &self.batch_ino) != 0:
                        self.batch_count = self.batch_next = 0
        finally:
            self.busy = False
            PyBuffer_Release(&view)
        return n

    cdef int _admit(self, int32_t s, const unsigned char* p, Py_ssize_t n) noexcept nogil:
        """ADMIT, DROP or SLOW for the datagram ``p[:n]`` that matched slot
        ``s``; the same decision as ``_fast_py.MemberIndex._admit``."""
        cdef uint64_t sequence = 0
        cdef int verdict, ok
        if self.auth_mode == AUTH_OFF or self.kinds[s] != KIND_MEMBER:
            return ADMIT
        verdict = _verify(self.ring, p, n, &sequence)
        if verdict == A_OK and sequence <= self.seqs[s]:
            verdict = A_REPLAY
        if verdict == A_REPLAY or (verdict != A_OK and self.auth_mode == AUTH_ENFORCE):
            self.auth_counts[verdict] += 1
            return DROP
        ok = verdict == A_OK
        if ok != self.authed[s]:
            return SLOW
        if ok:
            self.seqs[s] = sequence
        else:
            self.auth_counts[verdict] += 1
        return ADMIT

    def set_keys(self, int mode, keys=None):
        """Judge members' trailers from now on: ``mode`` is layout.AUTH_OFF,
        AUTH_PERMISSIVE or AUTH_ENFORCE; ``keys`` maps key ids (1-255) to
        32-byte secrets (needed unless off). Entries keep their sequence and
        status: a rotation forgets nothing."""
        cdef KeyTable* ring = NULL
        self._writable()
        if mode not in L.AUTH_MODES.values():
            raise ValueError(f"unknown authentication mode {mode}")
        if mode != AUTH_OFF:
            if not keys:
                raise ValueError("authentication needs at least one key")
            ring = <KeyTable*>calloc(1, sizeof(KeyTable))
            if ring == NULL:
                raise MemoryError()
            try:
                for key_id, secret in keys.items():
                    if not 1 <= key_id <= 255:
                        raise ValueError(f"key id {key_id} is not 1-255")
                    _prepare_key(&ring.keys[<int>key_id], secret)
                    ring.has[<int>key_id] = 1
            except BaseException:
                free(ring)
                raise
        free(self.ring)
        self.ring = ring
        self.auth_mode = mode

    def set_auth(self, int32_t slot, authenticated, uint64_t sequence):
        """What the slow path decided for the member in ``slot``: its status
        (True, False, None: not known) and the last sequence accepted."""
        self._writable()
        self._check_slot(slot)
        self.authed[slot] = 2 if authenticated is None else (1 if authenticated else 0)
        self.seqs[slot] = sequence

    def sequence(self, int32_t slot):
        """The last sequence accepted for ``slot`` (kept after it is freed, until reused)."""
        if slot < 0 or slot >= self.capacity:
            raise KeyError(slot)
        return self.seqs[slot]

    def auth_failures(self):
        """{auth verdict: count} of members' datagrams whose trailer failed
        here: dropped (enforce; replays in any mode) or admitted as
        unauthenticated (permissive)."""
        return {v: self.auth_counts[v] for v in range(1, 8) if self.auth_counts[v]}

    def dropped(self):
        """{verdict: count} of the datagrams ``pump`` dropped as malformed or foreign."""
        return {v: self.dropped_by_verdict[v] for v in range(1, 16) if self.dropped_by_verdict[v]}

    def add(self, buf, Py_ssize_t n, double now, int kind):
        """Store the well-formed packet ``buf[:n]`` (n = -1: all of ``buf``);
        return its slot, or -1 when full. MalformedPacket when it is not one
        packet, ValueError when ``n`` is past the end of ``buf`` or ``kind``
        is not KIND_MEMBER, KIND_LOCAL or KIND_FILTERED."""
        cdef Py_buffer view
        cdef int32_t s = self.free_head
        cdef unsigned char* copy
        self._writable()
        if not KIND_MEMBER <= kind <= KIND_LAST:
            raise ValueError(f"unknown kind {kind}")
        if s < 0:
            return -1
        copy = self._copy_packet(buf, n, &view)
        self._set_key(s, copy, view.len)
        self.free_head = self.next[s]
        self.kinds[s] = kind
        self.seqs[s] = 0
        self.authed[s] = 2
        self.count += 1
        self._table_insert(s)
        self._append(s)
        self.arrivals[s] = 0
        self._touch(s, copy, now)
        if self.phi_on:            # one sample, the expected period, to begin with
            self.arrivals[s] = 1
            self.interval_mean[s] = self.phi_first
            self.interval_var[s] = (self.phi_first / 4) * (self.phi_first / 4)
        PyBuffer_Release(&view)
        return s

    def replace(self, int32_t slot, buf, Py_ssize_t n, double now):
        """The member in ``slot`` sent a different packet: store it instead
        (checked as ``add`` does, before the old one is let go)."""
        cdef Py_buffer view
        cdef unsigned char* copy
        self._writable()
        self._check_slot(slot)
        copy = self._copy_packet(buf, n, &view)
        self._table_delete(slot)
        self._set_key(slot, copy, view.len)
        self._table_insert(slot)
        self._touch(slot, copy, now)
        PyBuffer_Release(&view)

    cdef _check_slot(self, int32_t slot):
        if slot < 0 or slot >= self.capacity or self.kinds[slot] == KIND_FREE:
            raise KeyError(slot)

    cdef void _remove(self, int32_t s) noexcept nogil:
        self._table_delete(s)
        self._unlink(s)
        free(self.keys[s])
        self.keys[s] = NULL
        self.kinds[s] = KIND_FREE
        self.next[s] = self.free_head
        self.free_head = s
        self.count -= 1

    def remove(self, int32_t slot):
        self._writable()
        if slot < 0 or slot >= self.capacity or self.kinds[slot] == KIND_FREE:
            return
        self._remove(slot)

    def clear(self):
        """Forget every entry and the datagrams of a batch not handled yet, so
        that nothing read before is replayed after (the counters stay)."""
        self._writable()
        self._reset()

    def expire(self, double deadline):
        """Remove every entry last heard before ``deadline``, oldest first, and
        return their slots (an empty tuple when none); ValueError for NaN."""
        cdef int32_t s
        self._writable()
        if deadline != deadline:
            raise ValueError("expire deadline is NaN")
        if self.head < 0 or self.heard_at[self.head] >= deadline:
            return ()
        expired = []
        while self.head >= 0 and self.heard_at[self.head] < deadline:
            s = self.head
            expired.append(s)
            self._remove(s)
        return expired

    # -- adaptive expiry (phi accrual) ----------------------------------------
    def set_phi(self, double y, double pause, double min_std, double first_mean,
                Py_ssize_t window):
        """Keep arrival statistics per member and expire members by them
        (``expire_phi``): a member is due when it was silent for longer than
        its mean interval + ``pause`` + ``y`` standard deviations (at least
        ``min_std``). ``first_mean`` seeds the statistics of a new member;
        they follow its last ``window`` intervals."""
        if window < 1:
            raise ValueError("window must be at least 1")
        self._writable()
        self.phi_y, self.phi_pause, self.phi_min_std = y, pause, min_std
        self.phi_first, self.phi_window = first_mean, <uint32_t>min(window, 1 << 30)
        self.phi_on = True

    cdef inline void _arrival(self, int32_t s, double interval) noexcept nogil:
        # A running mean and variance over the last ``window`` intervals
        # (exact until then, exponentially weighted after): no history kept.
        cdef uint32_t n = self.arrivals[s] + 1
        cdef double mean = self.interval_mean[s], delta
        if n > self.phi_window:
            n = self.phi_window
        delta = interval - mean
        mean += delta / n
        self.interval_var[s] += (delta * (interval - mean) - self.interval_var[s]) / n
        self.interval_mean[s] = mean
        self.arrivals[s] = n

    cdef inline double _phi_deadline(self, int32_t s) noexcept nogil:
        cdef double std = sqrt(self.interval_var[s]) if self.interval_var[s] > 0 else 0.0
        if std < self.phi_min_std:
            std = self.phi_min_std
        return self.heard_at[s] + self.interval_mean[s] + self.phi_pause + self.phi_y * std

    cdef inline double _due(self, int32_t s, double fallback) noexcept nogil:
        if self.kinds[s] == KIND_MEMBER:
            return self._phi_deadline(s)
        return self.heard_at[s] + fallback

    def phi_deadline(self, int32_t slot):
        """When the member in ``slot`` is due under phi (monotonic seconds)."""
        self._check_slot(slot)
        return self._phi_deadline(slot)

    def expire_phi(self, double now, double fallback):
        """Remove the members due under phi at ``now``, and the other
        entries (our own packets, other domains) silent for ``fallback``
        seconds; return their slots. O(entries)."""
        cdef int32_t s, after
        self._writable()
        if now != now:
            raise ValueError("expire deadline is NaN")
        expired = []
        s = self.head
        while s >= 0:
            after = self.next[s]
            if self._due(s, fallback) <= now:
                expired.append(s)
            s = after
        for s in expired:
            self._remove(s)
        return expired if expired else ()

    def next_phi_expiry(self, double fallback):
        """The earliest time ``expire_phi`` could remove something, or None."""
        cdef int32_t s = self.head
        cdef double best, due
        if s < 0:
            return None
        best = self._due(s, fallback)
        while s >= 0:
            due = self._due(s, fallback)
            if due < best:
                best = due
            s = self.next[s]
        return best

    def oldest_heard(self):
        """When the least recently heard entry was heard, or None when empty."""
        if self.head < 0:
            return None
        return self.heard_at[self.head]

    # A freed slot keeps its last values until it is reused.
    def heard(self, int32_t slot):
        if slot < 0 or slot >= self.capacity:
            raise KeyError(slot)
        return self.heard_at[slot]

    def alive(self, int32_t slot):
        if slot < 0 or slot >= self.capacity:
            raise KeyError(slot)
        return self.alive_ms[slot]

    def kind(self, int32_t slot):
        if slot < 0 or slot >= self.capacity:
            raise KeyError(slot)
        return self.kinds[slot]


# -- for bench/heartbeat.py: the per-heartbeat work without the socket call,
# -- repeated in a C loop so that no Python call overhead is counted.
def _bench_stamp(HeartbeatPacket packet, Py_ssize_t rounds):
    """ns per ``stamp_now`` as ``send`` does it (clock read + 8-byte write)."""
    cdef int64_t t0 = _monotonic_ns()
    cdef Py_ssize_t i
    with nogil:
        for i in range(rounds):
            packet._stamp_now()
    return <double>(_monotonic_ns() - t0) / rounds


def _bench_recognise(MemberIndex index, buf, Py_ssize_t n, Py_ssize_t rounds):
    """ns per known-member heartbeat as ``pump`` handles it after ``recv``:
    clock read, hash, probe, compare, the trailer judged (under set_keys),
    refresh. The slot's last sequence is reset each round, so the same
    datagram stays fresh."""
    cdef Py_buffer view
    cdef const unsigned char* p
    cdef int32_t s
    cdef Py_ssize_t i, m
    cdef int64_t t0
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    p = <const unsigned char*>view.buf
    t0 = _monotonic_ns()
    with nogil:
        for i in range(rounds):
            m = _packet_part(p, n)
            s = index._find(p, m, _hash_tail(p + OFF_PORT, m - OFF_PORT))
            if s >= 0:
                index.seqs[s] = 0
                if index._admit(s, p, n) == ADMIT:
                    index._touch(s, p, <double>_monotonic_ns() / 1e9)
                    index.hits_of[index.kinds[s]] += 1
    t1 = _monotonic_ns()
    PyBuffer_Release(&view)
    return <double>(t1 - t0) / rounds
