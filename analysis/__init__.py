"""Figures, tables and the reproduction report, regenerated from a results folder alone.

    python analysis/make_figures.py results [--scale cpu] [--only fig5,table1]

A pipeline, each layer importing only those below it (pyproject.toml, the import-linter contract
"analysis's pipeline"; `make lint`), bottom to top:

- runs: `load` (completed run folders -> Run), `render` (saving figures, markdown tables, MissingRuns);
- measurements: `measures` (numbers read off one run: final loss, loss curve, time to a loss, speed);
- statistics: `stats` (paired gaps, intervals, sequential looks, verdicts by the written rule);
- claims: `claims` (the paper's claims as data, evaluated), `comparisons` (groups of runs compared);
- per-experiment analyses: `lr_sweep`, `outer_sweep`, `beyond_diloco`, `ladder`, `tables`, `sim_published`,
  and above them `sim_published_after` (the validation rows added after the simulator was built);
- figures and sections: `figures`, `forest`, `clock_report`, `sim_figures`, `sim_validation`;
- the report: `report`; the commands: `make_figures`, `plot_runs`, `slim_results`, `readme_block`
  (`trace_summary`, a command too, sits with `load`: the tests import its summary).

Commands and library modules apart: the commands are exactly make_figures.py, plot_runs.py,
slim_results.py, report.py, readme_block.py and trace_summary.py. Each has an
`if __name__ == "__main__":` block and answers `--help` with its whole docstring. Every other module
here is a library module and has no such block (`python analysis/<it>.py` runs nothing); use the
commands above. tests/integration/test_docs_commands.py holds this list to the files.
"""
