"""Where things are in the checkout the tests run from."""

from __future__ import annotations

import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository
TRAIN = os.path.join(ROOT, "experiments", "train.py")
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
FIXTURE_RESULTS = os.path.join(FIXTURES, "results")  # runs of every experiment, slimmed (its README.md)
