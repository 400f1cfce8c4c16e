"""REPORT.md's first screen: one row per claim of the paper (analysis/paper_claims.yaml), one column
per kind of evidence — measured on this machine, modelled on the virtual clock, simulated at the
paper's scale, measured on a GPU — each cell a verdict or "—" with why.

How a cell is decided:
- *measured* and *modelled*: the experiment claims the row names (analysis/claims.py, the rule of
  analysis/stats.py). A wall-clock claim is read against the **fastest DDP** measured for it (the
  paper's blocking DDP, the overlapped one, PyTorch's: the one with the best mean on the claim's
  number, so the choice can only make ACCO's case harder), with the verdict against the paper's
  DDP beside it. Modelled verdicts carry the clock's validated error (analysis/modelled.py), and
  a claim outside the clock's validated range gets no verdict.
- **Multiplicity**: every measured and modelled test the table reads is one member of one family,
  and Holm's procedure (analysis/stats.py holm) keeps the chance of *any* false verdict in the
  table at most α; a verdict the family does not keep is shown *inconclusive (Holm)*. The details
  (claims.md) give each test's own verdict at α per claim.
- *simulated*: the scale simulator's ACCO / DDP time at the paper's setting, against 1 ± its error on
  such a ratio (analysis/modelled.py simulator_ratio_error): below is *better*, above *worse*,
  inside *inconclusive*. A prediction, not a test over seeds: outside Holm's family.
- *GPU*: what results/gpu/ holds, in words (no test of a paper claim has run on a GPU yet).

A cell is *reproduced* when every test it reads gives the paper's verdict, *not reproduced* when one
is decided otherwise (or inconclusive at its last look), *undecided* while seeds are missing.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

import yaml

from analysis.claims import METRICS, Claim, ClaimOutcome
from analysis.forest import Row, row_of
from analysis.modelled import simulated_ratios, simulator_ratio_error
from analysis.stats import ALPHA, Verdict, holm

PAPER_CLAIMS = os.path.join(os.path.dirname(__file__), "paper_claims.yaml")
KINDS = ("measured", "modelled", "simulated", "gpu")
KIND_TITLES = {
    "measured": "measured here (CPU)",
    "modelled": "modelled (virtual clock)",
    "simulated": "simulated (paper scale)",
    "gpu": "GPU",
}
TWINS = {
    "": "the paper's DDP",
    " (vs the overlapped DDP)": "the overlapped DDP",
    " (vs PyTorch DDP)": "PyTorch DDP",
}
HOLM = "inconclusive (Holm)"


def load_paper_claims(path: str = PAPER_CLAIMS) -> list[dict]:
    with open(path) as f:
        rows = yaml.safe_load(f) or []
    ids = [r["id"] for r in rows]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{path}: duplicate ids")
    for r in rows:
        unknown = set(r) - {"id", "figure", "claim", "none", *KINDS}
        if unknown:
            raise ValueError(f"{path}: claim {r['id']}: unknown keys {sorted(unknown)}")
    return rows


@dataclass
class Test:
    """One experiment claim a cell reads, with the twin chosen (the fastest DDP) and the paper's one."""

    exp: str
    name: str  # the base name, as paper_claims.yaml gives it
    chosen: tuple[Claim, ClaimOutcome]
    against: str  # which DDP the chosen twin is against
    paper: tuple[Claim, ClaimOutcome] | None = None  # the twin against the paper's DDP, if not chosen
    kept: bool = True  # Holm's procedure kept the verdict (set by `apply_holm`)

    @property
    def outcome(self) -> ClaimOutcome:
        return self.chosen[1]

    @property
    def verdict(self) -> str:
        o = self.outcome
        if o.verdict is None:
            return "not run"
        if not self.kept and o.verdict in (Verdict.MATCHES, Verdict.BETTER, Verdict.WORSE):
            return HOLM
        return o.verdict.value

    @property
    def reproduced(self) -> bool | None:
        o = self.outcome
        if o.verdict is None or o.verdict in (Verdict.MORE_SEEDS, Verdict.UNVALIDATED):
            return None
        if self.verdict == HOLM:
            return False
        return o.verdict is o.claim.expect


