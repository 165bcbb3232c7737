"""The Tribes wire layer: bytes only.

It owns what goes on the network and nothing else: the Tribes heartbeat's
numbers (``layout``), its construct declaration (``schema``), the
authentication trailer's keys and checks (``auth``), the Java-serialization
reader the Tribes channel needs (``javaser``) and the codec's error
(``errors``). It imports nothing of the package but the shared runtime.
"""
