"""Every number of the Tomcat Tribes 10.1 membership packet, in one place.

The layout (all integers big-endian; see docs/wire.md, "Wire format"):

    offset  width  field
    0       10     begin marker  b"TRIBES-B" + version 01 00
    10      4      body length   bytes from offset 14 up to the end marker
    14      8      alive time    ms since the sender's service started (int64)
    22      4      member (TCP) port
    26      4      secure port   (-1 when unused)
    30      4      UDP port      (-1 when unused)
    34      1      host length   4 (IPv4) or 16 (IPv6)
    35      hl     host          raw address bytes
    ..      4+cl   command       int32 length + bytes ("BABY-ALEX" = shutdown)
    ..      4+dl   domain        int32 length + bytes
    ..      16     unique id
    ..      4+pl   payload       int32 length + bytes
    ..      10     end marker    b"TRIBES-E" + version 01 00

Both codec implementations (_fast.pyx and _fast_py.py) and the construct
schema read their numbers from here; nothing else should spell them out.
"""

BEGIN_MARKER = b"TRIBES-B\x01\x00"
END_MARKER = b"TRIBES-E\x01\x00"
MARKER_TAG_LEN = 8          # b"TRIBES-B" / b"TRIBES-E" without the version bytes
MARKER_LEN = 10
VERSION = b"\x01\x00"

OFF_BODY_LEN = 10
OFF_ALIVE = 14
OFF_PORT = 22
OFF_SECURE_PORT = 26
OFF_UDP_PORT = 30
OFF_HOST_LEN = 34
OFF_HOST = 35

BODY_START = OFF_ALIVE        # the body length counts from here
ALIVE_LEN = 8
UNIQUE_ID_LEN = 16
HOST_LEN_IPV4 = 4
HOST_LEN_IPV6 = 16
# Fixed part of the body: alive + 3 ports + host length byte.
BODY_FIXED_LEN = ALIVE_LEN + 4 + 4 + 4 + 1
# Packet overhead beyond the body: begin marker + body length + end marker.
FRAME_OVERHEAD = MARKER_LEN + 4 + MARKER_LEN
# Smallest possible well-formed packet with an empty host: 73 bytes.
# total = 73 + host + command + domain + payload.
EMPTY_PACKET_LEN = FRAME_OVERHEAD + BODY_FIXED_LEN + 4 + 4 + UNIQUE_ID_LEN + 4

SHUTDOWN_COMMAND = b"BABY-ALEX"

# Tomcat's multicast "broadcast" channel frames share the group; they start
# with this tag and are ignored by membership (never counted as malformed).
CHANNEL_FRAME_TAG = b"FLT2002"

# mcast-demo doctor's datagrams (tools/doctor/datagrams.py) start with this
# tag: neither a member packet (TRIBES-B) nor a channel frame (FLT2002), so
# Tomcat drops them without a word (WIRE.md §1); we count them apart
# ("doctor_probes", the name users scrape), never as malformed (which is
# warned about): a doctor must disturb no running member.
#
#   offset  width  field
#   0       8      tag b"MCDOCTOR"
#   8       1      version 1
#   9       1      kind: L (loop), M (multicast), U (unicast), R (the echo of a U)
#   10      8      the sending doctor's random id
#   18      4      sequence (uint32)
#   22      8      sent at (int64, the sender's monotonic ns; an echo repeats it)
#   30      16     U only: what the sender heard from the receiver so far, four
#                  uint32: multicast datagrams heard and their sequence span,
#                  unicast datagrams heard and their span
#   30      24*N   M only: the same for each doctor it heard, by that doctor's id
#                  (8 bytes, then the four uint32): a host whose unicast is
#                  dropped one way still learns what its own datagrams did
DOCTOR_DATAGRAM_TAG = b"MCDOCTOR"
DOCTOR_DATAGRAM_VERSION = 1
DOCTOR_DATAGRAM_HEAD = "!8sBc8sIq"
DOCTOR_DATAGRAM_REPORT = "!IIII"
DOCTOR_DATAGRAM_ENTRY = "!8sIIII"

# Tomcat caps member packets at 65535 (McastServiceImpl.MAX_PACKET_SIZE);
# IPv4 cannot carry a UDP datagram larger than 65507 bytes.
MAX_PACKET_LEN = 65507
# The receive buffer is one byte larger so an oversized datagram is noticed
# (recv_into returns the full buffer) instead of silently cut to fit.
RECV_BUFFER_LEN = 65536

