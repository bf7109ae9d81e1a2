"""cclbench orchestration: baseline plans, runs, reports, comparisons and the CI smoke test.

Python 3 standard library only; matplotlib (Debian's python3-matplotlib) is imported lazily for
plots and its absence only removes the plots from a report.

Layers, lowest first; a module imports only from its own or a lower layer, at the top of the file
(tests/scripts/test_layers.py holds every module to it, and a module's layer is its subpackage):
  base     errors, value parsers (sizes, collectives, HCA lists, cross-nic), numbers, atomic files, locations
  model    case records, a run directory as data (run_dir), hosts, the launcher, the doctor checks
  rules    judgements over that data, returning plain data: repeat rule, noise band, A/B, anomalies, ceilings
  render   markdown, plots, the report, the compare report, the doctor table (text from the rules' constants)
  plan     the baseline plan, decode and A/B points, the doctor point's command line
  execute  doctor probes, the runner, smoke
  cli      argument parsers and commands only
"""
