"""The runtime both protocols share, and neither owns.

What a membership service needs whatever its protocol, written once so that
both wings behave the same: the configuration errors (``errors``), events
on their way to the application (``events``: the buffer bounded in count and
bytes, the threaded queue, ``EventsLost``; ``dispatch``: a threaded
service's listeners, their dispatcher thread and replay; ``aio_events``: the
asyncio event stream, its builder and the waiters), sockets (``net``) and
what every listening socket shares (``listen``: connection shares per
source, the accept back-off), fork safety (``forks``: a forked child's copy
of a running service is inert), the choice between a compiled module and its
pure-Python twin (``chooser``), the metrics HTTP server (``metrics_http``),
files of secrets (``secrets``), a rate-limited log (``ratelimit``) and the
settings' units (``units``).

It imports nothing of either wing (``tribes``, ``gossip``); both import it.
"""
