"""Query tag filters decided as Serf decides them: Go's regexp (RE2 syntax,
linear time, an unanchored search like regexp.MatchString), here by RE2
itself (google-re2), never by Python's backtracking ``re``: a hostile
pattern from the network is decided at once, a pattern RE2 (or Go) rejects
matches nothing, and without google-re2 every tag filter matches nothing,
with one warning. On both fronts, a member handed the hostile pattern
still acks the next query at once."""

import asyncio
import logging
import time

import pytest

pytest.importorskip("msgpack")
pytest.importorskip("re2")

from mcastmember.gossip.fronts.aio import AsyncSerfService  # noqa: E402
from mcastmember.gossip.fronts.service import SerfService  # noqa: E402
from mcastmember.gossip.serf import messages as m  # noqa: E402
from mcastmember.gossip.serf.buffers import (MAX_FILTER_PATTERN, TagRegexps,  # noqa: E402
                                             should_process_query)
from mcastmember.gossip.serf.codec import go_str  # noqa: E402
from mcastmember.gossip.serf.events import QueryAnswer  # noqa: E402
from support import free_gossip_port, wait_until  # noqa: E402

#: ``.*`` nine times, then a letter the tag lacks: Python's ``re`` tries
#: every way to split the tag among the nine (12.5 s on a 36-character tag)
HOSTILE = ".*" * 9 + "x"


def selects(expr, value, regexps=None):
    """Whether a query whose one filter is ``role =~ expr`` selects a node whose role is ``value``."""
    return should_process_query([m.encode_tag_filter("role", expr)], "n", {"role": value}, regexps=regexps)


@pytest.mark.parametrize("tag, expected", [("y" * 512, False), ("y" * 511 + "x", True)])
def test_the_hostile_pattern_against_a_512_byte_tag_is_decided_within_50_ms(tag, expected):
    regexps = TagRegexps()                       # nothing cached: the compile is timed too
    start = time.perf_counter()
    assert selects(HOSTILE, tag, regexps) is expected
    elapsed = time.perf_counter() - start
    assert elapsed < 0.050, f"{elapsed * 1000:.1f} ms"
    assert (regexps.compiled, regexps.refused) == (1, 0)


@pytest.mark.parametrize("expr, value, expected", [
    ("eb", "web", True),                          # a search, not a match of the whole tag
    ("^we", "web", True),
    ("^eb", "web", False),
    ("b$", "web", True),
    ("e$", "web", False),
    ("^web$", "web\n", False),                    # $ is the end of the text only (Python's re: before a last \n too)
    ("(?m)^db$", "web\ndb", True),
    ("a.c", "a\nc", False),
    ("(?s)a.c", "a\nc", True),
    ("^rack-[0-9]{2}$", "rack-12", True),
    ("[[:digit:]]", "rack", False),
    (r"\d+", "rack-7", True),
    ("", "anything", True),
    ("(w+)+$", "w" * 40, True),                   # a repeated group is linear in RE2: evaluated, not refused
    ("(a|a)*b", "a" * 40, False),
    (r"^\pL+$", "zürich", True),                  # RE2-only syntax: Unicode classes
    (r"^\p{Greek}+$", "κόσμος", True),
    ("^.{6}$", "zürich", True),                   # . is one character, not one byte
    ("^.{7}$", "zürich", False),
    ("(?i)ZÜRICH", "zürich", True),
    (r"\Qa.b\E", "a.b", True),
    (r"\Qa.b\E", "axb", False),
    (r"(?P<r>we)b", "web", True),
    ("^a.b$", go_str(b"a\xffb"), True),          # a byte that is not UTF-8 reads as U+FFFD, as in Go
    (r"^a\x{FFFD}b$", go_str(b"a\xffb"), True),
])
def test_tag_filters_select_as_go_regexp_match_string(expr, value, expected):
    assert selects(expr, value) is expected


@pytest.mark.parametrize("expr, value", [
    (r"(a)\1", "aa"),                             # backreference
    ("a(?=b)", "ab"),                             # lookahead
    ("(?<=a)b", "ab"),                            # lookbehind
    (r"a\Z", "a"),                                # Python's end of text, unknown to RE2 and Go
    ("(?>a)", "a"),                               # atomic group
    ("(", "("),
    ("a**", "a"),
    ("a{1001}", "a" * 1001),                      # over RE2's and Go's repeat limit
    (r"\C", "a"),                                 # RE2's any byte: not Go syntax
    (r"[\C]", "C"),
    (go_str(b"\xff"), go_str(b"\xff")),           # a pattern that is not UTF-8
    (r"\pL{1000}", "a" * 1000),                   # a program over RE2's memory budget for one filter
])
def test_a_pattern_re2_or_go_rejects_matches_nothing_and_is_counted(expr, value):
    regexps = TagRegexps()
    assert selects(expr, value, regexps) is False
    assert selects(expr, value, regexps) is False    # the second time from the cache
    assert (regexps.compiled, regexps.refused, len(regexps)) == (1, 2, 1)


def test_an_escaped_backslash_before_c_is_go_syntax():
    assert selects(r"\\C", "\\C") is True
    assert selects(r"\Q\C\E", "\\C") is True


def test_patterns_longer_than_the_bound_match_nothing():
    regexps = TagRegexps()
    assert MAX_FILTER_PATTERN == 512
    at_bound = "w?" * 256
    assert selects(at_bound, "w", regexps) is True
    assert selects("w" + at_bound, "w", regexps) is False
    assert (regexps.compiled, regexps.refused, len(regexps)) == (1, 1, 1)


