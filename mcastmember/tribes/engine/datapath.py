"""DataPath: the one object through which a driver moves the engine's bytes.

The boundary between the sans-IO engine and its drivers (``fronts/``): the
engine decides (when to send, what a datagram means), the driver owns the
sockets and the waiting, and between them runs this object and nothing
else, as aioquic's ``QuicConnection`` hands its driver datagrams to send and
takes those received. A driver never touches the engine's table or its
heartbeat packet: it reads datagrams with ``pump`` (known members'
heartbeats are recognised inside it: compiled, in C without the GIL),
hands each one ``pump`` returns to ``engine.receive`` (with ``source()``
from the unicast socket), and sends what ``engine.outgoing``/``engine.stop``
returned with ``send`` (the group) and ``fan_out`` (every unicast peer),
reporting each result to the engine. What ``outgoing`` returns is opaque to
the driver: it only hands it back here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

    from typing_extensions import Buffer

    from typing_extensions import TypeAlias

    from ..kernel._fast import HeartbeatPacket, Targets
    from .table import Membership

    # What ``engine.outgoing``/``engine.stop`` return: to the driver, only
    # something to hand back to ``send`` and ``fan_out``.
    Outgoing: TypeAlias = HeartbeatPacket


class DataPath:
    """The engine's data path, as ``engine.data_path`` hands it to the driver.

    ``pump(fd, buf, deadline, budget=-1, sources=False)``: receive from
    socket ``fd`` into ``buf`` until a datagram needs ``engine.receive``,
    then return its length; -errno otherwise (-EAGAIN: nothing to read,
    ``deadline`` reached or ``budget`` datagrams handled). ``pending()``:
    datagrams ``pump`` read ahead and holds (call it again, on the same
    socket). ``source()``: ``(address bytes, port)`` of the datagram
    ``pump`` last returned when it kept senders (``sources``), else None.
    These three are the table's own (see ``Membership.pump``), bound once:
    the hot path pays no extra call.
    """

    __slots__ = ("pump", "pending", "source", "_targets")

    pump: Callable[[int, Buffer, float, int, bool], int]
    pending: Callable[[], int]
    source: Callable[[], tuple[bytes, int] | None]

    def __init__(self, table: Membership, targets: Callable[[], Targets | None]) -> None:
        self.pump = table.pump
        self.pending = table.pending
        self.source = table.source
        self._targets = targets

    @staticmethod
    def send(datagram: Outgoing, fd: int) -> int:
        """Send ``datagram`` (from ``engine.outgoing`` or ``engine.stop``) to
        the group on socket ``fd``, its alive time stamped now: bytes sent or
        -errno, for ``engine.on_send_result``."""
        return datagram.send(fd)

    def fan_out(self, datagram: Outgoing, fd: int) -> int:
        """Send ``datagram`` from the unicast socket ``fd`` to every peer the
        engine knows: peers reached or -errno, for ``engine.on_unicast_result``."""
        targets = self._targets()
        assert targets is not None        # a unicast socket: the engine has peers
        return datagram.send_to(fd, targets)
