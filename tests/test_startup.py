"""What starting a member costs beyond the heartbeat itself: no process is
spawned (finding the C library once ran `/sbin/ldconfig -p`), and nothing
is imported that only some uses need (hashing for keys, compression and
temporary files for a subprocess). Each case runs in a fresh interpreter on
loopback (interface 127.0.0.1, TTL 0), with both implementations. The time
it takes is measured by bench/startup.py, never asserted here."""

import json
import os
import subprocess
import sys

import pytest

# A child interpreter that records, through audit hooks (no patching), every
# process it starts, runs one front's start path, then prints what it
# spawned and which of the modules a start should not need were loaded.
CHILD = r"""
import json, sys
spawned = []
def hook(event, args):
    if event in ("subprocess.Popen", "os.system", "os.posix_spawn", "os.fork", "os.forkpty",
                 "os.exec", "os.spawn"):
        spawned.append([event, str(args[0])])
sys.addaudithook(hook)
front, port = sys.argv[1], sys.argv[2]
if front == "cli":
    from mcastmember.tools.cli import main
    status = main(["join", "228.0.0.4", "--interface", "127.0.0.1", "--ttl", "0",
                   "--port", port, "--member-port", "4001", "--duration", "0", "--json"])
    assert status == 0, status
elif front == "threads":
    from mcastmember import McastService
    with McastService("228.0.0.4", int(port), interface="127.0.0.1", ttl=0, member_port=4001):
        pass
else:
    import asyncio
    from mcastmember import AsyncMembership
    async def run():
        async with AsyncMembership("228.0.0.4", int(port), interface="127.0.0.1", ttl=0,
                                   member_port=4001):
            pass
    asyncio.run(run())
unneeded = {"subprocess", "ctypes.util", "tempfile", "hashlib", "hmac", "_hashlib", "shutil",
            "bz2", "lzma", "datetime"}
# what the standard library brings itself: argparse's help formatter imports
# shutil (and with it the compression modules), asyncio imports subprocess
unneeded -= {"cli": {"shutil", "bz2", "lzma"}, "asyncio": {"subprocess"}}.get(front, set())
print(json.dumps({"spawned": spawned, "loaded": sorted(m for m in unneeded if m in sys.modules)}))
"""


@pytest.mark.network
@pytest.mark.both_codecs     # each implementation is chosen here: the pure-Python pass need not repeat it
@pytest.mark.parametrize("implementation", ["compiled", "python"])
@pytest.mark.parametrize("front", ["cli", "threads", "asyncio"])
def test_start_spawns_no_process_and_loads_only_what_it_needs(front, implementation, group_port,
                                                              tmp_path):
    env = dict(os.environ)
    if implementation == "python":
        env["MCASTMEMBER_NO_EXTENSIONS"] = "1"
    else:
        env.pop("MCASTMEMBER_NO_EXTENSIONS", None)
        pytest.importorskip("mcastmember.tribes.kernel._fast", reason="compiled extension not built")
    done = subprocess.run([sys.executable, "-c", CHILD, front, str(group_port)],
                          capture_output=True, text=True, env=env, timeout=60, check=False,
                          cwd=tmp_path)     # the installed package, not the source folder
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report == {"spawned": [], "loaded": []}
