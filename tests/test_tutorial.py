"""The tutorial (docs/tutorial.md) does what it says: its Python blocks, run
in order as one script on loopback, print exactly its text blocks."""

import pathlib
import re
import subprocess
import sys

import pytest

TUTORIAL = pathlib.Path(__file__).resolve().parent.parent / "docs" / "tutorial.md"
BLOCK = re.compile(r"^```(python|text)\n(.*?)^```$", re.M | re.S)

pytestmark = pytest.mark.network


def blocks(kind):
    return [body for lang, body in BLOCK.findall(TUTORIAL.read_text()) if lang == kind]


def test_the_tutorial_prints_what_it_shows(tmp_path, group_port):
    script = "".join(blocks("python"))
    # The tutorial uses Tomcat's port; a test gets a port of its own.
    assert script.count("45564") == 4
    script = script.replace("45564", str(group_port))
    assert "127.0.0.1" in script and '"ttl": 0' in script      # loopback only
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         cwd=tmp_path, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout == "".join(blocks("text"))
