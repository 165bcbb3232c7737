"""Authenticated heartbeats against Tomcat 10.1's own Tribes code (see
test_tomcat_tribes.py): a Tomcat node lists a keyed Python member (it ignores the
trailer after TRIBES-E) and takes its signed shutdown; a Python member in
permissive mode lists the unkeyed Tomcat node as unauthenticated, and in
enforce mode does not list it. Tomcat's default cluster stack only."""

import time

import pytest

from mcastmember.tribes.wire import auth

from support import GROUP, wait_until
from test_tomcat_tribes import Events, free_tcp_port, python_service  # noqa: F401
from tribes import TribesNode

pytestmark = pytest.mark.network
RING = auth.HeartbeatKeys([(7, bytes(range(32)))])


@pytest.fixture
def tomcat(classpath, group_port):
    node = TribesNode(classpath, "stack", GROUP, group_port, free_tcp_port(),
                      domain="dom1", payload=b"alpha", frequency=250, drop_time=1500)
    yield node
    node.kill()


def test_tomcat_lists_a_keyed_member_that_does_not_list_tomcat(tomcat, group_port):
    service = python_service(group_port, keys=RING, payload=b"keyed")
    with service:
        _, theirs = tomcat.wait_event("ADDED", service.local_member.port)
        assert theirs.payload == b"keyed"
        assert theirs.unique_id == service.local_member.unique_id
        wait_until(lambda: service.stats().get("auth.no_trailer", 0) >= 2, timeout=5, message=service.stats)
        assert service.members() == []          # enforce: Tomcat's heartbeats are dropped
        assert service.stats()["members"] == 0
    _, gone = tomcat.wait_event("GONE", service.local_member.port, timeout=5)
    assert gone.command == b"BABY-ALEX"          # our signed shutdown is Tomcat's shutdown


def test_permissive_lists_tomcat_as_unauthenticated(tomcat, group_port):
    service = python_service(group_port, keys=RING, auth="permissive")
    events = Events(service)
    with service:
        _, added = events.wait("added", tomcat.member_port)
        assert added.member.authenticated is False and added.member.payload == b"alpha"
        tomcat.wait_event("ADDED", service.local_member.port)
        assert [(m.port, m.authenticated) for m in service.members()] == \
            [(tomcat.member_port, False)]
