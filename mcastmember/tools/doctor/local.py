"""The local checks, which send nothing: ``interface``, ``route``, ``group``,
``port`` and ``rp_filter``. A failing one ends the run."""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING

from ...tribes.engine.config import DEFAULT_GROUP, DEFAULT_GROUP_IPV6, CheckedSettings
from ..._runtime import net
from ...tribes.net.interfaces import list_interfaces
from ..._runtime.errors import ConfigurationError
from .host import MULTICAST_ROUTE, ipv4_route_card, port_holders, route_card, rp_filter, \
    rp_filter_setting
from .report import FAIL, PASS, WARN
from .sockets import cannot_send, taken

if TYPE_CHECKING:
    from ...tribes.engine.config import ServiceConfig
    from .context import DoctorContext


def checks(doctor: DoctorContext) -> bool:
    doctor.cards = list_interfaces()
    if doctor.multicast and not group_is_multicast(doctor):
        return False
    if not interfaces(doctor):
        return False
    if doctor.multicast:
        route(doctor)
        if doctor.report.failed():
            return False
    doctor.config = settings(doctor)
    if doctor.multicast:
        group_scope(doctor)
    port(doctor)
    if doctor.multicast:
        reverse_path(doctor)
    return doctor.report.ok


def settings(doctor: DoctorContext) -> ServiceConfig:
    """join's settings, the group given included, resolved on this host
    (once the checks above passed: the card and the group are usable)."""
    return CheckedSettings(doctor.group, doctor.port, **doctor.settings).resolve()


def group_is_multicast(doctor: DoctorContext) -> bool:
    group = ipaddress.ip_address(str(doctor.group))
    if group.is_multicast:
        return True
    doctor.report.add("group", FAIL, f"{group} is not a multicast group",
                      f"use a group in {MULTICAST_ROUTE[group.version]}, the same on every "
                      f"node, such as Tomcat's default {default_group(group.version)}")
    return False


def interfaces(doctor: DoctorContext) -> bool:
    spec = doctor.settings.get("interface")
    if spec is None:
        if doctor.multicast:
            doctor.report.add("interface", PASS, "none given: the kernel chooses the card "
                                                 "(see route)")
        else:
            doctor.report.add("interface", PASS, "none given: unicast from --host")
        return True
    family = doctor.family or 4
    usable = ", ".join(c.name for c in doctor.cards if c.up and (c.multicast or c.loopback)
                       and any(a.version == family for a in c.addresses)) or "none"
    found, problems = [], []
    for one in spec if isinstance(spec, (list, tuple)) else [spec]:
        try:
            choice = doctor.choose(one)
        except ConfigurationError as error:
            problems.append((str(error), f"give --interface one of this host's cards "
                                         f"with IPv{family}: {usable}"))
            continue
        card = choice.interface
        if not card.up:
            # Loopback is no way to other hosts: not offered for a real card.
            others = ", ".join(doctor.multicast_cards(family))
            problems.append((f"{card.name} is down",
                             f"ip link set dev {card.name} up" +
                             (f" (or another --interface: {others})" if others else "")))
        elif doctor.multicast and not (card.multicast or card.loopback):
            problems.append((f"{card.name} has no MULTICAST flag: the kernel neither sends "
                             f"nor joins groups on it",
                             f"ip link set dev {card.name} multicast on, or use --peers or "
                             f"--dns instead of multicast"))
        else:
            doctor.chosen.append(choice)
            found.append(f"{card.name} is up, "
                         f"{'loopback' if card.loopback else 'multicast'}, with "
                         f"{choice.address} ({choice.reason})")
    if problems:
        doctor.report.add("interface", FAIL, "; ".join(p for p, _ in problems),
                          "; ".join(dict.fromkeys(f for _, f in problems)))
        return False
    doctor.report.add("interface", PASS, "; ".join(found))
    return True


