"""Every number of Serf's own protocol, in one place.

From serf 0.9.4 (Debian's source): ``serf/messages.go`` (message types, query
flags, filter types), ``serf/serf.go`` (tag magic byte, protocol versions,
event size limits), ``serf/config.go`` (defaults of the buffers, timeouts and
query sizes), ``serf/internal_query.go`` (internal query names),
``serf/ping_delegate.go`` (the ping-ack payload version).
"""

from enum import IntEnum


class SerfMessageType(IntEnum):
    """The first byte of every Serf message inside a memberlist user message
    (and of the push/pull user state, key requests and responses)."""

    LEAVE = 0
    JOIN = 1
    PUSH_PULL = 2
    USER_EVENT = 3
    QUERY = 4
    QUERY_RESPONSE = 5
    CONFLICT_RESPONSE = 6
    KEY_REQUEST = 7
    KEY_RESPONSE = 8
    RELAY = 9


class MemberStatus(IntEnum):
    """Serf's MemberStatus (serf.go): what ``serf members`` shows."""

    NONE = 0
    ALIVE = 1
    LEAVING = 2
    LEFT = 3
    FAILED = 4


class FilterType(IntEnum):
    """The first byte of a query filter (messages.go filterType)."""

    NODE = 0
    TAG = 1


# Query flags (messages.go).
QUERY_FLAG_ACK = 1
QUERY_FLAG_NO_BROADCAST = 2

#: node meta starting with this byte holds msgpack tags; anything else is a
#: bare role (Serf protocol < 3)
TAG_MAGIC_BYTE = 255
#: the Serf protocol version from which tags (not a bare role) are sent
TAGS_MIN_PROTOCOL = 3
#: Serf protocol versions 0.9.4 understands (the memberlist delegate versions)
PROTOCOL_VERSION_MIN = 2
PROTOCOL_VERSION_MAX = 5
#: queries need this Serf protocol version
QUERY_MIN_PROTOCOL = 4
#: the Serf protocol an agent speaks by default (cmd/serf's agent config)
AGENT_PROTOCOL_VERSION = PROTOCOL_VERSION_MAX
#: memberlist's protocol version for each Serf protocol version (config.go
#: ProtocolVersionMap); the Serf version itself is memberlist's *delegate*
#: version: alive.Vsn = (1, 5, this, PROTOCOL_VERSION_MIN, PROTOCOL_VERSION_MAX, serf version)
MEMBERLIST_PROTOCOL_FOR = {2: 2, 3: 2, 4: 2, 5: 2}

#: name + payload of a user event, never more (serf.go UserEventSizeLimit)
USER_EVENT_SIZE_LIMIT = 9 * 1024

# Defaults of serf.DefaultConfig() (config.go).
DEFAULT_USER_EVENT_SIZE_LIMIT = 512
DEFAULT_EVENT_BUFFER = 512
DEFAULT_QUERY_BUFFER = 512
DEFAULT_QUERY_SIZE_LIMIT = 1024
DEFAULT_QUERY_RESPONSE_SIZE_LIMIT = 1024
DEFAULT_QUERY_TIMEOUT_MULT = 16
#: seconds a buffered join/leave intent is kept for a node not yet known
DEFAULT_RECENT_INTENT_TIMEOUT = 5 * 60.0
DEFAULT_REAP_INTERVAL = 15.0
DEFAULT_RECONNECT_TIMEOUT = 24 * 3600.0
DEFAULT_TOMBSTONE_TIMEOUT = 24 * 3600.0

# Internal queries (internal_query.go): the prefix, then the names.
INTERNAL_QUERY_PREFIX = "_serf_"
QUERY_PING = INTERNAL_QUERY_PREFIX + "ping"
QUERY_CONFLICT = INTERNAL_QUERY_PREFIX + "conflict"
QUERY_INSTALL_KEY = INTERNAL_QUERY_PREFIX + "install-key"
QUERY_USE_KEY = INTERNAL_QUERY_PREFIX + "use-key"
QUERY_REMOVE_KEY = INTERNAL_QUERY_PREFIX + "remove-key"
QUERY_LIST_KEYS = INTERNAL_QUERY_PREFIX + "list-keys"
#: the shortest a key takes in a list-keys response: bounds how many fit
MIN_ENCODED_KEY_LENGTH = 25

#: the version byte before the coordinate in a ping ack (ping_delegate.go)
PING_VERSION = 1

#: Lamport times are Go uint64s: they wrap past this
LAMPORT_MASK = (1 << 64) - 1

# Network coordinates (coordinate/config.go DefaultConfig, client.go, coordinate.go).
#: the Vivaldi space's dimensions: a coordinate with another count is refused
COORDINATE_DIMENSIONALITY = 8
#: an error estimate never above this (a new coordinate starts there)
VIVALDI_ERROR_MAX = 1.5
#: how fast the error estimate and the coordinate follow a sample
VIVALDI_CE = 0.25
VIVALDI_CC = 0.25
#: samples averaged into the coordinate's adjustment term
ADJUSTMENT_WINDOW_SIZE = 20
#: seconds: the least height (and a new coordinate's)
HEIGHT_MIN = 10.0e-6
#: RTT samples per node whose median is used
LATENCY_FILTER_SIZE = 3
#: seconds: how strongly a coordinate is pulled back to the origin
GRAVITY_RHO = 150.0
#: distances and RTTs below this (seconds) count as this
COORDINATE_ZERO_THRESHOLD = 1.0e-6
#: nanoseconds: an RTT above this is refused (client.go Update)
MAX_RTT_NS = 10 * 1_000_000_000