@dataclass
class Cell:
    kind: str
    tests: list[Test] = field(default_factory=list)
    text: str = ""  # for cells that are not experiment claims (a shape, a prediction, words)
    status: bool | None | str = "none"  # True / False / None (undecided) / "none" (no evidence)
    link: str = ""

    def label(self) -> str:
        if self.status == "none":
            return "—"
        if self.tests:
            self.status = cell_status(self.tests)
        return status_label(self.status)


def status_label(status: bool | None | str) -> str:
    """A cell's status in words: reproduced, **not reproduced**, undecided, or its own words."""
    if status is True:
        return "reproduced"
    if status is False:
        return "**not reproduced**"
    return "undecided" if status is None else str(status)


def cell_status(tests: list[Test]) -> bool | None | str:
    decided = [t for t in tests if t.outcome.verdict is not None]
    if not decided:
        return "none"
    if all(t.outcome.verdict is Verdict.UNVALIDATED for t in decided):
        return "outside the validated range"
    results = [t.reproduced for t in decided if t.outcome.verdict is not Verdict.UNVALIDATED]
    if any(r is False for r in results):
        return False
    if all(r is True for r in results):
        return True
    return None


@dataclass
class PaperRow:
    id: str
    figure: str
    claim: str
    cells: dict[str, Cell]


def _twins(exp: str, name: str, outcomes: dict) -> list[tuple[str, tuple[Claim, ClaimOutcome]]]:
    return [
        (against, outcomes[(exp, name + suffix)])
        for suffix, against in TWINS.items()
        if (exp, name + suffix) in outcomes
    ]


def _b_speed(pair: tuple[Claim, ClaimOutcome]) -> float:
    """How fast B is on the claim's number (higher: faster), nan without runs."""
    claim, o = pair
    if o.verdict is None or not math.isfinite(o.mean_b):
        return math.nan
    return o.mean_b if METRICS[claim.metric].higher_is_better else -o.mean_b


def pick_test(exp: str, name: str, outcomes: dict) -> Test:
    """The claim `name` of `exp`, against the fastest DDP among its twins for a wall-clock claim."""
    twins = _twins(exp, name, outcomes)
    if not twins:
        raise KeyError(f"analysis/paper_claims.yaml names {exp}: {name!r}, which conf/experiment_info/{exp}.yaml lacks")
    base = twins[0]
    if base[1][0].question != "wall-clock" or len(twins) == 1:
        return Test(exp, name, base[1], base[0])
    ran = [t for t in twins if math.isfinite(_b_speed(t[1]))]
    if not ran:
        return Test(exp, name, base[1], base[0])
    against, chosen = max(ran, key=lambda t: _b_speed(t[1]))
    return Test(exp, name, chosen, against, None if against == base[0] else base[1])


def _ref(ref) -> tuple[str, str]:
    exp, _, name = str(ref).partition(": ")
    return exp.strip(), name.strip()


def build_rows(outcomes: Iterable[tuple[str, Claim, ClaimOutcome]], root: str, scale: str) -> list[PaperRow]:
    """The first screen's rows from every experiment claim's outcome (analysis/report.py claim_outcomes)."""
    by_name = {(exp, c.name): (c, o) for exp, c, o in outcomes}
    rows = []
    sim = simulated_ratios(root)
    sim_error = simulator_ratio_error(root)
    for spec in load_paper_claims():
        cells = {}
        for kind in KINDS:
            cell = Cell(kind)
            refs = spec.get(kind) or []
            if isinstance(refs, str):  # words: the GPU's state
                cell.text, cell.status = refs, "no verdict"
            for ref in refs if isinstance(refs, list) else []:
                if isinstance(ref, dict):
                    special_cell(cell, ref, by_name, root, scale, sim, sim_error)
                elif kind == "simulated":
                    simulated_cell(cell, [str(ref)], sim, sim_error)
                else:
                    cell.tests.append(pick_test(*_ref(ref), by_name))
            if cell.tests:
                cell.status = cell_status(cell.tests)
            if cell.status == "none":
                cell.text = ((spec.get("none") or {}).get(kind)) or "nothing here speaks to it"
            cells[kind] = cell
        rows.append(PaperRow(spec["id"], spec["figure"], spec["claim"], cells))
    apply_holm(rows)
    return rows


