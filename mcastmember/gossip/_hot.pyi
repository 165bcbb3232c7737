# The compiled matcher's interface (mcastmember/gossip/_hot.pyx); the
# pure-Python twin _hot_py.py agrees with it name for name.

PING: int
ACK: int
SUSPECT: int
ALIVE: int
DEAD: int

def unwrap(buf: bytes, label_header: bytes, max_packet: int, max_messages: int) -> list[bytes] | None: ...
def match(buf: bytes, me: bytes) -> tuple[object, ...] | None: ...
def ack(prefix: bytes, seq: int) -> bytes: ...
