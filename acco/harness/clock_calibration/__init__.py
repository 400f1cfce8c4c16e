"""`make calibrate-clock`: the virtual clock's costs measured on this
machine or taken from the paper's hardware (calibrate.py), and the clock validated against real runs
where the testbed is faithful (validate_clock.py). It reads a run folder as the benchmark does
(steady_rate)."""
