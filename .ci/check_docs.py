"""Check the documentation: every line of README.md is on a docs page (the
guide pages include the README's sections between markers), and the built
site (sphinx-build -b html docs OUT) shows every setting of both fronts, in
the signature with its default and in the description, and every key of
config.Settings.

Usage: python .ci/check_docs.py OUT
"""

import html.parser
import inspect
import pathlib
import re
import sys

from mcastmember import ServiceConfig
from mcastmember.config import Settings


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
MARKER = re.compile(r"^<!-- (docs/[^:]+): (from|to) here -->$")
# The one README section not in the docs: it points to them.
NOT_IN_DOCS = "## Documentation"


def readme_problems():
    """Every README line sits between a docs page's markers, or is a heading
    right before its section's start marker; every region is included."""
    included = set()
    for page in (ROOT / "docs").glob("*.md"):
        included.update(re.findall(r"^:start-after: <!-- (docs/[^:]+): from here -->$",
                                   page.read_text(encoding="utf-8"), re.M))
    lines = (ROOT / "README.md").read_text(encoding="utf-8").split("\n")
    problems, region, skipping, fence, stray = [], None, False, False, False
    for number, line in enumerate(lines, 1):
        marker = MARKER.match(line)
        if line.startswith("```"):
            fence = not fence
        heading = not fence and re.match(r"#{1,6} ", line)
        if marker:
            name, end = marker.group(1), marker.group(2) == "to"
            if end != (region == name):
                problems.append(f"README.md line {number}: marker {name!r} {marker.group(2)} "
                                f"here, where {region!r} is open")
            if not end and name not in included:
                problems.append(f"README.md line {number}: no docs page includes {name!r}")
            region = None if end else name
        elif heading and region is None:
            skipping = line.rstrip() == NOT_IN_DOCS
            following = lines[number] if number < len(lines) else ""
            if not skipping and not MARKER.match(following):
                problems.append(f"README.md line {number}: section {line!r} is on no docs page: "
                                f"follow the heading with <!-- docs/PAGE.md: from here -->, end "
                                f"it with <!-- docs/PAGE.md: to here --> and include it there")
        elif region is None and line.strip() and not skipping and not stray:
            stray = True          # the first such line says enough
            problems.append(f"README.md line {number} is on no docs page (outside the markers)")
    if region is not None:
        problems.append(f"README.md: {region!r} is never closed")
    return problems


def main(out):
    out = pathlib.Path(out)
    problems = readme_problems()
    settings = [p for p in inspect.signature(ServiceConfig.__init__).parameters.values()
                if p.kind is inspect.Parameter.KEYWORD_ONLY]
    fronts = parse(out / "api" / "fronts.html")
    # Both fronts take ServiceConfig's settings (config.takes_settings).
    for name in ("mcastmember.McastService", "mcastmember.aio.AsyncMembership"):
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
    keys = config.literals.get("mcastmember.config.Settings", set())
    problems += [f"Settings: {key} not listed" for key in Settings.__annotations__
                 if key not in keys]
    for problem in problems:
        print("docs:", problem)
    if not problems:
        print(f"docs: every README section is on a page; the API pages list all "
              f"{len(settings)} settings of both fronts")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
