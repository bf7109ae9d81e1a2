"""Markdown tables and number formatting."""

from ..base.numbers import is_finite


def fmt_number(value, digits=2):
    if not is_finite(value):
        return "-"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def md_escape(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def md_table(header, rows):
    lines = ["| " + " | ".join(md_escape(h) for h in header) + " |",
             "|" + "|".join("---" for _ in header) + "|"]
    for row in rows:
        lines.append("| " + " | ".join(md_escape("-" if cell is None or cell == "" else cell) for cell in row) + " |")
    return "\n".join(lines)
