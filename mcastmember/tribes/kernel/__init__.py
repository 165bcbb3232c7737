"""The kernel layer: the heartbeat's hot path.

The compiled module ``_fast`` (``_fast.pyx``, typed by ``_fast.pyi``, with the
C SHA-256/HMAC of ``_auth.h``) and its pure-Python twin ``_fast_py``, which
behave identically; ``codec`` picks one. The build, the stub, the header and
the twin are one unit, so they share this folder. It imports the wire layer
only.
"""
