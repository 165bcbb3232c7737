"""Serf agent's flags on mcast-demo gossip, each backed by a setting of both
fronts: --tags-file (the tags read at start and written back, in one rename,
whenever set_tags changes them), --profile lan|wan|local (memberlist's three
default configurations, an explicit setting winning), --reconnect-interval,
--reconnect-timeout and --tombstone-timeout in Go's duration syntax,
--protocol, and --replay (a join that delivers the user events the cluster
held before it). Bad values: one sentence, status 2, no traceback."""

import asyncio
import dataclasses
import json
import os
import shutil
import subprocess
import sys

import pytest

pytest.importorskip("msgpack")
pytest.importorskip("cryptography")

from mcastmember import ConfigurationError  # noqa: E402
from mcastmember._runtime.units import go_duration  # noqa: E402
from mcastmember.gossip.fronts.aio import AsyncSerfService  # noqa: E402
from mcastmember.gossip.fronts.service import SerfService  # noqa: E402
from mcastmember.gossip.memberlist.profiles import PROFILES  # noqa: E402
from mcastmember.gossip.serf.layout import PROTOCOL_VERSION_MAX, PROTOCOL_VERSION_MIN  # noqa: E402
from mcastmember.gossip.serf.node import UserEventReceived  # noqa: E402
from mcastmember.tools import cli, gossip_cli  # noqa: E402
from support import async_wait_until, free_gossip_port, wait_until  # noqa: E402

# What a Serf agent adds around a member is written once, above the gossip
# engine; the default implementation (compiled or pure) changes only the hot
# path's matcher beneath it, so CI's compiled pass runs these (single_pass).
pytestmark = pytest.mark.single_pass

FRONTS = ["threads", "asyncio"]
FAST = {"probe_interval": 0.2, "probe_timeout": 0.1, "gossip_interval": 0.05, "push_pull_interval": 2.0,
        "tcp_timeout": 1.0, "leave_propagate_delay": 0.1}
DEMO = [shutil.which("mcast-demo")] if shutil.which("mcast-demo") else [sys.executable, "-m", "mcastmember"]

# memberlist 0.2.2's config.go, DefaultLANConfig, DefaultWANConfig and
# DefaultLocalConfig, in seconds: what Serf's agent runs with for -profile.
GO_PROFILES = {
    "lan": {"tcp_timeout": 10.0, "indirect_checks": 3, "retransmit_mult": 4, "suspicion_mult": 4,
            "push_pull_interval": 30.0, "probe_timeout": 0.5, "probe_interval": 1.0, "gossip_nodes": 3,
            "gossip_interval": 0.2, "gossip_to_the_dead_time": 30.0},
    "wan": {"tcp_timeout": 30.0, "indirect_checks": 3, "retransmit_mult": 4, "suspicion_mult": 6,
            "push_pull_interval": 60.0, "probe_timeout": 3.0, "probe_interval": 5.0, "gossip_nodes": 4,
            "gossip_interval": 0.5, "gossip_to_the_dead_time": 60.0},
    "local": {"tcp_timeout": 1.0, "indirect_checks": 1, "retransmit_mult": 2, "suspicion_mult": 3,
              "push_pull_interval": 15.0, "probe_timeout": 0.2, "probe_interval": 1.0, "gossip_nodes": 3,
              "gossip_interval": 0.1, "gossip_to_the_dead_time": 15.0},
}


def front_class(front):
    return SerfService if front == "threads" else AsyncSerfService


def on_started(front, work, *args, **settings):
    """``work(svc)`` (it does not wait) while a member made with ``args`` and
    ``settings`` runs on ``front``; returns what it returns."""
    svc = front_class(front)(*args, **settings)
    if front == "threads":
        with svc:
            return work(svc)

    async def main():
        async with svc:
            return work(svc)
    return asyncio.run(asyncio.wait_for(main(), 30))


def own_tags(svc):
    return next(dict(m.tags) for m in svc.members() if m.name == svc.node.name)


def parsed(*flags):
    return gossip_cli.options(cli._build_parser().parse_args(["gossip", "--node", "a", *flags]),
                              read_keyring=False)


# ------------------------------------------------------------------ durations

@pytest.mark.parametrize("text, seconds", [
    ("30s", 30.0), ("24h", 86400.0), ("1m30s", 90.0), ("1.5h", 5400.0), ("250ms", 0.25), ("300us", 0.0003),
    ("1h2m3.5s", 3723.5), ("-2s", -2.0), ("+1s", 1.0), ("0", 0.0), (".5s", 0.5), ("1.s", 1.0),
    ("1ns", 1e-9), ("2\u00b5s", 2e-6),
])
def test_a_go_duration_is_read_as_go_reads_it(text, seconds):
    assert go_duration(text) == seconds


