"""The wire layer: bytes only.

It owns what goes on the network and nothing else: the Tribes heartbeat's
numbers (``layout``), its construct declaration (``schema``), the
authentication trailer's keys and checks (``auth``), the Java-serialization
reader the Tribes channel needs (``javaser``) and the errors every layer raises
(``errors``). It imports nothing from the package outside this folder: every
other layer may import it.
"""
