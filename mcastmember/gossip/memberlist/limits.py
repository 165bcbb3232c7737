"""Bounds on everything the network can grow, for every parser of the layer."""

from dataclasses import dataclass

from . import layout

#: Node states each of the process's two node-state memos (encodings by
#: fields, fields by encoding; messages.NodeMemo) keeps: a member's whole
#: table up to this size, or the states a simulator's members share.
NODE_MEMO_ENTRIES = 32_768
#: Encoding bytes each memo keeps (the keys and values hold about twice that).
NODE_MEMO_BYTES = 4 << 20
#: A node state encoded in more bytes than this is never kept.
NODE_MEMO_MAX_ONE = 2048
#: Decode memos, one per distinct set of the limits a node state's decoding
#: depends on (engines of one process with other Limits); past it, none.
NODE_MEMO_LIMIT_SETS = 4


@dataclass(frozen=True)
class Limits:
    """What a parser accepts before it gives up with a GossipWireError.

    The defaults follow memberlist where it has a bound (``maxPushStateBytes``
    for streams, 512 bytes of node meta) and are generous but finite elsewhere
    (memberlist 0.2 has no bound on push/pull node counts or on nested compound
    and compress wrappers); a datagram's decompressed bytes are bounded far
    tighter than a stream's (see ``max_packet_decompressed``).
    """

    #: a whole UDP packet, before decryption (IPv4's largest datagram)
    max_packet: int = 65535
    #: a whole TCP stream message (memberlist: maxPushStateBytes, 20 MiB)
    max_stream: int = layout.MAX_PUSH_STATE_BYTES
    #: bytes the LZW payload of one stream message (a push/pull) may decompress to
    max_decompressed: int = layout.MAX_PUSH_STATE_BYTES
    #: bytes the LZW payloads of all the unfinished streams others opened to
    #: us may decompress to, together (the engine's, not one stream's): a
    #: stream is decoded a turn at a time, its decompressed bytes held until
    #: it is merged, so without it each of the front's stream slots could
    #: hold ``max_decompressed`` from a few KB of LZW (32 slots, 640 MiB).
    #: A push/pull of a 16,384-node cluster is a few MB once decompressed
    #: and a member is sent one or two at a time: 64 MiB holds a dozen of
    #: those, or three at the 20 MiB stream bound. The stream that would go
    #: past it is refused (bad input "stream_memory") and its bytes let go.
    max_streams_decompressed: int = 64 * 1024 * 1024
    #: bytes the compressed messages of one UDP packet may decompress to, all
    #: together. Far below the stream's bound, because a datagram is decoded
    #: on the thread that answers the pings: an LZW code can stand for 4 KB,
    #: so a 16 KB datagram can claim a stream's 20 MiB (tens of milliseconds
    #: of decoding each, and a flood of them starves the pings). What
    #: memberlist puts in one packet is built to fit UDPBufferSize before it
    #: is compressed (a compound of broadcasts to the packet's room; a ping,
    #: ack or Serf answer far smaller), and a packet is one datagram of at
    #: most 64 KiB: 64 KiB decompressed holds all of them. Only a user
    #: message sent best-effort that needs compression to fit a datagram at
    #: all is refused (Serf bounds its own far below that). Streams (a
    #: push/pull) keep ``max_decompressed``.
    max_packet_decompressed: int = 64 * 1024
    #: one string or byte string inside a msgpack body
    max_string: int = layout.MAX_PUSH_STATE_BYTES
    #: entries of one msgpack array or map (a struct has at most 8 fields)
    max_container: int = 64
    #: msgpack containers inside each other; compound/compress wrappers inside each other
    max_nesting: int = 4
    #: node states in one push/pull
    max_push_nodes: int = 100_000
    #: the delegate's user state in one push/pull or user stream
    max_user_state: int = layout.MAX_PUSH_STATE_BYTES
    #: messages taken out of one packet, all compounds together
    max_messages: int = 1024
