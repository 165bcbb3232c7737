"""Check the documentation: README.md (the front page) has the install and
test commands, and its links lead to files that exist and to pages and
headings of the built site (sphinx-build -b html docs OUT); the site shows
every setting of both fronts, in the signature with its default and in the
description, and every key of config.Settings.

Usage: python .ci/check_docs.py OUT
"""

import html.parser
import inspect
import pathlib
import re
import sys

from mcastmember import ServiceConfig
from mcastmember.tribes.engine.config import Settings


class Objects(html.parser.HTMLParser):
    """For every documented object (a <dt id=...>): its signature's
    parameters as {name: default text}, and the literals (``x``) of its
    description."""

    def __init__(self):
        super().__init__()
        self.params, self.literals = {}, {}
        self._current = None      # id of the object being read
        self._depth = 0           # <dl> nesting inside it
        self._in = []             # open elements' classes
        self._param = None        # [name, default] of the sig-param being read

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        classes = (attrs.get("class") or "").split()
        if tag == "dt" and "sig-object" in classes and attrs.get("id"):
            self._current, self._depth = attrs["id"], 0
            self.params.setdefault(self._current, {})
            self.literals.setdefault(self._current, set())
        if self._current and tag == "dl":
            self._depth += 1
        if tag == "em" and "sig-param" in classes:
            self._param = [None, None]
        self._in.append((tag, classes))

    def handle_endtag(self, tag):
        while self._in:
            open_tag, classes = self._in.pop()
            if open_tag == tag:
                break
        if tag == "em" and self._param is not None:
            name, default = self._param
            if name is not None:
                self.params[self._current][name] = default
            self._param = None
        if self._current and tag == "dl":
            self._depth -= 1
            if self._depth < 0:        # the object's own <dl> closed
                self._current = None

    def handle_data(self, data):
        if self._current is None:
            return
        classes = {c for _, cs in self._in for c in cs}
        if self._param is not None:
            if "default_value" in classes:
                self._param[1] = (self._param[1] or "") + data
            elif "n" in classes and self._param[0] is None and data.strip():
                self._param[0] = data.strip()
        elif "literal" in classes and data.strip():
            self.literals[self._current].add(data.strip())


def parse(path):
    objects = Objects()
    objects.feed(path.read_text(encoding="utf-8"))
    return objects


ROOT = pathlib.Path(__file__).resolve().parent.parent
# README.md is the front page: its install and test commands are the ones CI
# runs (.ci/run) and a newcomer types, word for word.
COMMANDS = ("pip install . && mcast-demo join 228.0.0.4 --interface 127.0.0.1 --ttl 0",
            "pip install '.[test]' && pytest")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def readme_problems(out):
    """The README's commands are there, and every link of the README to a file
    of this repository names one that exists; a link to a docs page
    (docs/PAGE.md, optionally #heading) names a page of the built site and,
    with #heading, an anchor on it."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    problems = [f"README.md: the command {command!r} is missing"
                for command in COMMANDS if command not in text]
    pages = 0
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):          # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        if not (ROOT / path).exists():
            problems.append(f"README.md: link to {target!r}: no file {path!r}")
            continue
        if path.startswith("docs/") and path.endswith(".md"):
            pages += 1
            page = out / (path[len("docs/"):-len(".md")] + ".html")
            if not page.exists():
                problems.append(f"README.md: link to {target!r}: {path} is not on the site")
            elif anchor and f'id="{anchor}"' not in page.read_text(encoding="utf-8"):
                problems.append(f"README.md: link to {target!r}: no heading #{anchor} on {path}")
    if not pages:
        problems.append("README.md links to no docs page")
    return problems


def main(out):
    out = pathlib.Path(out)
    problems = readme_problems(out)
    settings = [p for p in inspect.signature(ServiceConfig.__init__).parameters.values()
                if p.kind is inspect.Parameter.KEYWORD_ONLY]
    fronts = parse(out / "api" / "fronts.html")
    # Both fronts take ServiceConfig's settings (config.takes_settings).
    for name in ("mcastmember.McastService", "mcastmember.AsyncMcastService"):
        params = fronts.params.get(name)
        if params is None:
            problems.append(f"{name} is not on api/fronts.html")
            continue
        for setting in settings:
            if setting.name not in params:
                problems.append(f"{name}: {setting.name} missing from the signature")
            elif params[setting.name] != repr(setting.default):
                problems.append(f"{name}: {setting.name} shows default "
                                f"{params[setting.name]!r}, not {setting.default!r}")
            if setting.name not in fronts.literals[name]:
                problems.append(f"{name}: {setting.name} not described")
    config = parse(out / "api" / "config.html")
    keys = config.literals.get("mcastmember.tribes.engine.config.Settings", set())
    problems += [f"Settings: {key} not listed" for key in Settings.__annotations__
                 if key not in keys]
    for problem in problems:
        print("docs:", problem)
    if not problems:
        print(f"docs: the README's commands and links hold; the API pages list all "
              f"{len(settings)} settings of both fronts")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
