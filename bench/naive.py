"""The naive baseline: membership the way Tomcat 5.5's McastMember did it.

Every send re-encodes the name and domain and resolves the host again; every
receive decodes every field into strings and builds a new member object, then
finds the member by its text identity. Same wire format as mcastmember, so
the benchmark compares like with like.
"""

import socket
import struct
import time

BEGIN = b"TRIBES-B\x01\x00"
END = b"TRIBES-E\x01\x00"


class NaiveSender:
    def __init__(self, hostname, port, unique_id, domain="", payload=""):
        self.hostname, self.port, self.unique_id = hostname, port, unique_id
        self.domain, self.payload = domain, payload
        self.started = time.time()

    def packet(self):
        host = socket.inet_aton(socket.gethostbyname(self.hostname))
        command = b""
        domain = self.domain.encode("iso-8859-1")
        payload = self.payload.encode("utf-8")
        alive = int((time.time() - self.started) * 1000)
        body = b"".join([
            struct.pack(">qiiib", alive, self.port, -1, -1, len(host)), host,
            struct.pack(">i", len(command)), command,
            struct.pack(">i", len(domain)), domain,
            bytes.fromhex(self.unique_id),
            struct.pack(">i", len(payload)), payload])
        return BEGIN + struct.pack(">i", len(body)) + body + END


class NaiveMember:
    def __init__(self, **fields):
        self.__dict__.update(fields)


class NaiveReceiver:
    def __init__(self):
        self.members = {}

    def receive(self, data, n):
        data = bytes(data[:n])
        if data[:10] != BEGIN:
            return None
        body_len, = struct.unpack_from(">i", data, 10)
        alive, port, secure, udp, host_len = struct.unpack_from(">qiiib", data, 14)
        pos = 35
        host = socket.inet_ntoa(data[pos:pos + host_len])
        pos += host_len
        fields = {}
        for name in ("command", "domain"):
            length, = struct.unpack_from(">i", data, pos)
            fields[name] = data[pos + 4:pos + 4 + length].decode("iso-8859-1")
            pos += 4 + length
        unique_id = data[pos:pos + 16].hex()
        pos += 16
        length, = struct.unpack_from(">i", data, pos)
        payload = data[pos + 4:pos + 4 + length].decode("utf-8", "replace")
        if data[14 + body_len:24 + body_len] != END:
            return None
        member = NaiveMember(host=host, port=port, secure_port=secure, udp_port=udp,
                             unique_id=unique_id, payload=payload, alive=alive,
                             heard=time.monotonic(), **fields)
        key = f"{host}:{port}:{unique_id}"
        known = self.members.get(key)
        self.members[key] = member
        return known is None
