"""Settings declared once: engine/settings.py's
declaration drives the TypedDict, the signatures and help() of ServiceConfig
and both fronts, mcast-demo's flags and the table in docs/usage.md; checking
settings does no I/O, and resolving them on this host is a step of its own,
which the doctor takes after its own checks."""

import builtins
import inspect
import io
import os
import pathlib
import re
import socket
import typing

import pytest

from mcastmember import AsyncMembership, ConfigurationError, McastService, ServiceConfig
from mcastmember.tribes.engine.config import CheckedSettings, Settings
from mcastmember.tribes.engine.settings import DEFAULT_PORT, SETTINGS
from mcastmember.tools import cli
from mcastmember.tools.doctor import Doctor

from support import GROUP

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs" / "usage.md"
KEY_LINE = "1 " + "ab" * 32 + "\n"


def test_the_typed_dict_is_the_declaration():
    assert list(typing.get_type_hints(Settings)) == list(SETTINGS)
    assert Settings.__optional_keys__ == frozenset(SETTINGS)


@pytest.mark.parametrize("cls", [ServiceConfig, CheckedSettings, McastService, AsyncMembership])
def test_signatures_and_help_follow_the_declaration(cls):
    params = inspect.signature(cls).parameters
    keywords = {name: p.default for name, p in params.items()
                if p.kind is inspect.Parameter.KEYWORD_ONLY and name in SETTINGS}
    assert keywords == {name: spec.default for name, spec in SETTINGS.items()}
    assert params["port"].default == DEFAULT_PORT
    doc = " ".join((cls.__doc__ or "").split())
    for name, spec in SETTINGS.items():
        assert f"``{name}``: {spec.doc} (default: {spec.shown()})." in doc, name


def test_the_docs_table_follows_the_declaration():
    """docs/usage.md's table: one row per setting, in the declaration's
    order, with its default as the declaration shows it."""
    lines = DOCS.read_text().splitlines()
    start = lines.index("| setting | default | meaning |") + 2
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        name, shown, _ = (cell.strip() for cell in line.strip("|").split(" | "))
        rows.append((name, shown))
    assert rows == [(f"`{name}`", spec.shown().replace("``", "`"))
                    for name, spec in SETTINGS.items()]


def _flags(command):
    parser = cli._build_parser().commands[command]
    return {action.dest: action for action in parser._actions if action.option_strings}


@pytest.mark.parametrize("command", ["join", "doctor"])
def test_every_setting_is_a_flag_of_join_or_left_out_by_name(command):
    """A setting added to the declaration must get a flag (or be named as
    left out); a flag's help shows the declared default, and the flag has
    none of its own (a flag not given is the library's default)."""
    flags = _flags(command)
    assert cli._NOT_FLAGS <= set(SETTINGS)
    for name, spec in SETTINGS.items():
        if name in cli._NOT_FLAGS:
            assert cli._DESTS.get(name) is None, name
            continue
        action = flags[cli._DESTS[name]]
        if action.nargs != 0:       # a switch's default is False: not given
            assert action.default in (None, []), name
        if spec.default not in (None, False, True, (), b"", "fixed"):
            assert f"({spec.shown()})" in action.help, name
    assert flags["port"].default == DEFAULT_PORT and f"({DEFAULT_PORT})" in flags["port"].help


@pytest.mark.parametrize("argv", [["join", GROUP], ["doctor", GROUP], ["watch", GROUP]])
def test_flags_not_given_are_the_declared_defaults(argv):
    args = cli._build_parser().parse_args(argv)
    settings = cli._settings(args)
    for name, value in settings.items():
        if name != "listen_only":
            assert value == SETTINGS[name].default, name
    given = vars(CheckedSettings(GROUP, args.port, **settings))
    defaults = vars(CheckedSettings(GROUP, DEFAULT_PORT, listen_only=argv[0] == "watch"))
    assert given.pop("phi") is defaults.pop("phi") is None
    assert given == defaults


