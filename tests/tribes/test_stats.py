"""stats(): one stable shape. Every key present from the
start at 0, the same on both fronts whatever is configured, and exactly the
keys the "Counters" table of docs/usage.md documents."""

import pathlib
import re

import pytest

from mcastmember import AsyncMembership, McastService

from support import GROUP, LOOPBACK, fake_members, wait_until

USAGE = pathlib.Path(__file__).resolve().parents[2] / "docs" / "usage.md"


def documented_keys():
    text = USAGE.read_text()
    section = text[text.index("## Counters"):]
    section = section.split("\n#")[0]      # up to the next heading, or the end
    keys = set()
    for row in re.findall(r"^\| (`.*?) \|", section, re.M):
        keys.update(re.findall(r"`([^`]+)`", row))
    return keys


@pytest.mark.parametrize("settings", [{}, {"verify": True}, {"peers": ["127.0.0.2"]},
                                      {"keys": [(1, bytes(32))]}],
                         ids=["plain", "verify", "unicast", "keys"])
def test_every_front_has_every_documented_key_from_the_start(settings, group_port):
    fronts = [kind(GROUP, group_port, **LOOPBACK, **settings)
              for kind in (McastService, AsyncMembership)]
    for front in fronts:
        stats = front.stats()
        assert set(stats) == documented_keys()
        counted = {k: v for k, v in stats.items() if v and k not in ("implementation", "healthy")}
        assert counted == ({"peers": 1} if "peers" in settings else {})    # the static peer
        assert stats["healthy"] is True


def test_the_shape_stays_once_things_are_counted(group_port):
    with McastService(GROUP, group_port, member_port=4001, **LOOPBACK) as service:
        keys = set(service.stats())
        fake_members(group_port, 2, junk_first=3)
        wait_until(lambda: service.stats()["members"] == 2)
        stats = service.stats()
        assert set(stats) == keys
        assert stats["added"] == 2 and sum(v for k, v in stats.items()
                                           if k.startswith("malformed.")) == 3
