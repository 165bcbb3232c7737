"""memberlist's layer, as bytes and rules only (sans-IO): what HashiCorp
memberlist puts on UDP and TCP, and SWIM with Lifeguard as it runs it.

The wire: ``layout`` (every wire number), ``msgpack_go`` (msgpack as
go-msgpack writes it), ``messages``, ``lzw``, ``crypto`` (AES-GCM keyring),
``label`` (memberlist >= 0.3's label header), ``framing`` (compounds, CRC,
compression, whole packets and stream messages), ``limits`` and ``errors``.
The matcher of the most frequent messages: ``_matcher`` (compiled) and
``_matcher_py`` (its twin), chosen by ``matcher``. The engine: ``engine``
and the parts it owns and calls (``fast_path``, ``probing``, ``streams``,
``rules``, ``outbox``, over the shared state of ``core``), the node table
(``state``), ``awareness``, ``suspicion``, the transmit-limited queue
(``broadcasts``), ``events`` and ``settings``.

It imports the shared runtime only; nothing of Serf, the fronts or Tribes.
"""
