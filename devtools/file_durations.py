"""Write ``tests/file_durations.json`` from a pytest JUnit XML report: each test file's
seconds (setup, call and teardown of its tests), which ``tests/conftest.py`` uses to hand
the longest files to ``make test``'s workers first.

    .venv/bin/python -m pytest -n 3 --dist loadfile --junitxml=/tmp/run.xml
    .venv/bin/python -m devtools.file_durations /tmp/run.xml
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ElementTree
from collections import Counter
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "tests" / "file_durations.json"


def file_seconds(junit_xml: Path) -> dict[str, float]:
    seconds: Counter[str] = Counter()
    for case in ElementTree.parse(junit_xml).iter("testcase"):
        # classname: tests.integration.test_x (a class's tests: tests.integration.test_x.Class)
        parts = case.get("classname", "").split(".")
        while parts and not parts[-1].startswith("test_"):
            parts.pop()  # a class name
        if parts:
            seconds["/".join(parts) + ".py"] += float(case.get("time") or 0)
    return {name: round(value, 1) for name, value in sorted(seconds.items())}


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    OUT.write_text(json.dumps(file_seconds(Path(sys.argv[1])), indent=1) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
