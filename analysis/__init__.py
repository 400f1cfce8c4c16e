"""Figures, tables and the reproduction report, regenerated from a results folder alone.

    python analysis/make_figures.py results [--scale cpu] [--only fig5,table1]

A pipeline, each layer importing only those below it (pyproject.toml, the import-linter contract
"analysis's pipeline"; `make lint`), bottom to top:

- runs: `load` (completed run folders -> Run), `render` (saving figures, markdown tables, MissingRuns);
- measurements: `measures` (numbers read off one run: final loss, loss curve, time to a loss, speed);
- statistics: `stats` (paired gaps, intervals, sequential looks, verdicts by the written rule);
- claims: `claims` (the paper's claims as data, evaluated), `comparisons` (groups of runs compared);
- per-experiment analyses: `lr_sweep`, `outer_sweep`, `beyond_diloco`, `ladder`, `tables`, `sim_published`;
- figures and sections: `figures`, `forest`, `clock_report`, `sim_figures`, `sim_validation`;
- the report: `report`; the commands: `make_figures`, `plot_runs`, `slim_results`, `trace_summary`.
"""