@pytest.mark.parametrize("text, message", [
    ("30", "'30' has no unit (give one of ns, us, ms, s, m, h: 30s, 5m)"),
    ("3d", "'3d' has an unknown unit 'd' (give one of ns, us, ms, s, m, h)"),
    ("1 s", "'1 s' has an unknown unit ' s' (give one of ns, us, ms, s, m, h)"),
    ("", "'' is not a duration (give a number and a unit: 30s, 5m, 1h30m)"),
    ("-", "'-' is not a duration (give a number and a unit: 30s, 5m, 1h30m)"),
    ("1..2s", "'1..2s' is not a duration (give a number and a unit: 30s, 5m, 1h30m)"),
    ("s", "'s' is not a duration (give a number and a unit: 30s, 5m, 1h30m)"),
    ("2562048h", "'2562048h' is longer than a duration may be (about 292 years)"),
])
def test_what_go_refuses_as_a_duration_is_refused_saying_why(text, message):
    with pytest.raises(ValueError) as caught:
        go_duration(text)
    assert str(caught.value) == message


# ------------------------------------------------------------- flags to settings

def test_the_timing_and_protocol_flags_reach_serfs_settings():
    opts = parsed("--reconnect-interval", "1m30s", "--reconnect-timeout", "24h", "--tombstone-timeout", "1.5h",
                  "--protocol", "4")
    assert opts.settings() == {"reconnect_interval": 90.0, "reconnect_timeout": 86400.0,
                               "tombstone_timeout": 5400.0, "protocol_version": 4}
    for cls in (SerfService, AsyncSerfService):
        node = cls(opts.node, opts.bind, opts.port, **opts.settings()).node
        serf = node.serf_settings
        assert (serf.reconnect_interval, serf.reconnect_timeout, serf.tombstone_timeout, serf.protocol_version) \
            == (90.0, 86400.0, 5400.0, 4)
        # Serf protocol 4 runs memberlist's protocol 2, and says 4 as the delegate's version
        assert (node.engine.settings.protocol_version, node.engine.settings.delegate_protocol_version) == (2, 4)


def test_the_protocols_serf_accepts_are_the_flags():
    assert list(gossip_cli.PROTOCOLS) == list(range(PROTOCOL_VERSION_MIN, PROTOCOL_VERSION_MAX + 1)) \
        == [2, 3, 4, 5]
    assert set(gossip_cli.PROFILES) == set(PROFILES) == set(GO_PROFILES)


def test_the_tags_file_and_profile_flags_reach_their_settings(tmp_path):
    path = str(tmp_path / "tags.json")
    assert parsed("--tags-file", path, "--profile", "wan").settings() == {"tags_file": path, "profile": "wan"}


def test_replay_is_off_unless_given():
    assert (parsed().settings(), parsed("--replay").settings()) == ({}, {"replay_on_join": True})
    assert SerfService("a", **parsed("--replay").settings()).node.serf_settings.replay_on_join is True


# ----------------------------------------------------------------------- profile

@pytest.mark.parametrize("front", FRONTS)
@pytest.mark.parametrize("profile", ["lan", "wan", "local"])
def test_each_profile_gives_memberlists_own_configuration(front, profile):
    """The ten timings are Go's for the profile, exactly; every other
    setting is what it is without a profile."""
    engine = front_class(front)("a", profile=profile).node.engine.settings
    assert {key: getattr(engine, key) for key in GO_PROFILES[profile]} == GO_PROFILES[profile]
    plain = front_class(front)("a").node.engine.settings
    assert dataclasses.replace(engine, **GO_PROFILES["lan"]) == plain


@pytest.mark.parametrize("front", FRONTS)
def test_a_setting_given_explicitly_wins_over_the_profile(front):
    engine = front_class(front)("a", profile="wan", probe_interval=0.25, gossip_nodes=7).node.engine.settings
    assert {key: getattr(engine, key) for key in GO_PROFILES["wan"]} \
        == {**GO_PROFILES["wan"], "probe_interval": 0.25, "gossip_nodes": 7}


def test_the_profile_flag_gives_the_profile():
    opts = parsed("--profile", "local")
    engine = SerfService(opts.node, opts.bind, opts.port, **opts.settings()).node.engine.settings
    assert {key: getattr(engine, key) for key in GO_PROFILES["local"]} == GO_PROFILES["local"]


@pytest.mark.parametrize("front", FRONTS)
def test_an_unknown_profile_is_refused_naming_the_setting(front):
    with pytest.raises(ConfigurationError) as caught:
        front_class(front)("a", profile="dc")
    assert str(caught.value) == "profile must be one of 'lan', 'wan', 'local', not 'dc'"


# --------------------------------------------------------------------- tags file

