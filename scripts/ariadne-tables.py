#!/usr/bin/env python3
"""Ariadne's evaluation (thesis, tables 5.3 and 5.4) from foe's reports of a corpus run with the plain build's
exceptions (`foe bench --corpus DB --reports DIR --plain-exceptions`):

- exceptions by kind: unique exception locations (file, line, column) and input-location pairs (every input foe
  ran that raised there, `inputs_raising`, as Ariadne counts them; reports older than it count one per location);
- functions: analysed (both builds ran), exception-free as proved (every exception condition of the explored
  paths refuted: foe's verdict `proved_impossible`), exception-free as sampled (none found, not proved);
- potentially avoidable overflows and underflows: the real-number result of the witness input's path is a
  normal float (Ariadne's classifier), against those classified (an exact reference exists) and all.

    scripts/ariadne-tables.py REPORTS_DIR [--library gsl]
"""
import argparse
import json
import sys
from collections import Counter
from pathlib import Path


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("reports", type=Path)
    ap.add_argument("--library", default="", help="only reports whose file name starts with this (gsl, cephes)")
    args = ap.parse_args()
    locations, pairs = Counter(), Counter()
    avoid = {k: Counter() for k in ("overflow", "underflow")}
    functions = Counter()
    for path in sorted(args.reports.glob("*.json")):
        if not path.name.startswith(args.library):
            continue
        try:
            report = json.loads(path.read_text())
        except json.JSONDecodeError:
            continue
        for f in report.get("functions", []):
            if f.get("status") not in ("analysed", "partial"):
                continue
            functions["analysed"] += 1
            verdict = (f.get("verdict") or {}).get("exceptions")
            if verdict == "proved_impossible":
                functions["exception-free (proved)"] += 1
            plain = f.get("plain_exceptions", [])
            if not plain and verdict != "proved_impossible":
                functions["exception-free (sampled)"] += 1
            seen = set()
            for e in plain:
                key = (path.name, e.get("line"), e.get("column"), e["kind"])
                if key not in seen:
                    seen.add(key)
                    locations[e["kind"]] += 1
                pairs[e["kind"]] += e.get("inputs_raising") or 1
                if e["kind"] in avoid:
                    a = e.get("avoidable")
                    avoid[e["kind"]]["total"] += 1
                    if a == "avoidable":
                        avoid[e["kind"]]["avoidable"] += 1
                    if a in ("avoidable", "unavoidable"):
                        avoid[e["kind"]]["classified"] += 1
    kinds = ["overflow", "underflow", "invalid", "divide-by-zero"]
    print("| exceptions of the plain build | " + " | ".join(kinds) + " |")
    print("|---|" + "---|" * len(kinds))
    print("| unique locations | " + " | ".join(str(locations[k]) for k in kinds) + " |")
    print("| input-location pairs | " + " | ".join(str(pairs[k]) for k in kinds) + " |")
    print()
    print("| functions | count |\n|---|---|")
    for k in ("analysed", "exception-free (proved)", "exception-free (sampled)"):
        print(f"| {k} | {functions[k]} |")
    print()
    print("| | overflows | underflows |\n|---|---|---|")
    for row in ("avoidable", "classified", "total"):
        print(f"| {row} | {avoid['overflow'][row]} | {avoid['underflow'][row]} |")
    ratio = lambda k: avoid[k]["avoidable"] / avoid[k]["total"] if avoid[k]["total"] else 0.0
    print(f"| ratio (avoidable / total) | {ratio('overflow'):.2f} | {ratio('underflow'):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
