"""Ctrl-C while mcast-demo starts: before the CLI has set
its own handler, while Python still imports it, the process ends quietly
with status 130, no traceback. On loopback (127.0.0.1, TTL 0).

The interrupt is sent by the process itself, at a chosen import, so the test
hits that moment every time (a SIGINT sent after a delay lands wherever the
machine's load puts it): a ``sitecustomize`` module on PYTHONPATH watches the
imports and sends it when the one named is first asked for."""

import os

import pytest

from support import GROUP
from test_cli import run

pytestmark = pytest.mark.network

INTERRUPT_AT = '''
import os, signal, sys

# As in a terminal's foreground process: a shell that starts the tests in the
# background hands its children SIGINT ignored, and Python keeps it so.
signal.signal(signal.SIGINT, signal.default_int_handler)

class _InterruptAt:
    def find_spec(self, name, path=None, target=None):
        if name == {name!r}:
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, _InterruptAt())
'''


@pytest.mark.parametrize("name", ["mcastmember.tools.view",       # the CLI's own imports
                                  "mcastmember.tribes.fronts.service"])    # the service's, in main()
def test_ctrl_c_while_starting_ends_quietly_with_status_130(group_port, tmp_path, name):
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(INTERRUPT_AT.format(name=name))
    env = dict(os.environ, PYTHONPATH=str(hooks))
    result = run(["join", GROUP, "--port", str(group_port), "--interface", "127.0.0.1",
                  "--ttl", "0", "--duration", "5"], tmp_path, env=env)
    assert (result.returncode, result.stdout, result.stderr) == (130, "", "")