@pytest.mark.parametrize("front", FRONTS)
def test_the_tags_file_gives_the_tags_and_set_tags_writes_them_back(front, tmp_path):
    path = tmp_path / "tags.json"
    path.write_text('{"role": "web"}')
    path.chmod(0o644)

    def work(svc):
        before = own_tags(svc)
        svc.set_tags({"role": "db", "dc": "eu"})
        return before, own_tags(svc), json.loads(path.read_text())

    before, after, written = on_started(front, work, "a", "127.0.0.1", free_gossip_port(), tags_file=str(path))
    assert (before, after, written) == ({"role": "web"}, {"role": "db", "dc": "eu"}, {"role": "db", "dc": "eu"})
    # in one rename, nothing left beside it; the others' bits dropped, its group's kept
    assert (oct(path.stat().st_mode & 0o777), sorted(os.listdir(tmp_path))) == (oct(0o640), ["tags.json"])
    # started again with the same file: the tags it last had
    assert on_started(front, own_tags, "a", "127.0.0.1", free_gossip_port(), tags_file=path) \
        == {"role": "db", "dc": "eu"}


@pytest.mark.parametrize("front", FRONTS)
def test_a_missing_tags_file_is_no_tags_and_the_first_change_creates_it(front, tmp_path):
    path = tmp_path / "new" / "tags.json"
    path.parent.mkdir()

    def work(svc):
        before = (own_tags(svc), path.exists())
        svc.set_tags({"role": "db"})
        return before

    before = on_started(front, work, "a", "127.0.0.1", free_gossip_port(), tags_file=str(path))
    assert (before, json.loads(path.read_text())) == (({}, False), {"role": "db"})
    assert oct(path.stat().st_mode & 0o777) == oct(0o600)


@pytest.mark.parametrize("front", FRONTS)
def test_tags_that_cannot_be_written_or_sent_leave_both_the_tags_and_the_file(front, tmp_path):
    folder = tmp_path / "f"
    folder.mkdir()
    path = folder / "tags.json"
    path.write_text('{"role": "web"}')

    def work(svc):
        with pytest.raises(ConfigurationError):          # over memberlist's 512-byte meta
            svc.set_tags({"k": "v" * 600})
        unsent = (own_tags(svc), json.loads(path.read_text()))
        path.unlink()
        folder.rmdir()                                   # the file cannot be written now
        with pytest.raises(FileNotFoundError):
            svc.set_tags({"role": "db"})
        return unsent, own_tags(svc)

    unsent, unwritten = on_started(front, work, "a", "127.0.0.1", free_gossip_port(), tags_file=str(path))
    assert (unsent, unwritten) == (({"role": "web"}, {"role": "web"}), {"role": "web"})


@pytest.mark.parametrize("front", FRONTS)
@pytest.mark.parametrize("content", [b"[1]", b'{"role": 1}', b"role=web", b"\xff\xfe", b""])
def test_a_tags_file_that_is_not_a_json_object_of_strings_is_refused(front, tmp_path, content):
    path = tmp_path / "tags.json"
    path.write_bytes(content)
    with pytest.raises(ConfigurationError) as caught:
        front_class(front)("a", tags_file=str(path))
    assert str(caught.value) == f'tags file {path}: not a JSON object of tag names to text values (as {{"role": "web"}})'


@pytest.mark.parametrize("front", FRONTS)
def test_a_tags_file_that_cannot_be_read_and_tags_beside_one_are_refused(front, tmp_path):
    with pytest.raises(ConfigurationError) as caught:
        front_class(front)("a", tags_file=str(tmp_path))
    assert str(caught.value) == f"tags file {tmp_path}: not a regular file"
    with pytest.raises(ConfigurationError) as caught:
        front_class(front)("a", tags={"role": "web"}, tags_file=str(tmp_path / "tags.json"))
    assert str(caught.value) == "give the tags in the tags file or in the setting 'tags', not both"


# ------------------------------------------------------------------------ replay

def user_names(events):
    return [e.name for e in list(events) if isinstance(e, UserEventReceived)]


