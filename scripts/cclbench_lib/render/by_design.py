"""The report's "Not verifiable by design" section, from rules/by_design.py: listed once, never an anomaly."""

from ..base.values import format_size
from ..render.markdown import md_table
from ..rules.by_design import by_design_groups


TITLE = "## Not verifiable by design"


def by_design_section(data):
    """Lines of the section, or [] when the run has no such case."""
    groups = by_design_groups(data.latest)
    if not groups:
        return []
    rows = []
    for group in groups:
        points = group["points"]
        shown = ", ".join(points) if len(points) <= 3 else f"{points[0]} and {len(points) - 1} more"
        rows.append((f"{group['collective']} {group['placement']}", shown, group["cases"],
                     ", ".join(format_size(size) for size in group["sizes"]), group["reason"]))
    return [TITLE, "",
            "Cases coll_perf skips itself because no run can check them (its reason below). They are planned only "
            "because one launch's placement covers all its collectives; they are not an anomaly or a warning.", "",
            md_table(["cases", "points", "count", "sizes", "reason (coll_perf)"], rows), ""]