# Verdicts of validation. 0 means well formed; every other value is a reason
# a packet was dropped. Both implementations must give the same code.
OK = 0
NOT_MEMBERSHIP = 1      # no begin marker (not a membership packet at all)
CHANNEL_FRAME = 2       # a Tribes channel frame (FLT2002...), not membership
TRUNCATED = 3           # shorter than its header or its body length says
BAD_VERSION = 4         # marker version bytes other than 01 00
BAD_BODY_LENGTH = 5     # negative body length
BAD_END_MARKER = 6      # no end marker where the body length says
BAD_HOST_LENGTH = 7     # host length other than 4 or 16
FIELD_OVERRUN = 8       # a field's length runs past the end of the body
LENGTH_MISMATCH = 9     # fields end before the body does (trailing bytes)
OVERSIZED = 10          # datagram larger than MAX_PACKET_LEN
DOCTOR_PROBE = 11       # an mcast-demo doctor datagram (MCDOCTOR...), not membership;
                        # named as the doctor_probes counter and metric users scrape

REASONS = {
    OK: "ok",
    NOT_MEMBERSHIP: "not_membership",
    CHANNEL_FRAME: "channel_frame",
    TRUNCATED: "truncated",
    BAD_VERSION: "bad_version",
    BAD_BODY_LENGTH: "bad_body_length",
    BAD_END_MARKER: "bad_end_marker",
    BAD_HOST_LENGTH: "bad_host_length",
    FIELD_OVERRUN: "field_overrun",
    LENGTH_MISMATCH: "length_mismatch",
    OVERSIZED: "oversized",
    DOCTOR_PROBE: "doctor_probe",
}

REASON_TEXT = {
    OK: "well formed",
    NOT_MEMBERSHIP: "no TRIBES-B begin marker: not a membership packet",
    CHANNEL_FRAME: "a Tribes channel frame (FLT2002), not a membership packet",
    TRUNCATED: "truncated: shorter than its header or body length says",
    BAD_VERSION: "unsupported marker version (only 01 00 is Tribes 10.1)",
    BAD_BODY_LENGTH: "negative body length",
    BAD_END_MARKER: "no TRIBES-E end marker where the body length says",
    BAD_HOST_LENGTH: "host length is neither 4 (IPv4) nor 16 (IPv6)",
    FIELD_OVERRUN: "a field's length runs past the end of the body",
    LENGTH_MISMATCH: "the fields end before the body length says",
    OVERSIZED: "datagram larger than 65507 bytes",
    DOCTOR_PROBE: "an mcast-demo doctor probe (MCDOCTOR), not a membership packet",
}

# Kinds of entries the compiled member index can hold.
KIND_FREE = 0
KIND_MEMBER = 1
KIND_LOCAL = 2       # our own heartbeats looping back: recognised, ignored
KIND_FILTERED = 3    # a member of another domain: recognised, ignored


# -- Tribes' TCP channel (what Tomcat's senders write to a member's port) -----
# A frame is START + int32 length + ChannelData + END
# (org.apache.catalina.tribes.io.XByteBuffer); ChannelData is int32 options,
# int64 timestamp, int32 n + unique message id, int32 n + the sender's
# membership packet, int32 n + the message (ChannelData.getDataPackage).
CHANNEL_START = CHANNEL_FRAME_TAG       # b"FLT2002"
CHANNEL_END = b"TLF2003"
CHANNEL_HEADER_LEN = len(CHANNEL_START) + 4
# Message option bits (org.apache.catalina.tribes.Channel.SEND_OPTIONS_*).
SEND_OPTIONS_BYTE_MESSAGE = 0x0001      # raw bytes, not a serialized Java object
SEND_OPTIONS_USE_ACK = 0x0002           # the sender waits for an ack frame
SEND_OPTIONS_SYNCHRONIZED_ACK = 0x0004  # ...sent after the message was processed
SEND_OPTIONS_ASYNCHRONOUS = 0x0008      # queued by the sender; no meaning to a receiver
# The payloads of the ack frames (org.apache.catalina.tribes.transport.Constants).
ACK_DATA = bytes((6, 2, 3))
FAIL_ACK_DATA = bytes((11, 0, 5))