def route(doctor: DoctorContext) -> None:
    add, group, family = doctor.report.add, str(doctor.group), doctor.family
    assert family is not None          # the route of a group: multicast only
    doctor.via = via = route_card(group, doctor.cards)
    others = doctor.multicast_cards(family)
    prefix = MULTICAST_ROUTE[family]
    if not doctor.chosen:
        if net.link_scoped(group):
            add("route", FAIL, f"{group} exists on one link only: the kernel cannot "
                               f"choose its card",
                f"name the card: --interface {others[0] if len(others) == 1 else 'CARD'}"
                f" (this host's multicast cards: {', '.join(others) or 'none'})")
        elif via is None:
            card = others[0] if len(others) == 1 else "CARD"
            add("route", FAIL, f"no multicast route: the kernel has no route for {group}",
                f"ip route add {prefix} dev {card} (this host's multicast cards: "
                f"{', '.join(others) or 'none'}), or name the card with --interface "
                f"{card}; where the network carries no multicast, use --peers or --dns")
        elif [n for n in others if n != via.name]:
            rest = [n for n in others if n != via.name]
            add("route", WARN, f"the kernel sends {group} through {via.name}; this host "
                               f"also has {', '.join(rest)}",
                f"name the card the other members are on: --interface {via.name} (or "
                f"{' or '.join(rest)})")
        else:
            add("route", PASS, f"the kernel sends {group} through {via.name}")
        return
    names = [choice.interface.name for choice in doctor.chosen]
    refused = [(choice.interface, error) for choice, error in
               ((c, cannot_send(group, c)) for c in doctor.chosen) if error]
    if refused:
        loopback = family == 6 and any(card.loopback for card, _ in refused)
        add("route", FAIL, "; ".join(f"the kernel cannot send {group} on {card.name}: "
                                     f"{error}" for card, error in refused)
            + (" (Linux carries no IPv6 multicast on loopback)" if loopback else ""),
            f"name a card that carries IPv{family} multicast with --interface "
            f"({', '.join(others) or 'this host has none'})"
            + (f"; on loopback, test with an IPv4 group such as {DEFAULT_GROUP}" if loopback
               else ""))
    elif net.link_scoped(group):
        add("route", PASS, f"{group} is link-scoped: it goes on the card given, "
                           f"{', '.join(names)}, and no route applies")
    elif all(choice.interface.loopback for choice in doctor.chosen):
        add("route", PASS, f"{', '.join(names)} (loopback): this host only")
    elif via is None:
        add("route", WARN, f"no multicast route for {group}: members given --interface "
                           f"{names[0]} work, those left to the kernel (Tomcat without "
                           f"mcastBindAddress) cannot send",
            f"ip route add {prefix} dev {names[0]}")
    elif via.name not in names:
        add("route", WARN, f"the kernel routes {group} through {via.name}, not "
                           f"{', '.join(names)}: members on this host left to the kernel's "
                           f"choice use {via.name}",
            f"keep --interface {names[0]} and ip route replace {prefix} dev {names[0]}, "
            f"or use --interface {via.name} if the other members are there")
    else:
        add("route", PASS, f"the kernel routes {group} through {via.name}, the card given")


def group_scope(doctor: DoctorContext) -> None:
    assert doctor.config is not None and doctor.config.address is not None   # multicast only
    group, ttl = ipaddress.ip_address(doctor.config.address), doctor.config.ttl
    loopback = all(card.loopback for card in doctor.cards_used())
    hops = 1 if ttl is None else ttl
    if group.version == 4 and group in ipaddress.IPv4Network("232.0.0.0/8"):
        doctor.report.add("group", WARN, f"{group} is in 232.0.0.0/8, source-specific "
                                         f"multicast: routers and snooping switches do not "
                                         f"forward it to members that join it any-source",
                          f"use {DEFAULT_GROUP} (Tomcat's default) or a group in 239.0.0.0/8, the "
                          "same on every node")
    elif hops == 0 and not loopback:
        doctor.report.add("group", WARN, f"{group} with TTL 0: heartbeats never leave this "
                                         f"host", "--ttl 1 for this subnet (more to cross "
                                                  "routers)")
    elif group.version == 6 and (group.packed[1] & 0x0F) == 1 and not loopback:
        doctor.report.add("group", WARN, f"{group} is interface-local (ff01::/16): it never "
                                         f"leaves this host",
                          f"use a link-local group (ff02::4) or a site-local one "
                          f"({DEFAULT_GROUP_IPV6})")
    elif loopback:
        doctor.report.add("group", PASS, f"{group}, TTL {hops}, on loopback: this host only")
    elif (group.version == 4 and group in ipaddress.IPv4Network("224.0.0.0/24")) or \
            net.link_scoped(str(group)):
        doctor.report.add("group", PASS, f"{group} is link-local: this subnet only, "
                                         f"whatever the TTL")
    else:
        reach = ("this subnet only (routers need --ttl 2 or more)" if hops == 1
                 else f"{hops - 1} router(s) away")
        doctor.report.add("group", PASS, f"{group} is a multicast group; TTL {hops}"
                                         f"{' (the default)' if ttl is None else ''} "
                                         f"reaches {reach}")


