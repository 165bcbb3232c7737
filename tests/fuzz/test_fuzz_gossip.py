"""Fuzzing of the gossip decoders and Serf's layer in the normal suite: a
short run of tests/fuzz/fuzz_gossip.py (the long one is CI's), a short
hypothesis run of its own, and the replay of what the fuzzer once crashed on
(tests/fuzz/corpus/gossip_serf/)."""

import pathlib
import tracemalloc

import pytest

pytest.importorskip("msgpack")

from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

import fuzz_gossip  # noqa: E402
from mcastmember.gossip.memberlist import framing  # noqa: E402
from mcastmember.gossip.memberlist import messages as wire  # noqa: E402
from mcastmember.gossip.memberlist.layout import MessageType  # noqa: E402
from mcastmember.gossip.serf import messages as serf  # noqa: E402

# Serf's layer and the decoders beneath it are one implementation (the hot
# path's matcher has its own fuzzer, run on both): CI's compiled pass runs
# these (single_pass).
pytestmark = pytest.mark.single_pass

CORPUS = sorted(fuzz_gossip.CORPUS.glob("*.txt"))


def test_a_short_fuzz_run_is_clean_and_its_memory_bounded():
    """A few thousand inputs of every kind: no exception escapes, the
    tables stay within their bounds (checked by the run), and what Python
    holds after the warm-up (tracemalloc) grows by less than 4 MiB."""
    tracemalloc.start()
    try:
        fuzz_gossip.run(300, seed=7, report=False, group=300)
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        kinds = fuzz_gossip.run(1200, seed=8, report=False, group=300)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert kinds["packet"] > 700 and kinds["stream"] > 200 and kinds["reply"] > 0
    assert kinds["serf_messages"] > 0 and kinds["serf_messages_bad"] > 0
    assert peak - before < 4 * 2**20, f"{(peak - before) / 2**20:.1f} MiB"


def test_what_the_fuzzer_crashed_on_is_taken_quietly_now():
    for path in CORPUS:
        fuzz_gossip.replay(path)


NODE_CONFIGS = [
    {"keys": (), "label": b"", "verify": True, "protocol": 5, "max_nodes": 4, "max_gone": 1, "tags": {"role": "web"}},
    {"keys": (fuzz_gossip.KEY,), "label": fuzz_gossip.LABEL, "verify": False, "protocol": 4, "max_nodes": 4,
     "max_gone": 1, "tags": {"role": "y" * 36}},
]
ltimes = st.sampled_from(fuzz_gossip.TIMES) | st.integers(0, 2**64 - 1)  # Go uint64s, their ends first
names = st.sampled_from(fuzz_gossip.PEERS) | st.text(max_size=8)
serf_messages = st.one_of(
    st.builds(serf.Join, ltime=ltimes, node=names),
    st.builds(serf.Leave, ltime=ltimes, node=names, prune=st.booleans()),
    st.builds(serf.UserEvent, ltime=ltimes, name=names, payload=st.binary(max_size=16), cc=st.booleans()),
    st.builds(serf.Query, ltime=ltimes, id=st.integers(0, 2**32 - 1), addr=st.sampled_from(fuzz_gossip.ADDRS),
              port=st.integers(0, 65535), source_node=names,
              filters=st.lists(st.builds(serf.encode_tag_filter, st.sampled_from(["role", "dc"]),
                                         st.sampled_from(fuzz_gossip.PATTERNS) | st.text(max_size=12))
                               | st.builds(serf.encode_node_filter, st.lists(names, max_size=3)), max_size=3),
              flags=st.integers(0, 2**32 - 1), relay_factor=st.integers(0, 255),
              timeout=st.integers(-2**63, 2**63 - 1), name=st.sampled_from(fuzz_gossip.NAMES) | names,
              payload=st.binary(max_size=16)),
    st.builds(serf.QueryResponse, ltime=ltimes, id=st.integers(0, 2**32 - 1), from_=names,
              flags=st.integers(0, 2**32 - 1), payload=st.binary(max_size=16)),
).map(serf.encode)
#: Serf's push/pull user state, about the members the node knows (mostly)
known = st.sampled_from(["serf-1", "serf-2"]) | names


@st.composite
def states(draw):
    times = draw(st.dictionaries(known, ltimes, max_size=3))
    left = draw(st.lists(st.sampled_from(sorted(times)) if times else known, max_size=3) | st.lists(known, max_size=2))
    slots = draw(st.lists(st.none() | st.builds(serf.EventSlot, ltime=ltimes, events=st.lists(
        st.builds(serf.EventEntry, name=names, payload=st.binary(max_size=8)), max_size=2)), max_size=4))
    return serf.encode(serf.SerfPushPull(ltime=draw(ltimes), status_ltimes=times, left_members=left,
                                     event_ltime=draw(ltimes), events=slots, query_ltime=draw(ltimes)))


#: two members Serf knows, whose status times the drawn messages may move
ALIVES = framing.make_compound([wire.encode(wire.Alive(incarnation=1, node=name, addr=bytes((127, 0, 0, 2 + i)),
                                                       port=7946, meta=b"", vsn=fuzz_gossip.VSNS[0]))
                                for i, name in enumerate(["serf-1", "serf-2"])])


def _cut_or_flip(data, edit):
    """``data`` cut at, or with one bit flipped at, a drawn position."""
    at, bit, cut = edit
    if not data:
        return data
    at %= len(data)
    return data[:at] if cut else data[:at] + bytes((data[at] ^ (1 << bit),)) + data[at + 1:]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(config=st.sampled_from(NODE_CONFIGS), msgs=st.lists(serf_messages | states(), min_size=1, max_size=4),
       user_state=states(),
       edit=st.none() | st.tuples(st.integers(0, 2**16), st.integers(0, 7), st.booleans()),
       compress=st.booleans(), raw=st.binary(max_size=64))
def test_serf_messages_drawn_by_hypothesis_never_raise(config, msgs, user_state, edit, compress, raw):
    """Valid Serf messages from drawn fields (any uint64 time, any text,
    hostile filters), perhaps cut or flipped, in one packet (a compound,
    perhaps compressed), in a user stream and in a push/pull's user state;
    and drawn bytes as they are: no exception, the tables within bounds."""
    node = fuzz_gossip.make_node(config)
    keyring = fuzz_gossip.crypto.Keyring(config["keys"]) if config["keys"] else None
    label = config["label"]
    msgs = [_cut_or_flip(m, edit) if edit else m for m in msgs]
    body = framing.make_compound([ALIVES] + [bytes((MessageType.USER,)) + m for m in msgs])
    packet = framing.encode_packet(body, compress=compress, crc=True, label=label, keyring=keyring)
    user, state = (framing.encode_stream(inner, compress=compress, label=label, keyring=keyring) for inner in (
        wire.encode_user_stream(msgs[-1]), wire.encode_push_pull(wire.PushPull(join=True, user_state=user_state))))
    # the state twice: the second reply carries what the first merged
    for now, (kind, data) in enumerate([("packet", packet), ("packet", raw), ("stream", raw), ("stream", user),
                                        ("stream", state), ("stream", state)]):
        fuzz_gossip.feed(node, kind, data, float(now))
        node.on_timer(float(now))
    node.outgoing(10.0)
    node.streams_to_open(10.0)
    node.events()
    fuzz_gossip.check_bounds(node)