# -- the few Java-serialized messages a listed member must answer -------------
# (java.io.ObjectStreamConstants; the class names and serialVersionUIDs are
# those of Tomcat 10.1: RpcMessage and its NoRpcChannelReply declare none, so
# Java derives them from the class's shape, which has not changed since
# Tomcat 7; the request carries RpcMessage's own, which we echo.)
JAVA_STREAM_MAGIC = b"\xac\xed\x00\x05"
TC_NULL, TC_REFERENCE, TC_CLASSDESC, TC_OBJECT, TC_STRING = 0x70, 0x71, 0x72, 0x73, 0x74
TC_BLOCKDATA, TC_ENDBLOCKDATA, TC_BLOCKDATALONG, TC_LONGSTRING = 0x77, 0x78, 0x7A, 0x7C
SC_WRITE_METHOD, SC_SERIALIZABLE, SC_EXTERNALIZABLE, SC_BLOCK_DATA = 0x01, 0x02, 0x04, 0x08
RPC_MESSAGE_CLASS = "org.apache.catalina.tribes.group.RpcMessage"
NO_RPC_REPLY_CLASS = "org.apache.catalina.tribes.group.RpcMessage$NoRpcChannelReply"
NO_RPC_REPLY_SUID = 8911374288427899814
SESSION_MESSAGE_CLASS = "org.apache.catalina.ha.session.SessionMessageImpl"
SESSION_EVENT_FIELD = "mEvtType"
# org.apache.catalina.ha.session.SessionMessage event types.
EVT_GET_ALL_SESSIONS = 4
EVT_ALL_SESSION_TRANSFERCOMPLETE = 14


# -- the authentication trailer (ours; after TRIBES-E, where Tomcat ignores it) --
#
#   offset (from the end marker's end)  width  field
#   0                                   3      magic b"MMA"
#   3                                   1      version 1
#   4                                   1      key id (1-255)
#   5                                   8      sequence (uint64): never repeats for a sender and key
#   13                                  16     MAC: HMAC-SHA256 over packet + trailer[0:13], first 16 bytes
AUTH_MAGIC = b"MMA"
AUTH_VERSION = 1
AUTH_HEADER_LEN = 3 + 1 + 1 + 8
AUTH_MAC_LEN = 16
AUTH_TRAILER_LEN = AUTH_HEADER_LEN + AUTH_MAC_LEN
AUTH_KEY_LEN = 32
AUTH_KEY_IDS = range(1, 256)

# Verdicts of checking a trailer (auth.check, and the index for known members;
# both implementations give the same). 0 = authentic; fresh is the replay
# guard's verdict on top (REPLAY).
AUTH_OK = 0
AUTH_NO_TRAILER = 1      # nothing after the end marker
AUTH_BAD_TRAILER = 2     # bytes after the end marker that are not our trailer
AUTH_UNKNOWN_KEY = 3     # a key id the ring does not hold
AUTH_BAD_MAC = 4         # the MAC does not match: forged or altered
AUTH_REPLAY = 5          # authentic, but not newer than what this sender sent before
AUTH_SKEW = 6            # authentic, a sender's first, but its sequence (its clock) is more
#                          than the replay window from ours (an old capture, or a clock off)
AUTH_REASONS = {AUTH_OK: "ok", AUTH_NO_TRAILER: "no_trailer", AUTH_BAD_TRAILER: "bad_trailer",
                AUTH_UNKNOWN_KEY: "unknown_key", AUTH_BAD_MAC: "bad_mac", AUTH_REPLAY: "replay",
                AUTH_SKEW: "skew"}
# Modes: off (neither sign nor check), permissive (sign; accept everything
# but replays, marking members authenticated or not), enforce (sign; drop
# what is not authentic and fresh).
AUTH_OFF = 0
AUTH_PERMISSIVE = 1
AUTH_ENFORCE = 2
AUTH_MODES = {"off": AUTH_OFF, "permissive": AUTH_PERMISSIVE, "enforce": AUTH_ENFORCE}
# MemberIndex.lookup: the datagram matched a member but failed authentication
# (counted in auth_dropped()); -1 is a miss.
INDEX_DROPPED = -3