def port(doctor: DoctorContext) -> None:
    config, add = doctor.config, doctor.report.add
    assert config is not None
    holders = port_holders(doctor.port)
    blocked: list[tuple[str, bool]] = []     # (what cannot bind, whether that fails)
    # Binding sends nothing (joining would: an IGMP or MLD report).
    if config.multicast and config.address is not None and \
            taken(config.address, doctor.port, True,
                  config.links[0].index if config.links else 0):
        blocked.append(("a member", True))
    address = doctor.unicast_address()
    if (config.unicast or doctor.pair) and taken(address, doctor.port, False):
        blocked.append((f"unicast heartbeats on {address}", doctor.pair or not
                        config.multicast))
    if not blocked:
        if holders:
            who = "; ".join(f"{w} on {a}" for a, w in holders)
            add("port", PASS, f"UDP port {doctor.port} is also bound by {who}: every socket "
                              f"gets its own copy of the group's datagrams")
        else:
            add("port", PASS, f"UDP port {doctor.port} is free")
        return
    who = "; ".join(f"{w} on {a}" for a, w in holders) or "another process"
    owners = " and ".join(dict.fromkeys(w for _, w in holders)) or "it"
    what = " and ".join(what for what, _ in blocked)
    fatal = any(fatal for _, fatal in blocked)
    add("port", FAIL if fatal else WARN,
        f"UDP port {doctor.port} is held by {who}: {what} cannot bind it"
        + ("" if fatal else "; the doctor hears only multicast"),
        f"stop {owners} (unless it is this host's member; then stop it while the doctor "
        f"runs), or use another --port on every node")


def reverse_path(doctor: DoctorContext) -> None:
    cards = [card for card in doctor.cards_used() if not card.loopback]
    if doctor.family != 4 or not cards:
        doctor.report.add("rp_filter", PASS, "no reverse-path filtering applies "
                                             f"({'IPv6' if doctor.family == 6 else 'loopback'})")
        return
    default = ipv4_route_card("0.0.0.0")
    strict = [card.name for card in cards if rp_filter(card.name) == 1
              and card.name != default]
    # Loose filtering (2) wants a route back to the sender too: without a
    # default route, subnets not routed here have none, whatever the card.
    unrouted = [card.name for card in cards if rp_filter(card.name) in (1, 2)] \
        if default is None else []
    if unrouted:
        names = ", ".join(unrouted)
        modes = " and ".join(sorted({"strict" if rp_filter(name) == 1 else "loose"
                                     for name in unrouted}, reverse=True))
        off = [name for name in ["all"] + unrouted if rp_filter_setting(name)]
        doctor.report.add("rp_filter", WARN,
                          f"{modes} reverse-path filtering on {names}, and this host has no "
                          f"default route: heartbeats from subnets it has no route to are "
                          f"dropped",
                          " and ".join(f"sysctl -w net.ipv4.conf.{name}.rp_filter=0"
                                       for name in off)
                          + f", or route the members' subnets through {unrouted[0]} (ip "
                            f"route add SUBNET dev {unrouted[0]})")
    elif strict:
        doctor.report.add("rp_filter", WARN,
                          f"strict reverse-path filtering on {', '.join(strict)}, and the "
                          f"default route is not there: heartbeats from outside "
                          f"{', '.join(strict)}'s subnets are dropped",
                          " and ".join(f"sysctl -w net.ipv4.conf.{name}.rp_filter=2"
                                       for name in strict))
    else:
        modes = ", ".join(f"{card.name} {rp_filter(card.name)}" for card in cards)
        doctor.report.add("rp_filter", PASS, f"rp_filter {modes}: it drops no heartbeat "
                                             f"that can reach this host")


def default_group(family: int) -> str:
    """The group the doctor suggests (and checks settings with) for an IP version."""
    return DEFAULT_GROUP_IPV6 if family == 6 else DEFAULT_GROUP
