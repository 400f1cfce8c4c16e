"""`make calibrate-clock` (experiments/calibrate_clock.py): the virtual clock's costs measured on this
machine or taken from the paper's hardware (calibrate.py), and the clock validated against real runs
where the testbed is faithful (validate_clock.py). It reads a run folder as the benchmark does
(acco/harness/bench/measure.py)."""
