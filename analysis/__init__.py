"""Figures and tables of the ACCO reproduction, regenerated from a results folder alone.

    python analysis/make_figures.py results [--scale cpu] [--only fig5,table1]

- `analysis.load`     — discover completed runs under `<root>/<exp>/<scale>/*/`, tidy DataFrames;
- `analysis.figures`  — one function per figure (fig4 … fig11, plus an overlap timeline);
- `analysis.tables`   — Tables 1-3 (formulas / perplexities / wall-clock) beside the paper's values;
- `analysis.trace_summary` — per-rank compute / communication / overlap of one trace.json.
"""