def test_each_flag_given_reaches_its_setting():
    args = cli._build_parser().parse_args([
        "join", GROUP, "--port", "4", "--interface", "lo,eth0", "--ttl", "0", "--host",
        "10.0.0.1", "--member-port", "5", "--domain", "d", "--payload", "p", "--frequency",
        "100", "--drop-time", "900", "--max-members", "7", "--peers", "a,b", "--peers", "c",
        "--dns", "n", "--dns-srv", "--dns-interval", "200", "--dns-server", "10.0.0.2",
        "--accept-unknown", "--verify", "--verify-timeout", "9", "--detector", "phi",
        "--phi-threshold", "3", "--tomcat", "--no-tcp-listener", "--key-file", "k",
        "--auth", "permissive"])
    assert cli._settings(args) == {
        "interface": ["lo", "eth0"], "ttl": 0, "host": "10.0.0.1", "member_port": 5,
        "domain": "d", "payload": "p", "frequency": 100, "drop_time": 900, "max_members": 7,
        "peers": ["a", "b", "c"], "dns": "n", "dns_srv": True, "dns_interval": 200,
        "dns_servers": ["10.0.0.2"], "accept_unknown": True, "verify": True,
        "verify_timeout": 9, "detector": "phi", "phi_threshold": 3.0, "tomcat": True,
        "tcp_listener": False, "keys": "k", "auth": "permissive"}
    assert set(cli._settings(args)) | cli._NOT_FLAGS == set(SETTINGS) - {"multicast",
                                                                        "dns_members"}


@pytest.fixture
def no_io(monkeypatch, tmp_path):   # (tmp_path made before the I/O stops)
    """Opening a socket or a file, or listing the cards, raises."""
    def refuse(*args, **kwargs):
        raise AssertionError(f"I/O while checking settings: {args!r}")

    from mcastmember.tribes.net import interfaces
    for owner, name in ((socket, "socket"), (builtins, "open"), (io, "open"),
                        (os, "open"), (interfaces, "list_interfaces")):
        monkeypatch.setattr(owner, name, refuse)
    return monkeypatch


def test_checking_settings_opens_no_socket_and_reads_no_file(no_io, tmp_path):
    keys = tmp_path / "keys"
    checked = CheckedSettings(GROUP, 45564, interface="127.0.0.1", keys=str(keys),
                              verify=True, peers="10.0.0.5,10.0.0.6:4000", frequency=100,
                              drop_time=1000, detector="phi")
    assert (checked.interface_specs, checked.keys, checked.auth) == (["127.0.0.1"],
                                                                      str(keys), "enforce")
    assert checked.seconds == {"frequency": 0.1, "drop_time": 1.0, "dns_interval": 5.0,
                               "verify_timeout": 0.3, "phi_min_std": 0.1, "phi_pause": 0.2}
    for settings, message in (({"frequency": 0}, "frequency 0 is out of range"),
                              ({"auth": "enforce"}, "auth='enforce' needs keys"),
                              ({"multicast": False, "peers": "10.0.0.5"},
                               "without multicast, set interface=")):
        with pytest.raises(ConfigurationError, match=re.escape(message)):
            CheckedSettings(GROUP, 45564, **settings)
    no_io.undo()
    with pytest.raises(ConfigurationError, match="No such file"):
        checked.resolve()
    keys.write_text(KEY_LINE)
    keys.chmod(0o600)
    config = checked.resolve()
    assert isinstance(config, ServiceConfig)
    assert (config.interface, config.host, list(config.key_ring.keys)) == (
        "127.0.0.1", b"\x7f\x00\x00\x01", [1])
    assert config.local_member().port == 4000


def test_the_config_is_never_written_by_the_engine():
    """The advertised member changes (payload, domain, the member port a
    listener got, the keys); the settings a service was made with don't."""
    service = McastService(GROUP, 45564, interface="127.0.0.1", ttl=0, member_port=0,
                           payload=b"a")
    before = dict(vars(service.config))
    service.set_payload(b"b")
    service.set_domain(b"d")
    service.set_keys([(1, b"k" * 32)])
    service._engine.set_member_port(4321)
    assert vars(service.config) == before
    assert (service.local_member.payload, service.local_member.domain,
            service.local_member.port, service.auth) == (b"b", b"d", 4321, "enforce")


def test_the_doctor_checks_the_settings_with_no_io_then_resolves_them(no_io, monkeypatch,
                                                                      tmp_path):
    """Building the doctor checks the settings (a usage error raises) with
    no I/O: no throwaway config of a fake host, no key file read; its local
    checks resolve them, the group given included."""
    keys = tmp_path / "keys"
    doctor = Doctor(GROUP, 45564, {"interface": "127.0.0.1", "keys": str(keys)}, wait=0)
    assert doctor.config is None
    with pytest.raises(ConfigurationError, match="drop_time .* must be longer"):
        Doctor(GROUP, 45564, {"drop_time": 100}, wait=0)
    no_io.undo()
    resolved = []
    resolve = CheckedSettings.resolve
    monkeypatch.setattr(CheckedSettings, "resolve",
                        lambda self: resolved.append(self) or resolve(self))
    from mcastmember.tools.doctor import local
    with pytest.raises(ConfigurationError, match="No such file"):
        local.checks(doctor)
    assert [(checked.address, checked.keys) for checked in resolved] == [(GROUP, str(keys))]
