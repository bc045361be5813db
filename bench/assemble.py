"""Assemble BENCHMARKS.md: the core section, then each area's bench/<area>.md (headings one level down).

    python bench/assemble.py
"""
from pathlib import Path
root = Path(__file__).resolve().parents[1]
core = (root / "BENCHMARKS.md").read_text().split("\n<!-- areas -->")[0].rstrip() + "\n"
parts = [core, "\n<!-- areas -->\n"]
for area, title in (("learn", "Learn"), ("wire", "Wire"), ("emulate", "Emulate"), ("detect", "Detect"),
                    ("manage", "Manage")):
    path = root / "bench" / f"{area}.md"
    if not path.exists():
        continue
    text = path.read_text()
    lines = ["#" + l if l.startswith("#") else l for l in text.splitlines()]
    parts.append(f"\n<!-- from bench/{area}.md -->\n" + "\n".join(lines) + "\n")
(root / "BENCHMARKS.md").write_text("".join(parts))
