"""Parses /metrics bodies with the Prometheus client library's own parsers.

Usage: parse_metrics.py CLASSIC_FILE OPENMETRICS_FILE
Prints one JSON line: the metric families each parser found (name, type, samples).
Any parse error fails the script.
"""

import json
import sys

from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families as classic_families


def families(parse, text):
    return {
        family.name: {
            "type": family.type,
            "samples": [sample.name for sample in family.samples],
        }
        for family in parse(text)
    }


def main():
    classic_path, openmetrics_path = sys.argv[1], sys.argv[2]
    with open(classic_path, encoding="utf-8") as f:
        classic = families(classic_families, f.read())
    with open(openmetrics_path, encoding="utf-8") as f:
        openmetrics = families(openmetrics_families, f.read())
    print(json.dumps({"classic": classic, "openmetrics": openmetrics}))


if __name__ == "__main__":
    main()
