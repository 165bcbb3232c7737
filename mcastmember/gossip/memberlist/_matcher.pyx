# cython: language_level=3, boundscheck=False, wraparound=False
"""The gossip hot path's matcher, compiled (the twin of ``_hot_py.py``).

The same function on the same bytes: see ``_hot_py.py`` for the layouts and
the results. Every read is checked against the message's length first.
Also Go's LZW reader and writer (``lzw_decompress`` and ``lzw_compress``),
whose pure-Python twins are ``_hot_py.lzw_decompress`` (behind
``lzw.decompress_py``) and ``gossip/lzw.py``'s ``compress_py``: compressed
packets are what Go sends when a compound of broadcasts shrinks (``unwrap``
reads them), and every datagram is tried compressed before it goes.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from cpython.pyport cimport PY_SSIZE_T_MAX
from libc.string cimport memcmp, memcpy, memset

cdef enum:
    COMPOUND = 7
    COMPRESS = 9
    HAS_CRC = 12
    HAS_LABEL = 244
    CRC_HEADER = 5
    C_PING = 0
    C_ACK = 2
    C_SUSPECT = 3
    C_ALIVE = 4
    C_DEAD = 5
    META_MAX = 512
    VSN_SIZE = 6
    U16 = 0xFFFF
    FIXRAW_MAX = 31
    LZW_ALGO = 0

PING = C_PING
ACK = C_ACK
SUSPECT = C_SUSPECT
ALIVE = C_ALIVE
DEAD = C_DEAD

cdef bytes K_NODE = b"\xa4Node"
cdef bytes K_SEQ = b"\xa5SeqNo"
cdef bytes K_SRC_ADDR = b"\xaaSourceAddr"
cdef bytes K_SRC_NODE = b"\xaaSourceNode"
cdef bytes K_SRC_PORT = b"\xaaSourcePort"
cdef bytes K_PAYLOAD = b"\xa7Payload"
cdef bytes K_FROM = b"\xa4From"
cdef bytes K_INC = b"\xabIncarnation"
cdef bytes K_ADDR = b"\xa4Addr"
cdef bytes K_META = b"\xa4Meta"
cdef bytes K_PORT = b"\xa4Port"
cdef bytes K_VSN = b"\xa3Vsn"
# a compress message up to its Buf's raw header (see _hot_py.COMPRESS_HEAD)
cdef bytes COMPRESS_HEAD = bytes((COMPRESS, 0x82)) + b"\xa4Algo" + bytes((LZW_ALGO,)) + b"\xa3Buf"
cdef Py_ssize_t COMPRESS_HEAD_SIZE = len(COMPRESS_HEAD)


cdef unsigned int CRC_TABLE[256]


cdef void _crc_table():
    """CRC-32 (IEEE, reflected 0xEDB88320), as zlib.crc32 and Go's crc32.ChecksumIEEE."""
    cdef unsigned int c, n, k
    for n in range(256):
        c = n
        for k in range(8):
            c = (0xEDB88320U ^ (c >> 1)) if c & 1 else (c >> 1)
        CRC_TABLE[n] = c


_crc_table()


