"""Settings: what each setting takes, refused with a
ConfigurationError when it is not that. No sockets are opened."""

import asyncio
import subprocess
import sys

import pytest

from mcastmember import ConfigurationError, McastService
from mcastmember.tribes.engine.config import ServiceConfig

from support import GROUP, LOOPBACK

LOCAL = {"host": "127.0.0.1"}      # no route look-up, no interface check


def config(**settings):
    return ServiceConfig(GROUP, 45564, **LOCAL, **settings)


@pytest.mark.parametrize("settings, message", [
    (dict(unique_id=16), "unique_id must be bytes"),
    (dict(payload=3), "payload must be bytes"),
    (dict(payload=[1, 2]), "payload must be bytes"),
    (dict(domain=None), "domain must be bytes"),
    (dict(domain=7), "domain must be bytes"),
    (dict(tcp_listener="no"), "tcp_listener must be True or False"),
    (dict(tcp_listener=0), "tcp_listener must be True or False"),
    (dict(loopback="false"), "loopback must be True or False"),
    (dict(filter_domain=1), "filter_domain must be True or False"),
    (dict(tomcat="yes"), "tomcat must be True or False"),
    (dict(frequency=500.5), "frequency must be a whole number"),
    (dict(frequency=float("nan")), "frequency must be a whole number"),
    (dict(drop_time=float("inf")), "drop_time must be a whole number"),
])
def test_settings_of_the_wrong_kind_are_refused(settings, message):
    with pytest.raises(ConfigurationError, match=message):
        config(**settings)


def test_bytes_settings_take_any_bytes_like_value():
    uid = bytes(range(16))
    cfg = config(unique_id=bytearray(uid), payload=memoryview(b"p"), domain=bytearray(b"d"))
    assert (cfg.unique_id, cfg.payload, cfg.domain) == (uid, b"p", b"d")
    assert config(payload="é", domain="{1,-1}").payload == "é".encode()
    service = McastService(GROUP, 45564, **LOCAL, unique_id=uid, domain=b"d")
    service.set_payload(b"q")
    with pytest.raises(ConfigurationError, match="payload must be bytes"):
        service.set_payload(4)
    with pytest.raises(ConfigurationError, match="domain must be bytes"):
        service.set_domain(None)
    assert (service.local_member.payload, service.local_member.domain) == (b"q", b"d")


def test_integral_floats_are_whole_numbers():
    cfg = config(frequency=500.0, drop_time=3000.0, max_members=10.0)
    assert (cfg.frequency, cfg.drop_time, cfg.max_members) == (500, 3000, 10)
    assert type(cfg.frequency) is int


def test_switches_keep_their_meaning():
    assert config(tomcat=True).tcp_listener is True
    assert config(tomcat=True, tcp_listener=False).tcp_listener is False


def test_the_listener_is_on_by_default_and_sorts_us_after_every_tomcat():
    """A Tomcat without TcpFailureDetector lists every member it hears and
    asks one for its sessions (README, "Joining a Tomcat cluster"): a
    default member answers, and its alive time is below zero."""
    cfg = config()
    assert (cfg.tcp_listener, cfg.alive_below_zero, cfg.listener_asked) == (True, True, False)
    cfg = config(listen_only=True)
    assert (cfg.tcp_listener, cfg.alive_below_zero) == (False, False)
    cfg = config(tcp_listener=False)
    assert (cfg.tcp_listener, cfg.alive_below_zero, cfg.listener_asked) == (False, False, False)
    assert config(tcp_listener=True).listener_asked is True
    assert config(verify=True).listener_asked is True


@pytest.mark.network
def test_wait_for_raises_the_builtin_timeout_error_where_asyncio_has_its_own(monkeypatch,
                                                                            group_port):
    """On Python 3.10 asyncio.wait_for raises asyncio.TimeoutError, which is
    not the builtin; docs/asyncio.md promises the builtin. Stand that in here."""
    from mcastmember.tribes.fronts.aio import AsyncMembership

    class OldAsyncioTimeout(Exception):
        pass

    async def old_wait_for(awaitable, timeout):
        awaitable.cancel()
        raise OldAsyncioTimeout()

    monkeypatch.setattr(asyncio, "TimeoutError", OldAsyncioTimeout)
    monkeypatch.setattr(asyncio, "wait_for", old_wait_for)

    async def run():
        async with AsyncMembership(GROUP, group_port, member_port=4001, **LOOPBACK) as m:
            with pytest.raises(TimeoutError):
                await m.wait_for(lambda members: False, timeout=0.01)

    asyncio.run(run())


@pytest.mark.parametrize("platform, expected", [("linux", "49"), ("darwin", "None"),
                                                ("freebsd14", "None")])
def test_multicast_all_fallback_number_is_linux_only(platform, expected):
    code = ("import sys, socket; sys.platform = sys.argv[1]; "
            "socket.__dict__.pop('IP_MULTICAST_ALL', None); "
            "from mcastmember._runtime import net; print(net.IP_MULTICAST_ALL)")
    out = subprocess.run([sys.executable, "-c", code, platform], check=True,
                         capture_output=True, text=True, cwd="/").stdout.strip()
    assert out == expected


@pytest.mark.parametrize("front", ["McastService", "AsyncMcastService"])
@pytest.mark.parametrize("name, message", [
    ("intreface", "got an unexpected keyword argument 'intreface'. Did you mean 'interface'?"),
    ("drop_tim", "got an unexpected keyword argument 'drop_tim'. Did you mean 'drop_time'?"),
    ("event_queue", "got an unexpected keyword argument 'event_queue'. Did you mean "
                    "'event_queue_size'?"),
    ("colour", "got an unexpected keyword argument 'colour'"),
])
def test_a_mistyped_setting_is_named_with_the_front_and_the_likely_one(front, name, message):
    import mcastmember

    cls = getattr(mcastmember, front)
    with pytest.raises(ConfigurationError) as raised:
        cls(GROUP, 45564, **LOCAL, **{name: "127.0.0.1"})
    assert str(raised.value) == f"{front}() {message}"
    assert isinstance(raised.value, TypeError)      # what Python raises for a wrong keyword


@pytest.mark.parametrize("front", ["McastService", "AsyncMcastService"])
def test_no_group_without_multicast_false_says_what_to_give(front):
    import mcastmember

    cls = getattr(mcastmember, front)
    with pytest.raises(ConfigurationError) as raised:
        cls(None, 45564, **LOCAL)
    assert str(raised.value) == ("no multicast group: give the group (e.g. '228.0.0.4'), or "
                                 "multicast=False with peers= or dns=")