def apply_holm(rows: list[PaperRow], alpha: float = ALPHA) -> None:
    """Holm over every measured and modelled test of the table (those with a verdict to keep)."""
    tests = [
        t
        for r in rows
        for kind in ("measured", "modelled")
        for t in r.cells[kind].tests
        if t.outcome.verdict not in (None, Verdict.UNVALIDATED)
    ]
    for t, kept in zip(tests, holm([t.outcome.p_value for t in tests], alpha)):
        t.kept = kept
    for r in rows:
        for kind in ("measured", "modelled"):
            if r.cells[kind].tests:
                r.cells[kind].status = cell_status(r.cells[kind].tests)


def family_size(rows: list[PaperRow]) -> int:
    return sum(
        1
        for r in rows
        for kind in ("measured", "modelled")
        for t in r.cells[kind].tests
        if t.outcome.verdict not in (None, Verdict.UNVALIDATED)
    )


# -- cells that are not experiment claims ---------------------------------------------------------------
def simulated_cell(cell: Cell, settings: list[str], sim: dict, error: float | None) -> None:
    """The simulator's ACCO / DDP time per setting against 1 ± its error on such a ratio."""
    parts: list[str] = []
    statuses: list[bool | None] = []
    for setting in settings:
        if setting not in sim or error is None:
            parts.append(f"{setting}: not simulated")
            statuses.append(None)
            continue
        ours, published, _ = sim[setting]
        word = "better" if ours < 1 - error / 100 else "worse" if ours > 1 + error / 100 else "inconclusive"
        statuses.append(word == "better")
        mode = "adaptive" if "adaptive" in setting else "det."
        parts.append(f"{mode} {ours:.2f} (paper {published:.2f}): {word}")
    cell.text = "; ".join(parts) + (f" (±{error:.0f} % model error)" if error is not None else "")
    cell.status = (
        True
        if statuses and all(s is True for s in statuses)
        else (False if any(s is False for s in statuses) else None)
    )


def special_cell(cell: Cell, ref: dict, by_name: dict, root: str, scale: str, sim: dict, sim_error) -> None:
    ((key, value),) = ref.items()
    if key == "shape":  # fig4's trend: a shape check, not a test over seeds
        from analysis.figures import fig4_data

        try:
            ratios = fig4_data(root, scale)["comm_over_compute"].to_numpy()
        except Exception as exc:  # no runs: the cell says so
            cell.text, cell.status = f"not run ({type(exc).__name__})", "none"
            return
        grows = len(ratios) > 1 and all(b > a for a, b in zip(ratios, ratios[1:]))
        cell.text = "the ratio " + " → ".join(f"{x:.2f}" for x in ratios) + (" grows" if grows else " does not grow")
        cell.status = bool(grows)
    elif key == "grows" and isinstance(value, list):  # simulated: the two layouts' ratios
        if error_missing := (sim_error is None or any(s not in sim for s in value)):
            cell.text, cell.status = "not simulated", "none"
            return
        assert not error_missing
        one, two = sim[value[0]][0], sim[value[1]][0]
        e = sim_error / 100
        word = "grows" if two < one - e else "does not grow" if two > one + e else "inconclusive"
        cell.text = f"ACCO/DDP {one:.2f} on one node → {two:.2f} on two: {word} (±{sim_error:.0f} %)"
        cell.status = True if word == "grows" else (False if word == "does not grow" else None)
    elif key == "grows":  # measured: read from fig8's two layouts' rows, not a test of its own
        one = pick_test("fig8", "ACCO reaches DDP's validation loss sooner on one node", by_name)
        two = pick_test("fig8", "ACCO reaches DDP's validation loss sooner on two nodes", by_name)
        g1, g2 = one.outcome.gap, two.outcome.gap
        if g1 is None or g2 is None or not g1.n or not g2.n:
            cell.text, cell.status = "not run", "none"
            return
        grows = two.outcome.verdict is Verdict.BETTER and g2.mean_pct < g1.mean_pct
        cell.text = (
            f"one node {g1.mean_pct:+.0f} %, two nodes {g2.mean_pct:+.0f} % (the two rows above, not a test "
            f"of its own): {'grows' if grows else 'does not grow'}"
        )
        cell.status = bool(grows)
    elif key == "memory":  # Table 1: ACCO's measured per-rank state against the formula
        from analysis.tables import table1

        try:
            m = table1(root, scale, save=False).get("measured")
        except Exception as exc:
            cell.text, cell.status = f"not run ({type(exc).__name__})", "none"
            return
        acco = m[m["method"].astype(str).str.upper().str.startswith("ACCO")] if m is not None and not m.empty else None
        if acco is None or acco.empty:
            cell.text, cell.status = "no ACCO run with its state measured", "none"
            return
        ratio = acco["measured_over_formula"].astype(float)
        ok = bool(((ratio - 1).abs() <= 0.05).all())
        cell.text = (
            f"ACCO's per-rank state / Table 1's formula: {ratio.min():.3f}–{ratio.max():.3f} ({len(ratio)} settings)"
        )
        cell.status = ok
    else:
        raise ValueError(f"analysis/paper_claims.yaml: unknown evidence {key!r}")


