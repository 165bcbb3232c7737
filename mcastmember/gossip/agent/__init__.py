"""What a Serf agent adds around a gossip member: its RPC (``rpc_*``) and
event handlers. Imports nothing eagerly: each part is loaded by the front or
the tool that uses it."""
