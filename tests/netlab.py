"""A small LAN of hosts made of network namespaces, for multi-host tests.

Every host is a namespace with one veth link (eth0, 10.250.0.N/24) to a
bridge that lives in its own "switch" namespace, so nothing is added to or
sent on the machine's own network. Needs root and iproute2; ``Lan.available()``
says why not otherwise.
"""

import json
import os
import queue
import shutil
import subprocess
import threading
import time
import uuid

SUBNET = "10.250.0"


def _ip(*args):
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


class Lan:
    def __init__(self, hosts=3):
        self.tag = uuid.uuid4().hex[:6]
        self.switch = f"mcm{self.tag}sw"
        self.hosts = [f"mcm{self.tag}h{i}" for i in range(1, hosts + 1)]
        self.created = []

    @staticmethod
    def available():
        if os.geteuid() != 0:
            return "multi-host tests need root (network namespaces)"
        if not shutil.which("ip"):
            return "iproute2 (ip) is not installed"
        return None

    def address(self, index):
        return f"{SUBNET}.{index + 1}"

    def port_name(self, index):
        return f"sw{index + 1}"

    def __enter__(self):
        try:
            _ip("netns", "add", self.switch)
            self.created.append(self.switch)
            _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
            # Flood multicast to every port (no IGMP snooping on this switch).
            _ip("-n", self.switch, "link", "set", "br0", "type", "bridge", "mcast_snooping", "0")
            _ip("-n", self.switch, "link", "set", "br0", "up")
            for i, host in enumerate(self.hosts):
                _ip("netns", "add", host)
                self.created.append(host)
                _ip("-n", self.switch, "link", "add", f"h{i + 1}", "type", "veth", "peer", "name",
                    self.port_name(i))
                _ip("-n", self.switch, "link", "set", f"h{i + 1}", "netns", host)
                _ip("-n", host, "link", "set", f"h{i + 1}", "name", "eth0")
                _ip("-n", host, "addr", "add", f"{self.address(i)}/24", "dev", "eth0")
                _ip("-n", host, "link", "set", "lo", "up")
                _ip("-n", host, "link", "set", "eth0", "up")
                _ip("-n", self.switch, "link", "set", self.port_name(i), "master", "br0")
                _ip("-n", self.switch, "link", "set", self.port_name(i), "up")
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc):
        for ns in reversed(self.created):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)
        self.created = []

    def unplug(self, index):
        """Pull host ``index``'s cable out at the switch."""
        _ip("-n", self.switch, "link", "set", self.port_name(index), "down")

    def plug(self, index):
        _ip("-n", self.switch, "link", "set", self.port_name(index), "up")

    def link(self, index, state):
        """Take host ``index``'s own interface down or up."""
        _ip("-n", self.hosts[index], "link", "set", "eth0", state)

    def run(self, index, argv, **kw):
        return subprocess.Popen(["ip", "netns", "exec", self.hosts[index], *argv], **kw)


class JsonProcess:
    """A process in a host that prints one JSON object per line; the lines are
    collected with the time they arrived."""

    def __init__(self, lan, index, argv):
        self.index = index
        self.proc = lan.run(index, argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
        self.lines = []
        self._new = queue.Queue()
        self.stderr = ""
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_err, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            try:
                item = (time.monotonic(), json.loads(line))
            except ValueError:
                continue
            self.lines.append(item)
            self._new.put(item)

    def _read_err(self):
        self.stderr = self.proc.stderr.read()

    def wait_for(self, predicate, timeout=5.0):
        deadline = time.monotonic() + timeout
        while True:
            for seen, item in list(self.lines):
                if predicate(item):
                    return seen, item
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"host {self.index}: nothing matched in {timeout}s; "
                                     f"got {[i for _, i in self.lines]}; stderr {self.stderr}")
            try:
                self._new.get(timeout=min(left, 0.05))
            except queue.Empty:
                pass

    def stop(self, sig=None):
        import signal
        if self.proc.poll() is None:
            self.proc.send_signal(sig or signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


_CLONE_NEWNET = 0x40000000


def run_in_netns(name, function, *args, timeout=30.0):
    """Call ``function(*args)`` on a thread that entered namespace ``name``
    (setns acts per thread) and return its result or raise its exception."""
    import ctypes
    result = {}

    def body():
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            path = f"/run/netns/{name}"
            fd = os.open(path, os.O_RDONLY)
            try:
                if libc.setns(fd, _CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), f"setns into {name} failed")
            finally:
                os.close(fd)
            if os.stat("/proc/thread-self/ns/net").st_ino != os.stat(path).st_ino:
                raise OSError(f"thread did not enter {name}")
            result["value"] = function(*args)
        except BaseException as error:     # handed to the caller
            result["error"] = error

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise TimeoutError(f"{function.__name__} did not return within {timeout} s")
    if "error" in result:
        raise result["error"]
    return result["value"]
