"""The gossip settings declared once (gossip/fronts/settings.py): the
declaration drives the signatures, help() and docstrings of SerfService,
AsyncSerfService and GossipFront, the checks (a ConfigurationError naming
the setting, an UnknownSetting with the likeliest one meant), the table in
docs/gossip.md and the defaults of mcast-demo gossip's flags."""

import inspect
import pathlib
import typing

import pytest

pytest.importorskip("msgpack")
pytest.importorskip("cryptography")

from mcastmember import AsyncSerfService, ConfigurationError, SerfService  # noqa: E402
from mcastmember._runtime.errors import UnknownSetting  # noqa: E402
from mcastmember.gossip.fronts import settings as declared  # noqa: E402
from mcastmember.gossip.fronts.aio import DEFAULT_EVENT_QUEUE  # noqa: E402
from mcastmember.gossip.fronts.driver import GossipFront  # noqa: E402
from mcastmember.gossip.fronts.service import EVENT_QUEUE_BOUND  # noqa: E402
from mcastmember.gossip.fronts.settings import (DEFAULT_BIND_ADDR, DEFAULT_PORT, SETTINGS,  # noqa: E402
                                                SerfServiceSettings, settings_table)
from mcastmember.tools import cli, gossip_cli  # noqa: E402

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs" / "gossip.md"
FRONTS = {SerfService: EVENT_QUEUE_BOUND, AsyncSerfService: DEFAULT_EVENT_QUEUE, GossipFront: None}


def test_the_typed_dict_is_the_declaration():
    assert list(typing.get_type_hints(SerfServiceSettings)) == list(SETTINGS)
    assert SerfServiceSettings.__optional_keys__ == frozenset(SETTINGS)


@pytest.mark.parametrize("cls", FRONTS, ids=lambda cls: cls.__name__)
def test_signatures_and_help_follow_the_declaration(cls):
    """Every setting a keyword-only parameter with its declared default
    (event_queue_size: the front's own), after the positional arguments of
    before; the docstring lists each with its default."""
    params = inspect.signature(cls).parameters
    own_queue = FRONTS[cls]
    keywords = {name: p.default for name, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY
                and name != "lock"}
    assert keywords == {name: own_queue if name == "event_queue_size" and own_queue else spec.default
                        for name, spec in SETTINGS.items()}
    assert [(p.name, p.default) for p in params.values() if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD] \
        == [("name", inspect.Parameter.empty), ("bind_addr", DEFAULT_BIND_ADDR), ("port", DEFAULT_PORT)]
    assert (DEFAULT_BIND_ADDR, DEFAULT_PORT) == ("127.0.0.1", 7946)
    doc = " ".join((cls.__doc__ or "").split())
    for name, spec in SETTINGS.items():
        shown = repr(own_queue) if name == "event_queue_size" and own_queue else spec.shown()
        assert f"``{name}``: {' '.join(spec.doc.split())} (default: {shown})." in doc, name


def test_the_docs_table_follows_the_declaration():
    """docs/gossip.md's table under "## Settings": one row per setting, in
    the declaration's order, with its default and meaning as declared.
    After a change to the declaration, the table to paste is
    ``"\\n".join(mcastmember.gossip.fronts.settings.settings_table())``."""
    lines = DOCS.read_text().splitlines()
    section = lines.index("## Settings")
    start = lines.index("| setting | default | meaning |", section)
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("|"))
    assert lines[start:end] == settings_table(), "docs/gossip.md's table is not the declaration's (see above)"


@pytest.mark.parametrize("cls", [SerfService, AsyncSerfService])
@pytest.mark.parametrize("name", SETTINGS)
def test_a_value_of_the_wrong_type_is_refused_naming_its_setting(cls, name):
    with pytest.raises(ConfigurationError) as caught:
        cls("a", **{name: object()})
    assert str(caught.value).startswith(f"{name} must be ")


@pytest.mark.parametrize("cls", [SerfService, AsyncSerfService])
def test_a_mistyped_keyword_is_refused_with_the_likeliest_setting(cls):
    with pytest.raises(UnknownSetting) as caught:
        cls("a", reconect_interval=5.0)
    assert str(caught.value) == (f"{cls.__name__}() got an unexpected keyword argument 'reconect_interval'. "
                                 "Did you mean 'reconnect_interval'?")
    assert isinstance(caught.value, TypeError)


def _gossip_flags(command):
    parser = cli._build_parser().commands[command]
    return {flag: action for action in parser._actions for flag in action.option_strings}


@pytest.mark.parametrize("command", ["gossip", "doctor"])
def test_every_flag_gives_a_declared_setting_and_has_no_default_of_its_own(command):
    """A flag not given is a setting not given: the declaration's default."""
    flags = _gossip_flags(command)
    assert set(gossip_cli.FLAGS) <= set(SETTINGS)
    for name, flag in gossip_cli.FLAGS.items():
        assert flags[flag].default in (None, []), flag
    assert (gossip_cli.DEFAULT_BIND, gossip_cli.DEFAULT_PORT) == (DEFAULT_BIND_ADDR, DEFAULT_PORT)
    assert f"default {DEFAULT_BIND_ADDR}:{DEFAULT_PORT}" in flags["--bind"].help
    assert f"port {DEFAULT_PORT} by default" in flags["--join"].help