cdef unsigned int crc32(const unsigned char *p, Py_ssize_t n) noexcept nogil:
    cdef unsigned int c = 0xFFFFFFFFU
    cdef Py_ssize_t i
    for i in range(n):
        c = CRC_TABLE[(c ^ p[i]) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFFU


def unwrap(bytes buf not None, bytes label_header not None, Py_ssize_t max_packet, Py_ssize_t max_messages,
           Py_ssize_t max_nesting, Py_ssize_t max_decompressed):
    """The messages of a packet, or ``None``: see ``_hot_py.unwrap``."""
    cdef const unsigned char *p = <const unsigned char *>buf
    cdef Py_ssize_t end = len(buf)
    cdef Py_ssize_t pos = len(label_header)
    cdef unsigned int want
    if end > max_packet or pos > end or memcmp(p, <const char *>label_header, pos) != 0:
        return None
    if pos == 0 and end and p[0] == HAS_LABEL:
        return None
    if pos < end and p[pos] == HAS_CRC:
        if end - pos < CRC_HEADER:
            return None
        want = ((<unsigned int>p[pos + 1] << 24) | (<unsigned int>p[pos + 2] << 16)
                | (<unsigned int>p[pos + 3] << 8) | p[pos + 4])
        if crc32(p + pos + CRC_HEADER, end - pos - CRC_HEADER) != want:
            return None
        pos += CRC_HEADER
    if pos < end and p[pos] == COMPRESS:
        if max_nesting < 1:
            return None
        return _compressed(p, pos, end, max_messages, max_nesting - 1, max_decompressed)
    return _messages(p, pos, end, max_messages, max_nesting)


cdef object _messages(const unsigned char *p, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t max_messages,
                      Py_ssize_t max_nesting):
    """``p[pos:end]``: one plain message, or a compound of them (see ``_hot_py._messages``)."""
    cdef Py_ssize_t count, lengths, part, size, stop, index
    if pos >= end or p[pos] == COMPRESS:
        return None
    if p[pos] != COMPOUND:
        return [p[pos:end]] if max_messages >= 1 else None
    if max_nesting < 1 or pos + 1 >= end:
        return None
    count = p[pos + 1]
    lengths = pos + 2
    part = lengths + 2 * count
    if count > max_messages or part > end:
        return None
    out = []
    for index in range(count):
        size = (<Py_ssize_t>p[lengths + 2 * index] << 8) | p[lengths + 2 * index + 1]
        stop = part + size
        if size == 0 or stop > end or p[part] == COMPOUND or p[part] == COMPRESS:
            return None
        out.append(p[part:stop])
        part = stop
    return out if part == end else None


cdef object _compressed(const unsigned char *p, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t max_messages,
                        Py_ssize_t max_nesting, Py_ssize_t max_size):
    """The messages inside a compress message in exactly Go's layout at
    ``pos`` (see ``_hot_py._decompressed``), read straight from the LZW
    reader's buffer; ``None`` for any other layout or a failed read."""
    cdef Py_ssize_t head = pos + COMPRESS_HEAD_SIZE, start
    cdef unsigned long long size
    cdef unsigned char b
    cdef LzwState st
    if head >= end or memcmp(p + pos, <const char *>COMPRESS_HEAD, COMPRESS_HEAD_SIZE) != 0:
        return None
    b = p[head]
    if 0xA0 <= b <= 0xBF:
        start = head + 1
        size = b - 0xA0
    elif b == 0xDA and head + 3 <= end:
        start = head + 3
        size = (<unsigned long long>p[head + 1] << 8) | p[head + 2]
        if size <= FIXRAW_MAX:
            return None
    elif b == 0xDB and head + 5 <= end:
        start = head + 5
        size = ((<unsigned long long>p[head + 1] << 24) | (<unsigned long long>p[head + 2] << 16)
                | (<unsigned long long>p[head + 3] << 8) | p[head + 4])
        if size <= U16:
            return None
    else:
        return None
    if size != <unsigned long long>(end - start):
        return None
    st.out = NULL
    try:
        _lzw_start(&st, p + start, end - start, max_size)
        if _lzw_run(&st, &LZW_TABLE, PY_SSIZE_T_MAX) != 0:
            return None
        return _messages(st.out, 0, st.out_len, max_messages, max_nesting)
    finally:
        PyMem_Free(st.out)


cdef struct Reader:
    const unsigned char *p
    Py_ssize_t end
    Py_ssize_t pos      # -1 once a read failed


cdef inline unsigned long long read_uint(Reader *r):
    """A msgpack unsigned integer of at most 32 bits."""
    cdef Py_ssize_t pos = r.pos
    cdef unsigned char b
    if pos < 0 or pos >= r.end:
        r.pos = -1
        return 0
    b = r.p[pos]
    if b < 0x80:
        r.pos = pos + 1
        return b
    if b == 0xCC and pos + 2 <= r.end:
        r.pos = pos + 2
        return r.p[pos + 1]
    if b == 0xCD and pos + 3 <= r.end:
        r.pos = pos + 3
        return (<unsigned long long>r.p[pos + 1] << 8) | r.p[pos + 2]
    if b == 0xCE and pos + 5 <= r.end:
        r.pos = pos + 5
        return ((<unsigned long long>r.p[pos + 1] << 24) | (<unsigned long long>r.p[pos + 2] << 16)
                | (<unsigned long long>r.p[pos + 3] << 8) | r.p[pos + 4])
    r.pos = -1
    return 0


cdef inline Py_ssize_t read_raw(Reader *r, bint nil_ok):
    """A msgpack raw (fixraw, raw16, raw32), or nil if ``nil_ok``: the start
    of its bytes (its end is the new position); -1 on failure."""
    cdef Py_ssize_t pos = r.pos
    cdef Py_ssize_t start
    cdef unsigned long long size
    cdef unsigned char b
    if pos < 0 or pos >= r.end:
        r.pos = -1
        return -1
    b = r.p[pos]
    if 0xA0 <= b <= 0xBF:
        start = pos + 1
        size = b - 0xA0
    elif b == 0xDA and pos + 3 <= r.end:
        start = pos + 3
        size = (<unsigned long long>r.p[pos + 1] << 8) | r.p[pos + 2]
    elif b == 0xDB and pos + 5 <= r.end:
        start = pos + 5
        size = ((<unsigned long long>r.p[pos + 1] << 24) | (<unsigned long long>r.p[pos + 2] << 16)
                | (<unsigned long long>r.p[pos + 3] << 8) | r.p[pos + 4])
    elif b == 0xC0 and nil_ok:
        r.pos = pos + 1
        return pos + 1
    else:
        r.pos = -1
        return -1
    if size > <unsigned long long>(r.end - start):
        r.pos = -1
        return -1
    r.pos = start + <Py_ssize_t>size
    return start


cdef inline bint key(Reader *r, bytes k):
    """The key ``k`` next: step over it."""
    cdef Py_ssize_t n = len(k)
    if r.pos < 0 or n > r.end - r.pos or memcmp(r.p + r.pos, <const char *>k, n) != 0:
        return False
    r.pos += n
    return True


cdef inline bytes span(Reader *r, Py_ssize_t start, Py_ssize_t stop):
    return r.p[start:stop]


def match(bytes buf not None, bytes me not None):
    """One message (type byte + body) in one of the hot layouts, or ``None``."""
    cdef Reader r
    r.p = <const unsigned char *>buf
    r.end = len(buf)
    r.pos = 2
    if r.end < 2:
        return None
    cdef unsigned char kind = r.p[0]
    cdef unsigned char count = r.p[1]
    if kind == C_PING:
        return _ping(&r, count, me)
    if kind == C_ACK:
        return _ack(&r, count)
    if kind == C_ALIVE:
        return _alive(&r, count)
    if kind == C_SUSPECT or kind == C_DEAD:
        return _accusation(&r, count, kind)
    return None


cdef object _ping(Reader *r, unsigned char count, bytes me):
    cdef Py_ssize_t node, node_end, addr_start = 0, addr_end = 0
    cdef unsigned long long seq, port = 0
    cdef int left
    if count < 0x82 or count > 0x85 or not key(r, K_NODE):
        return None
    node = read_raw(r, False)
    node_end = r.pos
    if node < 0 or not key(r, K_SEQ):
        return None
    seq = read_uint(r)
    if r.pos < 0:
        return None
    left = count - 0x82
    if left and key(r, K_SRC_ADDR):
        addr_start = read_raw(r, True)
        addr_end = r.pos
        if addr_start < 0:
            return None
        left -= 1
    if left and key(r, K_SRC_NODE):
        if read_raw(r, False) < 0:
            return None
        left -= 1
    if left and key(r, K_SRC_PORT):
        port = read_uint(r)
        if r.pos < 0 or port > U16:
            return None
        left -= 1
    if left or r.pos != r.end:
        return None
    cdef bint to_me = node == node_end or (
        node_end - node == len(me) and memcmp(r.p + node, <const char *>me, node_end - node) == 0)
    return (C_PING, seq, to_me, span(r, addr_start, addr_end), port)


cdef object _ack(Reader *r, unsigned char count):
    cdef Py_ssize_t payload, payload_end
    cdef unsigned long long seq
    if count != 0x82 or not key(r, K_PAYLOAD):
        return None
    payload = read_raw(r, True)
    payload_end = r.pos
    if payload < 0 or not key(r, K_SEQ):
        return None
    seq = read_uint(r)
    if r.pos != r.end:
        return None
    return (C_ACK, seq, span(r, payload, payload_end))


cdef object _alive(Reader *r, unsigned char count):
    cdef Py_ssize_t addr, addr_end, meta, meta_end, node, node_end, vsn
    cdef unsigned long long inc, port
    if count != 0x86 or not key(r, K_ADDR):
        return None
    addr = read_raw(r, True)
    addr_end = r.pos
    if addr < 0 or not key(r, K_INC):
        return None
    inc = read_uint(r)
    if r.pos < 0 or not key(r, K_META):
        return None
    meta = read_raw(r, True)
    meta_end = r.pos
    if meta < 0 or meta_end - meta > META_MAX or not key(r, K_NODE):
        return None
    node = read_raw(r, False)
    node_end = r.pos
    if node < 0 or not key(r, K_PORT):
        return None
    port = read_uint(r)
    if r.pos < 0 or port > U16 or not key(r, K_VSN):
        return None
    vsn = read_raw(r, True)
    if vsn < 0 or r.pos != r.end or 0 < r.end - vsn < VSN_SIZE:
        return None
    return (C_ALIVE, inc, span(r, node, node_end), span(r, addr, addr_end), port, span(r, meta, meta_end),
            span(r, vsn, r.end))


cdef object _accusation(Reader *r, unsigned char count, unsigned char kind):
    cdef Py_ssize_t sender, sender_end, node
    cdef unsigned long long inc
    if count != 0x83 or not key(r, K_FROM):
        return None
    sender = read_raw(r, False)
    sender_end = r.pos
    if sender < 0 or not key(r, K_INC):
        return None
    inc = read_uint(r)
    if r.pos < 0 or not key(r, K_NODE):
        return None
    node = read_raw(r, False)
    if node < 0 or r.pos != r.end:
        return None
    return (kind, inc, span(r, node, r.end), span(r, sender, sender_end))


def ack(bytes prefix not None, long long seq):
    """An ack message: ``prefix`` and ``seq`` as go-msgpack writes a uint."""
    cdef unsigned char tail[5]
    cdef Py_ssize_t n, size = len(prefix)
    if seq < 0 or seq > 0xFFFFFFFF:
        raise ValueError(f"a sequence number is a uint32, not {seq}")
    if seq < 0x80:
        tail[0] = <unsigned char>seq
        n = 1
    elif seq <= 0xFF:
        tail[0] = 0xCC
        tail[1] = <unsigned char>seq
        n = 2
    elif seq <= U16:
        tail[0] = 0xCD
        tail[1] = <unsigned char>(seq >> 8)
        tail[2] = <unsigned char>seq
        n = 3
    else:
        tail[0] = 0xCE
        tail[1] = <unsigned char>(seq >> 24)
        tail[2] = <unsigned char>(seq >> 16)
        tail[3] = <unsigned char>(seq >> 8)
        tail[4] = <unsigned char>seq
        n = 5
    cdef bytes out = PyBytes_FromStringAndSize(NULL, size + n)
    cdef char *dst = PyBytes_AS_STRING(out)
    memcpy(dst, <const char *>prefix, size)
    memcpy(dst + size, tail, n)
    return out


# ----------------------------------------------------------------- LZW, compiled

cdef enum:
    LZW_CLEAR = 256
    LZW_EOF = 257
    LZW_MAX_CODE = 4095
    LZW_MAX_WIDTH = 12
    LZW_FIRST_CAP = 1 << 18


cdef struct LzwTable:
    # code -> its string: the code before it, its last byte, its first byte, its length
    int prefix[LZW_MAX_CODE + 1]
    unsigned char suffix[LZW_MAX_CODE + 1]
    unsigned char first[LZW_MAX_CODE + 1]
    int length[LZW_MAX_CODE + 1]


# One table for every call: the function holds the GIL throughout and calls
# no Python code while it reads, so no two calls share it at once. Its first
# 256 entries (the literals) are set once here and never written again; a
# read writes each entry from 258 up before any code refers to it (a code
# above the next one to define is refused), so nothing from an earlier call
# is read.
cdef LzwTable LZW_TABLE


cdef void _lzw_table():
    cdef int c
    for c in range(LZW_MAX_CODE + 1):
        LZW_TABLE.prefix[c] = -1
        LZW_TABLE.suffix[c] = <unsigned char>c if c < LZW_CLEAR else 0
        LZW_TABLE.first[c] = LZW_TABLE.suffix[c]
        LZW_TABLE.length[c] = 1 if c < LZW_CLEAR else 0


_lzw_table()


cdef struct LzwState:
    # a read under way: the input, the registers, and the bytes out so far
    const unsigned char *src
    Py_ssize_t size
    Py_ssize_t pos
    Py_ssize_t max_size
    unsigned long long bits
    int n_bits
    int width
    int hi
    int overflow
    int last
    unsigned char *out      # the bytes read (the owner frees it, whatever the status)
    Py_ssize_t out_len
    Py_ssize_t cap
    int code                # status 2: the invalid code, and the next code then
    int bad_hi


cdef int _lzw_start(LzwState *st, const unsigned char *src, Py_ssize_t size, Py_ssize_t max_size) except -1:
    """``st`` ready to read ``src``, its first buffer taken (MemoryError if not)."""
    # a first guess at the size out: gossip compresses about 2-3x; grown by doubling
    st.cap = min(4 * size + 64, LZW_FIRST_CAP, max(max_size, 1))
    st.src, st.size, st.pos, st.max_size = src, size, 0, max_size
    st.bits, st.n_bits, st.width, st.hi, st.overflow, st.last = 0, 0, 9, LZW_EOF, 512, -1
    st.out_len = st.code = st.bad_hi = 0
    st.out = <unsigned char *>PyMem_Malloc(st.cap)
    if st.out == NULL:
        raise MemoryError()
    return 0


def lzw_decompress(bytes data not None, Py_ssize_t max_size):
    """Go's compress/lzw reader (LSB, 8-bit literals), step for step as
    ``_hot_py.lzw_decompress`` does it, at most ``max_size`` bytes out.
    Returns the bytes, or on failure a tuple for the caller to raise from:
    (1,) the data ends without its end code; (2, code, next) an invalid
    code; (3,) more than ``max_size`` bytes."""
    cdef LzwState st
    st.out = NULL
    try:
        _lzw_start(&st, <const unsigned char *>data, len(data), max_size)
        return _lzw_result(&st, _lzw_run(&st, &LZW_TABLE, PY_SSIZE_T_MAX))
    finally:
        PyMem_Free(st.out)


cdef object _lzw_result(LzwState *st, int status):
    """What a finished read gives Python (see :func:`lzw_decompress`); None while unfinished."""
    if status == 0:
        return PyBytes_FromStringAndSize(<char *>st.out, st.out_len)
    if status == 2:
        return (2, st.code, st.bad_hi)
    if status < 0:
        return None
    return (status,)


cdef class LzwReader:
    """:func:`lzw_decompress` a turn at a time (the twin of
    ``_hot_py.LzwReader``), with its own code table: a stream's 20 MiB is
    read in pieces between which the pings are answered."""

    cdef LzwState st
    cdef LzwTable *table
    cdef bytes data
    cdef object result

    def __cinit__(self, bytes data not None, Py_ssize_t max_size):
        cdef int c
        self.st.out = NULL
        self.table = <LzwTable *>PyMem_Malloc(sizeof(LzwTable))
        if self.table == NULL:
            raise MemoryError()
        for c in range(LZW_CLEAR):       # the literals; every other entry is written before it is read
            self.table.prefix[c] = -1
            self.table.suffix[c] = <unsigned char>c
            self.table.first[c] = <unsigned char>c
            self.table.length[c] = 1
        self.data = data                  # (held: the state reads its bytes)
        self.result = None
        _lzw_start(&self.st, <const unsigned char *>data, len(data), max_size)

    def __dealloc__(self):
        PyMem_Free(self.st.out)
        PyMem_Free(self.table)

    def output(self):
        """The bytes read so far (all of them once read)."""
        return PyBytes_FromStringAndSize(<char *>self.st.out, self.st.out_len)

    def read(self, Py_ssize_t budget):
        """Read until ``budget`` more bytes are out (a code's whole string:
        up to 4 KB past it) or the end: None if there is more to read, else
        :func:`lzw_decompress`'s result (again on every later call)."""
        if self.result is None:
            self.result = _lzw_result(&self.st, _lzw_run(&self.st, self.table, budget))
        return self.result


cdef int _lzw_run(LzwState *st, LzwTable *table, Py_ssize_t budget) except -2:
    """Go on reading: 0 with the bytes in ``st.out[:st.out_len]``, -1 once
    ``budget`` more bytes are out and there is more to read, or the
    failure's number (see :func:`lzw_decompress`)."""
    cdef const unsigned char *src = st.src
    cdef Py_ssize_t pos = st.pos, size = st.size, out_len = st.out_len, cap = st.cap, max_size = st.max_size
    cdef Py_ssize_t stop = out_len + budget if budget < PY_SSIZE_T_MAX - out_len else PY_SSIZE_T_MAX
    cdef Py_ssize_t need, k, entry_len
    cdef unsigned long long bits = st.bits
    cdef int n_bits = st.n_bits, width = st.width, hi = st.hi, overflow = st.overflow, last = st.last
    cdef int code, c, status = -1
    cdef unsigned char *out = st.out
    cdef unsigned char *grown
    cdef unsigned char head
    cdef int *prefix = table.prefix
    cdef unsigned char *suffix = table.suffix
    cdef unsigned char *first = table.first
    cdef int *length = table.length
    while out_len < stop:
        while n_bits < width:
            if pos == size:
                status = 1
                break
            bits |= (<unsigned long long>src[pos]) << n_bits
            pos += 1
            n_bits += 8
        if status >= 0:
            break
        code = <int>(bits & ((1ULL << width) - 1))
        bits >>= width
        n_bits -= width
        if code == LZW_CLEAR:
            width = 9
            hi = LZW_EOF
            overflow = 512
            last = -1
            # a clear puts nothing out but costs a turn as a byte out would:
            # a stream of clears alone must end its turns too
            stop -= 1
            continue
        if code == LZW_EOF:
            status = 0
            break
        if code > hi:
            st.code = code
            st.bad_hi = hi
            status = 2
            break
        if code == hi and last >= 0:
            entry_len = length[last] + 1        # last's string plus its own head
            head = first[last]
        else:
            entry_len = length[code]
            head = first[code]
        if out_len + entry_len > max_size:
            status = 3
            break
        need = out_len + entry_len
        if need > cap:
            while cap < need:
                cap *= 2
            grown = <unsigned char *>PyMem_Realloc(out, cap)
            if grown == NULL:
                raise MemoryError()       # (st.out is still the old buffer: its owner frees it)
            out = grown
            st.out = out
            st.cap = cap
        if code == hi and last >= 0:
            out[need - 1] = head
            c = last
            k = need - 2
        else:
            c = code
            k = need - 1
        while k >= out_len and c >= 0:      # a string's bytes, last first
            out[k] = suffix[c]
            c = prefix[c]
            k -= 1
        out_len = need
        if last >= 0:
            prefix[hi] = last
            suffix[hi] = head
            first[hi] = first[last]
            length[hi] = length[last] + 1
        last = code
        hi += 1
        if hi >= overflow:
            if width == LZW_MAX_WIDTH:
                last = -1                  # table full: Go defines no more codes until a clear
                hi -= 1
            else:
                width += 1
                overflow <<= 1
    st.pos, st.out_len, st.bits = pos, out_len, bits
    st.n_bits, st.width, st.hi, st.overflow, st.last = n_bits, width, hi, overflow, last
    return status


# The writer's code table, (prefix code << 8 | byte) -> code, open addressing.
# It holds at most 4095 - 257 codes before a clear, so 8,192 slots stay under
# half full. A slot counts only when its stamp is the current one: a new call
# (or a clear) takes a new stamp instead of wiping 8,192 slots for a
# 100-byte datagram. Shared by every call for the reason LZW_TABLE is.
cdef enum:
    LZW_HASH_BITS = 13
    LZW_HASH_SIZE = 1 << LZW_HASH_BITS

cdef unsigned int LZW_KEYS[LZW_HASH_SIZE]
cdef unsigned short LZW_CODES[LZW_HASH_SIZE]
cdef unsigned int LZW_STAMPS[LZW_HASH_SIZE]
cdef unsigned int LZW_STAMP = 0


cdef inline unsigned int _lzw_new_stamp() noexcept:
    global LZW_STAMP
    LZW_STAMP += 1
    if LZW_STAMP == 0:                 # wrapped: forget every old stamp once
        memset(LZW_STAMPS, 0, sizeof(LZW_STAMPS))
        LZW_STAMP = 1
    return LZW_STAMP


def lzw_compress(bytes data not None):
    """Go's compress/lzw writer (LSB, 8-bit literals), Close included, step
    for step as ``lzw.compress_py`` does it: the same bytes."""
    cdef const unsigned char *src = <const unsigned char *>data
    cdef Py_ssize_t size = len(data), i, o = 0
    # every input byte ends at most one code; add the clears, the last code and the end code
    cdef Py_ssize_t cap = ((size + size // 3000 + 8) * LZW_MAX_WIDTH + 7) // 8 + 8
    cdef unsigned long long bits = LZW_CLEAR
    cdef int n_bits = 9, width = 9, hi = LZW_EOF, overflow = 512
    cdef unsigned int code, key, slot, stamp
    cdef int found
    cdef unsigned char *out = <unsigned char *>PyMem_Malloc(cap)
    if out == NULL:
        raise MemoryError()
    try:
        if size:
            stamp = _lzw_new_stamp()
            code = src[0]
            for i in range(1, size):
                key = code << 8 | src[i]
                slot = (key * 2654435761U) >> (32 - LZW_HASH_BITS)
                found = -1
                while LZW_STAMPS[slot] == stamp:
                    if LZW_KEYS[slot] == key:
                        found = LZW_CODES[slot]
                        break
                    slot = (slot + 1) & (LZW_HASH_SIZE - 1)
                if found >= 0:
                    code = <unsigned int>found
                    continue
                bits |= (<unsigned long long>code) << n_bits
                n_bits += width
                while n_bits >= 8:
                    out[o] = <unsigned char>bits
                    o += 1
                    bits >>= 8
                    n_bits -= 8
                code = src[i]
                hi += 1                      # incHi
                if hi == overflow:
                    width += 1
                    overflow <<= 1
                if hi == LZW_MAX_CODE:       # full: a clear at this width, the pair not recorded
                    bits |= (<unsigned long long>LZW_CLEAR) << n_bits
                    n_bits += width
                    width = 9
                    hi = LZW_EOF
                    overflow = 512
                    stamp = _lzw_new_stamp()
                    continue
                LZW_KEYS[slot] = key
                LZW_CODES[slot] = <unsigned short>hi
                LZW_STAMPS[slot] = stamp
            # Close: the last code, incHi once more (it may widen or clear), then end of data
            bits |= (<unsigned long long>code) << n_bits
            n_bits += width
            hi += 1
            if hi == overflow:
                width += 1
            if hi == LZW_MAX_CODE:
                bits |= (<unsigned long long>LZW_CLEAR) << n_bits
                n_bits += width
                width = 9
        bits |= (<unsigned long long>LZW_EOF) << n_bits
        n_bits += width
        while n_bits > 0:
            out[o] = <unsigned char>bits
            o += 1
            bits >>= 8
            n_bits -= 8
        return PyBytes_FromStringAndSize(<char *>out, o)
    finally:
        PyMem_Free(out)
