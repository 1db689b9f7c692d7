"""Print (or check) the README's decision table: `fabricsim size`'s decision rows for one model, token budget and
deadline on today's generation (GB200 NVL72) and the next (Vera Rubin NVL72, AMD Helios, a UALink pod), as a
markdown table. `python tools/decision_table.py` prints it; `--check README.md` exits 1 when the README's copy is
stale (tests/test_decision.py runs the check)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

COMMAND = ("fabricsim size --model llama3-405b --tokens 15T --deadline 90d "
           "--systems gb200-nvl72,vera-rubin-nvl72,helios-mi455x --fabrics xdr --fabric-kinds fat-tree "
           "--oversubscription 1 --gpus 1024..8192 --tp 4,8 --pp 1,4,8 --gbs 2048")
ARGS: dict[str, Any] = {"model": "llama3-405b", "tokens": "15T", "deadline": "90d",
                        "systems": "gb200-nvl72,vera-rubin-nvl72,helios-mi455x", "fabrics": "xdr",
                        "fabric_kinds": "fat-tree",
                        "oversubscription": "1", "gpus": "1024..8192", "tp": "4,8", "pp": "1,4,8", "gbs": "2048"}
BEGIN, END = "<!-- decision table: tools/decision_table.py -->", "<!-- end decision table -->"


def _band(row: dict[str, Any], key: str, scale: float, fmt: str) -> str:
    band = row.get(f"{key}_band") or {}
    value = format(row[key] / scale, fmt)
    if band.get("low") is None or band.get("high") is None:
        return value
    return f"{value} ({format(band['low'] / scale, fmt)}-{format(band['high'] / scale, fmt)})"


def decision() -> list[dict[str, Any]]:
    """The decision rows of the README's search."""
    import fabricsim

    rows: list[dict[str, Any]] = fabricsim.size(**ARGS).data["decision"]
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    """The markdown table of the decision rows (each figure with its 80% band)."""
    lines = ["| system | GPUs | days (80% band) | cost, $M | energy, MWh | capex | facility MW | racks | rests on |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        rests = (f"{len(r['roadmap'])} roadmap parts, {len(r['estimated'])} estimated figures" if r["roadmap"]
                 else "shipping parts")
        mark = " (roadmap)" if r["status"] == "roadmap" else ""
        lines.append(f"| {r['system']}{mark} | {r['gpus']:,} | {_band(r, 'time_to_train_s', 86400.0, '.1f')} | "
                     f"{_band(r, 'cost_usd', 1e6, '.1f')} | {_band(r, 'energy_mwh', 1.0, ',.0f')} | "
                     f"${r['capex_usd'] / 1e6:,.0f}M | {r['facility_power_w'] / 1e6:.1f} | {r['racks']:,} | {rests} |")
    return "\n".join(lines)


def block(rows: list[dict[str, Any]]) -> str:
    """The README block: markers, the command and the table."""
    return f"{BEGIN}\n```bash\n{COMMAND}\n```\n\n{table(rows)}\n{END}"


def readme_block(text: str) -> str:
    """The decision block as the README holds it ('' when it has none)."""
    if BEGIN not in text or END not in text:
        return ""
    return text[text.index(BEGIN):text.index(END) + len(END)]


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "--check":
        held = readme_block(Path(argv[1]).read_text(encoding="utf-8"))
        fresh = block(decision())
        if held != fresh:
            print(f"{argv[1]}'s decision table is stale; replace it with:\n{fresh}")
            return 1
        return 0
    print(block(decision()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