# -- rendering ------------------------------------------------------------------------------------------
def test_text(t: Test) -> str:
    """'**better** −3.5 % [−6.9, −0.1] vs PyTorch DDP' (and the paper's DDP's verdict beside it)."""
    o = t.outcome
    if o.verdict is None:
        return "not run"
    if o.verdict is Verdict.UNVALIDATED:
        return "outside the validated range"
    gap = o.look.gap.describe().replace(" (n = ", " n=").replace(")", "") if o.look is not None else ""
    gap = gap.rsplit(", ±", 1)[0]  # the model error is in the interval already (the legend says so)
    vs = f" vs {t.against}" if t.outcome.claim.question == "wall-clock" and t.against != "the paper's DDP" else ""
    out = f"**{t.verdict}** {gap}{vs}"
    if t.paper is not None and t.paper[1].verdict is not None:
        out += f"; vs the paper's DDP: {t.paper[1].verdict.value}"
    return out


SHOWN = 2  # tests written out in a cell of the first screen
GENERIC = ("a loss claim", "not a time claim", "not a GPU claim")  # "—" with no note: the legend says why


def cell_text(cell: Cell, link: str) -> str:
    if cell.status == "none":
        return "—" if not cell.text or cell.text in GENERIC else f"— ({cell.text})"
    if cell.tests:
        shown = [t for t in cell.tests if t.outcome.verdict is not Verdict.UNVALIDATED]
        outside = len(cell.tests) - len(shown)
        body = "; ".join(test_text(t) for t in shown[:SHOWN])
        if len(shown) > SHOWN:  # the first screen stays readable; claims.md has every test
            body += f"; {len(shown) - SHOWN} more in [claims.md](claims.md)"
        if outside:
            body += ("; " if body else "") + f"{outside} outside the clock's validated range"
        return f"[{cell.label()}]({link}): {body}"
    label = status_label(cell.status)
    return f"[{label}]({link}): {cell.text}" if link else f"{label}: {cell.text}"


DECIDED = (Verdict.MATCHES.value, Verdict.BETTER.value, Verdict.WORSE.value)


def decided_against(cell: Cell) -> bool:
    """A test of the cell gave a verdict other than the paper's and kept it under Holm: evidence against
    the claim, not only a failure to show it."""
    return any(t.reproduced is False and t.verdict in DECIDED for t in cell.tests)


def counts(rows: list[PaperRow], kind: str) -> dict[str, int]:
    out = {"reproduced": 0, "not reproduced": 0, "undecided": 0, "outside": 0, "words": 0, "none": 0}
    for r in rows:
        s = r.cells[kind].status
        if s is True or s is False or s is None:
            key = {True: "reproduced", False: "not reproduced"}.get(s, "undecided") if s is not None else "undecided"
        else:
            key = {"none": "none", "outside the validated range": "outside"}.get(str(s), "words")
        out[key] += 1
    return out


def forest_rows(rows: list[PaperRow]) -> list[Row]:
    """One row of the picture per paper claim: its first measured test, else its first modelled one."""
    out = []
    for r in rows:
        for kind in ("measured", "modelled"):
            tests = r.cells[kind].tests
            if not tests:
                continue
            t = tests[0]
            base = row_of(t.exp, t.outcome.claim, t.outcome)
            # filled or hollow as the table's cell: a claim with two tests (fig9's, vs each DDP) is
            # reproduced only if both are, so its first test alone must not fill the marker
            status = r.cells[kind].status
            out.append(replace(base, figure=r.figure, name=r.claim[:70], verdict=t.verdict, reproduced=status is True))
            break
    return out