def test_every_flag_of_mcast_demo_gossip_is_a_setting_or_says_where_the_member_is():
    """A flag added to mcast-demo gossip must give a declared setting
    (FLAGS), or the node's name, address or seeds, or shape the demo (its
    output, and where its metrics are served)."""
    flags = set(_gossip_flags("gossip")) - {"-h", "--help"}
    assert flags == set(gossip_cli.FLAGS.values()) | {"--node", "--bind", "--join", "--duration", "--json",
                                                      "--metrics-port", "--metrics-address", "--metrics-prefix"}


def test_flags_not_given_are_the_declared_defaults():
    args = cli._build_parser().parse_args(["gossip", "--node", "a"])
    opts = gossip_cli.options(args, read_keyring=False)
    assert (opts.node, opts.bind, opts.port, opts.settings()) == ("a", DEFAULT_BIND_ADDR, DEFAULT_PORT, {})
    given = SerfService(opts.node, opts.bind, opts.port, **opts.settings())
    default = SerfService("a")
    assert given.node.engine.settings == default.node.engine.settings
    assert given.node.serf_settings == default.node.serf_settings


def test_each_flag_given_reaches_its_setting(tmp_path):
    key = "MDEyMzQ1Njc4OWFiY2RlZg=="          # base64 of b"0123456789abcdef"
    args = cli._build_parser().parse_args(["gossip", "--node", "a", "--bind", "127.0.0.2:7000", "--tag",
                                           "role=web", "--tag", "dc=1", "--encrypt", key, "--label", "blue"])
    opts = gossip_cli.options(args, read_keyring=False)
    assert opts.settings() == {"tags": {"role": "web", "dc": "1"}, "keys": (b"0123456789abcdef",),
                               "label": b"blue"}
    service = SerfService(opts.node, opts.bind, opts.port, **opts.settings())
    assert (service.bind_addr, service.port) == ("127.0.0.2", 7000)
    assert (service.node.engine.settings.keys, service.node.engine.settings.label) == ((b"0123456789abcdef",),
                                                                                       b"blue")
    keyring = tmp_path / "keyring.json"
    keyring.write_text(f'["{key}"]')
    keyring.chmod(0o600)
    args = cli._build_parser().parse_args(["gossip", "--node", "a", "--keyring-file", str(keyring)])
    opts = gossip_cli.options(args, read_keyring=False)
    assert opts.settings() == {"keyring_file": str(keyring)}
    service = SerfService(opts.node, opts.bind, opts.port, **opts.settings())
    assert (service.keyring_file, service.node.engine.settings.keys) == (str(keyring), (b"0123456789abcdef",))


def test_the_engines_settings_are_built_in_one_place_from_the_declaration():
    """Only what was given differs from the engines' defaults; the renamed
    settings reach their fields."""
    front = declared.front_settings("SerfService", "a", "127.0.0.1", 7946,
                                    {"max_outgoing_streams": 9, "serf_limits": declared.SerfLimits(max_tags=3),
                                     "probe_interval": 2}, 100)
    assert (front.gossip.max_streams, front.gossip.probe_interval, front.serf.limits.max_tags) == (9, 2, 3)
    assert (front.max_streams, front.event_queue_size) == (declared.MAX_INCOMING_STREAMS, 100)


@pytest.mark.parametrize("cls", [SerfService, AsyncSerfService])
@pytest.mark.parametrize("settings, message", [
    ({"label": b"x" * 256}, "label is at most 255 bytes, not 256"),
    ({"udp_buffer_size": 63}, "udp_buffer_size must be at least 64 bytes"),
    ({"max_broadcast_bytes": 1000}, "max_broadcast_bytes must hold at least one packet's worth"),
    ({"max_outgoing_streams": 0}, "max_outgoing_streams must be at least 1"),
    ({"max_nodes": 0}, "max_nodes must be at least 1"),
    ({"gossip_interval": 0}, "gossip_interval must be positive"),
    ({"tombstone_timeout": -1}, "tombstone_timeout cannot be negative"),
    ({"max_left_members": 0}, "max_left_members must be at least 1"),
    ({"event_queue_bytes": 0}, "event_queue_bytes must be at least 1"),
])
def test_a_value_out_of_its_range_is_refused_naming_its_setting(cls, settings, message):
    with pytest.raises(ConfigurationError) as caught:
        cls("a", **settings)
    assert str(caught.value) == message


@pytest.mark.parametrize("cls", [SerfService, AsyncSerfService])
def test_keys_come_from_the_keyring_file_or_the_setting_not_both(cls, tmp_path):
    keyring = tmp_path / "keyring.json"
    keyring.write_text('["MDEyMzQ1Njc4OWFiY2RlZg=="]')
    keyring.chmod(0o600)
    with pytest.raises(ConfigurationError) as caught:
        cls("a", keyring_file=str(keyring), keys=[bytes(16)])
    assert str(caught.value) == "give the keys in the keyring file or in the setting 'keys', not both"
    assert cls("a", keyring_file=str(keyring)).node.engine.settings.keys == (b"0123456789abcdef",)