def test_the_patterns_of_one_query_are_bounded_all_together():
    """Each filter's pattern costs RE2 time to parse: a query's together
    are bounded, however many filters it carries."""
    regexps = TagRegexps()
    half = "w?" * 128                            # 256 bytes, matches anything
    filters = [m.encode_tag_filter(tag, half) for tag in ("role", "dc", "rack")]
    tags = {"role": "web", "dc": "east", "rack": "r1"}
    assert should_process_query(filters[:2], "n", tags, regexps=regexps) is True
    assert should_process_query(filters, "n", tags, regexps=regexps) is False
    assert (regexps.compiled, regexps.refused) == (1, 1)


def test_the_compiled_pattern_cache_is_bounded_in_count():
    regexps = TagRegexps(size=4)
    assert [selects(f"^n{i}$", f"n{i}", regexps) for i in range(10)] == [True] * 10
    assert (len(regexps), regexps.compiled, regexps.evicted) == (4, 10, 6)
    assert selects("^n9$", "n9", regexps) and selects("^n9$", "n8", regexps) is False
    assert (len(regexps), regexps.compiled, regexps.evicted) == (4, 10, 6)   # both from the cache
    with pytest.raises(ValueError, match="the tag filter cache needs at least one entry"):
        TagRegexps(size=0)


def test_compiling_new_patterns_is_metered_and_cached_ones_are_free():
    """A flood of distinct patterns (a datagram holds a hundred queries, each
    up to 512 bytes of patterns that RE2 may take ~25 ms to parse) spends a
    budget of pattern bytes a second; past it a new pattern matches nothing.
    Patterns already compiled cost nothing."""
    regexps = TagRegexps(compile_rate=1024)
    first = "^(web|db)-" + "x" * 500                     # 511 bytes
    assert not regexps.search(first, "web-", now=10.0)  # compiled: it just does not match
    assert regexps.search("^web", "web-1", now=10.0)     # 4 bytes cost 64: 449 left
    assert not regexps.search("^db" + "y" * 446, "db", now=10.0)    # 449 bytes: fits, no match
    assert not regexps.search("^d", "db", now=10.0)      # nothing left for a new one
    assert regexps.over_budget == 1 and regexps.compiled == 3
    assert regexps.search("^web", "web-1", now=10.0)     # cached: free
    assert not regexps.search("^d", "db", now=9.5)       # a little behind (another thread): no refill
    assert regexps.search("^d", "db", now=10.5)          # half a second refills 512 bytes
    assert (regexps.over_budget, regexps.compiled) == (2, 4)
    assert regexps.search("^dd?", "db")                  # no clock: not metered
    with pytest.raises(ValueError, match="one query's patterns"):
        TagRegexps(compile_rate=MAX_FILTER_PATTERN - 1)


def test_without_google_re2_every_tag_filter_matches_nothing_with_one_warning(monkeypatch, caplog):
    monkeypatch.setitem(__import__("sys").modules, "re2", None)      # as if not installed
    regexps = TagRegexps()
    with caplog.at_level(logging.WARNING, logger="mcastmember"):
        assert selects("^web$", "web", regexps) is False
        assert selects(HOSTILE, "y" * 512, regexps) is False       # never Python's re: decided at once
        assert selects("", "", regexps) is False
        node = m.encode_node_filter(["n"])
        assert should_process_query([node], "n", {}, regexps=regexps) is True   # node filters need no regexp
    assert (regexps.unavailable, regexps.compiled, len(regexps)) == (3, 0, 0)
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("WARNING", "query tag filters need google-re2, which is not installed: every tag filter matches "
                    "nothing, so this node answers no query that filters on tags (pip install "
                    "'mcastmember[gossip]')")]


@pytest.mark.parametrize("front", ["threads", "asyncio"])
def test_a_member_given_the_hostile_filter_acks_the_next_query_at_once(front):
    """The asker's query with the hostile filter reaches the member on
    loopback, then a plain one: the member (role: 36 characters, none an x)
    acks the plain one within wait_until's 5 s (its I/O thread stalled
    12.5 s on Python's re before), and not the hostile one."""
    pa, pb = free_gossip_port("127.0.0.1"), free_gossip_port("127.0.0.2")
    tags = {"role": "y" * 36}

    def ask(asker):
        heard = []
        asker.add_listener(heard.append)
        assert asker.join([("127.0.0.1", pa)]).joined == 1
        wait_until(lambda: len(asker.members()) == 2)
        hostile = asker.query("hostile", b"", filters=[m.encode_tag_filter("role", HOSTILE)],
                              request_ack=True, timeout=10)
        plain = asker.query("plain", b"", request_ack=True, timeout=10)

        def acks(query):
            return {e.from_ for e in list(heard) if isinstance(e, QueryAnswer) and e.query_id == query.id and e.ack}
        wait_until(lambda: acks(plain) == {"a", "b"})
        assert acks(hostile) == set()            # its ack, had there been one, went out before the plain one's

    with SerfService("b", "127.0.0.2", pb, seed=2) as asker:
        if front == "threads":
            with SerfService("a", "127.0.0.1", pa, tags=tags, seed=1):
                ask(asker)
        else:
            async def main():
                async with AsyncSerfService("a", "127.0.0.1", pa, tags=tags, seed=1):
                    await asyncio.to_thread(ask, asker)
            asyncio.run(asyncio.wait_for(main(), 30))
