"""Every wire number of memberlist's gossip protocol, in one place.

From memberlist 0.2.2 (Debian's source, the version under serf 0.9.4):
``net.go`` (message types, struct limits, protocol versions), ``security.go``
(encryption sizes and versions), ``util.go`` (LZW parameters, compound
framing), ``state.go`` (node states); and from memberlist >= 0.3's public
``label.go`` (the label header).
"""

from enum import IntEnum


class MessageType(IntEnum):
    """The first byte of every packet, compound part and stream (net.go)."""

    PING = 0
    INDIRECT_PING = 1
    ACK = 2
    SUSPECT = 3
    ALIVE = 4
    DEAD = 5
    PUSH_PULL = 6
    COMPOUND = 7
    USER = 8
    COMPRESS = 9
    ENCRYPT = 10
    NACK = 11
    HAS_CRC = 12
    ERR = 13
    #: memberlist >= 0.3 (label.go): deliberately far from the others
    HAS_LABEL = 244


class NodeState(IntEnum):
    """pushNodeState.State (state.go's NodeStateType)."""

    ALIVE = 0
    SUSPECT = 1
    DEAD = 2
    LEFT = 3


# Protocol versions memberlist 0.2.x understands (net.go); the CRC header goes
# only to nodes whose protocol max is at least 5 (rawSendMsgPacket).
PROTOCOL_VERSION_MIN = 1
PROTOCOL_VERSION_MAX = 5
CRC_MIN_PROTOCOL = 5
#: hasCrc type byte + big-endian CRC-32 (IEEE) of the rest
CRC_HEADER_SIZE = 5

#: alive.Vsn / pushNodeState.Vsn: pmin, pmax, pcur, dmin, dmax, dcur
VSN_SIZE = 6
#: node meta (MetaMaxSize)
META_MAX_SIZE = 512
#: largest TCP state memberlist accepts (maxPushStateBytes)
MAX_PUSH_STATE_BYTES = 20 * 1024 * 1024

# Compound (util.go): type byte, a count byte, one big-endian uint16 length per part.
COMPOUND_MAX_PARTS = 255
COMPOUND_LENGTH_SIZE = 2
COMPOUND_MAX_PART = 0xFFFF

# Compression (net.go compressionType, util.go lzwLitWidth).
LZW_ALGO = 0
LZW_LIT_WIDTH = 8
LZW_MAX_WIDTH = 12
#: a compress message around its LZW bytes: type, fixmap, "Algo" 0, "Buf",
#: and the shortest raw header
COMPRESS_MESSAGE_OVERHEAD = 1 + 1 + 5 + 1 + 4 + 1
#: the most bytes an ack's sequence number takes at its end (0xce + a uint32)
ACK_SEQ_MAX_SIZE = 5

# Encryption (security.go): a version byte, a 12-byte nonce, then AES-GCM output.
ENCRYPTION_VERSION_PADDED = 0  # PKCS#7 padded to the AES block before sealing
ENCRYPTION_VERSION_PLAIN = 1  # no padding
ENCRYPTION_VERSION_MAX = 1
ENCRYPTION_VERSION_SIZE = 1
NONCE_SIZE = 12
TAG_SIZE = 16
AES_BLOCK_SIZE = 16
KEY_SIZES = (16, 24, 32)
#: a stream's encrypt header: type byte + big-endian uint32 length; also the
#: start of the associated data (net.go encryptLocalState)
STREAM_ENCRYPT_HEADER_SIZE = 5

# Label header (label.go, memberlist >= 0.3): type byte, length byte, label.
LABEL_MAX_SIZE = 255
LABEL_HEADER_SIZE = 2

# What a sender budgets for framing when it fills a packet with piggybacked
# broadcasts (net.go, security.go encryptOverhead): assumed, not exact sizes.
COMPOUND_HEADER_OVERHEAD = 2
COMPOUND_OVERHEAD = 2
USER_MSG_OVERHEAD = 1
ENCRYPT_OVERHEAD = {ENCRYPTION_VERSION_PADDED: 45, ENCRYPTION_VERSION_PLAIN: 29}
