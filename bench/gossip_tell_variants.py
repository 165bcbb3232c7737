#!/usr/bin/env python3
"""Why tell_accused="every" holds false "failed" marks down at heavy loss:
variants of who sends a suspicion straight to whom, measured in the
simulator (tests/sim/gossipsim.py). An experiment, not settings: each variant
patches the engine's node-state rules in this process, starting from tell_accused="prober".

    python bench/gossip_tell_variants.py [--sizes 1000] [--loss 0.3]
                                         [--protocol lifeguard]
                                         [--seconds 25] [--traffic 5]
                                         [--variants token,bare,random]

The variants, for each suspicion a member starts that "prober" does not
tell the accused of:

- ``token``: tell the accused anyway, at most once per probe interval per
  member (one more datagram a second at most);
- ``bare``: tell the accused, the suspect alone (no broadcasts piggybacked);
- ``random``: send the same packet (the suspect and piggybacked broadcasts)
  to a random live member instead of the accused.

Also ``every`` and ``prober``, the two settings unpatched. At 1,000 members
and 30% loss each row costs 4-8 minutes of CPU. bench/README.md ("Suspicions
told to the accused") quotes a run of the three variants.
"""

import argparse
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests" / "sim"))

from gossipsim import scenario  # noqa: E402

from mcastmember.gossip.memberlist.rules import NodeRules  # noqa: E402
from mcastmember.gossip.memberlist.layout import NodeState  # noqa: E402

FIGURES = ("false_failed_marks", "false_failed_per_member_hour", "join_99_s", "leave_99_s",
           "datagrams_per_member_s", "datagram_bytes_per_member_s")
SETTINGS = ("every", "prober")
VARIANTS = ("token", "bare", "random")

_known = NodeRules.suspect_known


def _untold(rules, state, incarnation, from_, now, sender, received) -> bytes | None:
    """Run the engine's own rule; the suspect's bytes when it started a
    suspicion and did not tell the accused, else None."""
    started, told = rules.counts["suspects"], rules.counts["suspects_told"]
    _known(rules, state, incarnation, from_, now, sender, received)
    if rules.counts["suspects"] == started or rules.counts["suspects_told"] != told:
        return None
    return rules.suspect_bytes(received, incarnation, state.name, from_)


def _token(rules, state, incarnation, from_, now, sender, received) -> None:
    accusation = _untold(rules, state, incarnation, from_, now, sender, received)
    if accusation is not None and now - getattr(rules, "variant_told_at", -1e9) >= rules.settings.probe_interval:
        rules.variant_told_at = now
        rules.tell_accused(state, rules.suspicions[state.name][0], accusation)


def _bare(rules, state, incarnation, from_, now, sender, received) -> None:
    accusation = _untold(rules, state, incarnation, from_, now, sender, received)
    if accusation is not None:
        rules.outbox.send_raw(state.address, accusation, None)


def _random(rules, state, incarnation, from_, now, sender, received) -> None:
    accusation = _untold(rules, state, incarnation, from_, now, sender, received)
    if accusation is not None:
        for peer in rules.table.k_random(1, lambda n: n.name in (rules.name, state.name)
                                         or n.state != NodeState.ALIVE):
            rules.outbox.send_msg(peer.address, accusation)


PATCHES = {"token": _token, "bare": _bare, "random": _random}


def run(variant: str, n: int, loss: float, protocol: str, seconds: float, traffic: float) -> dict:
    if variant in PATCHES:
        NodeRules.suspect_known = PATCHES[variant]
    try:
        return scenario(n, protocol, loss=loss, seconds=seconds, traffic=traffic,
                        tell_accused="every" if variant == "every" else "prober")
    finally:
        NodeRules.suspect_known = _known


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000")
    parser.add_argument("--loss", type=float, default=0.3)
    parser.add_argument("--protocol", default="lifeguard", choices=("lifeguard", "swim"))
    parser.add_argument("--seconds", type=float, default=25.0)
    parser.add_argument("--traffic", type=float, default=5.0)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    args = parser.parse_args()
    variants = args.variants.split(",")
    for v in variants:
        if v not in SETTINGS + VARIANTS:
            parser.error(f"unknown variant {v!r}: choose from {', '.join(SETTINGS + VARIANTS)}")
    print("variant members " + " ".join(FIGURES) + " cpu_s", flush=True)
    for n in (int(x) for x in args.sizes.split(",")):
        for v in variants:
            cpu = time.process_time()
            row = run(v, n, args.loss, args.protocol, args.seconds, args.traffic)
            print(v, n, *(row[k] for k in FIGURES), round(time.process_time() - cpu, 1), flush=True)


if __name__ == "__main__":
    main()
