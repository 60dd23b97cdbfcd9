"""Write ``tests/file_durations.json`` from pytest JUnit XML reports: each test file's
seconds (setup, call and teardown of its tests; the median over the reports given, since
one run on a shared machine moves by a third), which ``tests/conftest.py`` uses to hand the
longest files to ``make test``'s workers first.

    .venv/bin/python -m pytest -n 3 --dist loadfile --junitxml=/tmp/run1.xml
    .venv/bin/python -m devtools.file_durations /tmp/run1.xml [/tmp/run2.xml ...]
"""

from __future__ import annotations

import json
import statistics
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
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    runs = [file_seconds(Path(name)) for name in sys.argv[1:]]
    files = sorted({name for run in runs for name in run})
    medians = {name: statistics.median(run[name] for run in runs if name in run)
               for name in files}
    OUT.write_text(json.dumps(medians, indent=1) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
