"""cclbench orchestration: baseline plans, runs, reports, comparisons and the CI smoke test.

Python 3 standard library only; matplotlib (Debian's python3-matplotlib) is imported lazily for
plots and its absence only removes the plots from a report.
"""
SCHEMA_VERSION = "1.0.0"
TOOL_VERSION = "0.1.0"