def joiner_hears(front, seed, settings, how):
    """The user events a new member on ``front`` (made with ``settings``)
    hears when it joins the member ``seed`` (which sent "deploy" before):
    ``how`` is the join's ``ignore_old`` argument, or "retry" for a
    retry-join; until "after", sent once it joined, reaches it."""
    port, seen = free_gossip_port(), []
    seeds = [("127.0.0.1", seed.port)]
    if how == "retry":
        settings = {**settings, "retry_join": [f"127.0.0.1:{seed.port}"]}
    kwargs = {} if how in ("retry", "default") else {"ignore_old": how}
    if front == "threads":
        # the listener before the start: a retry-join starts with the service
        b = SerfService("b", "127.0.0.1", port, **FAST, **settings)
        b.add_listener(seen.append)
        with b:
            if how != "retry":
                assert b.join(seeds, **kwargs).joined == 1
            wait_until(lambda: len(seed.members()) == 2)
            seed.user_event("after", b"v2")
            wait_until(lambda: "after" in user_names(seen))
            return user_names(seen)

    async def main():
        b = AsyncSerfService("b", "127.0.0.1", port, **FAST, **settings)
        b.add_listener(seen.append)
        async with b:
            if how != "retry":
                assert (await b.join(seeds, **kwargs)).joined == 1
            await async_wait_until(lambda: len(seed.members()) == 2)
            seed.user_event("after", b"v2")
            await async_wait_until(lambda: "after" in user_names(seen))
            return user_names(seen)
    return asyncio.run(asyncio.wait_for(main(), 30))


@pytest.mark.parametrize("front", FRONTS)
@pytest.mark.parametrize("settings, how, heard", [
    ({}, False, ["deploy", "after"]),                          # join(ignore_old=False): serf join -replay
    ({}, "default", ["after"]),                                # as serf join
    ({"replay_on_join": True}, "default", ["deploy", "after"]),
    ({"replay_on_join": True}, True, ["after"]),               # the join's own argument wins
    ({"replay_on_join": True}, "retry", ["deploy", "after"]),  # the agent's retry-join replays too
    ({}, "retry", ["after"]),
], ids=["argument", "default", "setting", "argument-over-setting", "retry-join-setting", "retry-join"])
def test_a_joiner_hears_the_clusters_old_user_events_only_with_replay(front, settings, how, heard):
    with SerfService("a", "127.0.0.1", free_gossip_port(), **FAST) as a:
        a.user_event("deploy", b"v1")
        assert joiner_hears(front, a, settings, how) == heard


def test_the_demo_with_replay_shows_the_old_user_event_it_joined_into():
    with SerfService("a", "127.0.0.1", free_gossip_port(), **FAST) as a:
        a.user_event("deploy", b"v1")
        done = subprocess.run(DEMO + ["gossip", "--bind", f"127.0.0.1:{free_gossip_port()}", "--node", "b",
                                      "--join", f"127.0.0.1:{a.port}", "--replay", "--json", "--duration", "0"],
                              capture_output=True, text=True, cwd="/", timeout=30)
    assert (done.returncode, done.stderr) == (0, "")
    users = [e for e in map(json.loads, done.stdout.splitlines()) if e["event"] == "user"]
    assert [(e["name"], e["payload"]) for e in users] == [("deploy", "v1")]


# -------------------------------------------------------------------- bad values

BAD = [
    (["--reconnect-interval", "30"], "--reconnect-interval: '30' has no unit (give one of ns, us, ms, s, m, h: "
                                     "30s, 5m)"),
    (["--tombstone-timeout", "3d"], "--tombstone-timeout: '3d' has an unknown unit 'd' (give one of ns, us, "
                                    "ms, s, m, h)"),
    (["--reconnect-timeout", "0s"], "--reconnect-timeout 0s: give a duration longer than zero (30s, 1h)"),
    (["--reconnect-interval=-5s"], "--reconnect-interval -5s: give a duration longer than zero (30s, 1h)"),
    (["--protocol", "6"], "--protocol 6: Serf's protocol is a number from 2 to 5"),
    (["--protocol", "1"], "--protocol 1: Serf's protocol is a number from 2 to 5"),
    (["--protocol", "five"], "--protocol five: Serf's protocol is a number from 2 to 5"),
    (["--profile", "dc"], "--profile dc: give lan, wan or local"),
    (["--tag", "a=b", "--tags-file", "t.json"], "--tag and --tags-file cannot be given together: put the tags "
                                                "in the tags file"),
]


@pytest.mark.parametrize("args, message", BAD)
def test_a_bad_flag_value_is_one_sentence_and_status_2(capsys, args, message):
    assert cli.main(["gossip", "--bind", "127.0.0.1:1", *args]) == 2
    assert capsys.readouterr() == ("", f"mcast-demo gossip: error: {message}\n")


def test_bad_values_exit_2_without_a_traceback_from_the_command(tmp_path):
    bad = tmp_path / "tags.json"
    bad.write_text("[1]")
    for args, message in [BAD[0], BAD[4], (["--tags-file", str(bad)],
                                           f'tags file {bad}: not a JSON object of tag names to text values '
                                           '(as {"role": "web"})')]:
        done = subprocess.run(DEMO + ["gossip", "--bind", "127.0.0.1:1", *args], capture_output=True, text=True,
                              cwd="/", timeout=30)
        assert (done.returncode, done.stdout, done.stderr) == (2, "", f"mcast-demo gossip: error: {message}\n")
