#!/usr/bin/python3
"""Reference figures for loadcheck's verdict (TestVerdictReference).

Each case is a run's per-round sidecar CPU per op (µs/op) for the baseline "off" and one
or more modes, with an absolute budget per mode. The figures each budget's verdict must
show are computed here with SciPy's one-sample t-test on the paired differences (scipy.
stats.ttest_1samp with alternative="greater" and "less"), SciPy's t quantile for the
one-sided 95% bounds, and statsmodels' Holm adjustment (multipletests, method="holm").

Regenerate with (Debian: apt-get install python3-scipy python3-statsmodels):

    /usr/bin/python3 loadcheck/testdata/verdictref/gen.py > loadcheck/testdata/verdictref/cases.json
"""
import json

import numpy as np
import scipy
import statsmodels
from scipy import stats
from statsmodels.stats.multitest import multipletests

ALPHA = 0.05
rng = np.random.default_rng(58)


def case(name, rule, n, budgets):
    """budgets: (mode, limit, k) with the mode's mean difference at limit + k standard errors."""
    modes = {}
    base = 10 + 0.4 * rng.standard_normal(n)
    sd = 0.3
    se = sd / np.sqrt(n)
    for mode, limit, k in budgets:
        noise = rng.standard_normal(n)
        noise = (noise - noise.mean()) / noise.std(ddof=1)
        modes[mode] = base + limit + k * se + sd * noise
    want = []
    for mode, limit, k in budgets:
        d = modes[mode] - base
        over = stats.ttest_1samp(d, limit, alternative="greater")
        under = stats.ttest_1samp(d, limit, alternative="less")
        df = n - 1
        sem = stats.sem(d)
        q = stats.t.ppf(1 - ALPHA, df) * sem
        want.append({
            "mode": mode, "limit": limit,
            "value": float(d.mean()), "value_err": float(sem), "t": float(over.statistic), "df": df,
            "p_over": float(over.pvalue), "p_under": float(under.pvalue),
            "lower95": float(d.mean() - q), "upper95": float(d.mean() + q),
        })
    ps = [w["p_under"] if rule == "prove" else w["p_over"] for w in want]
    if rule == "breach" and len(ps) > 1:
        adj = multipletests(ps, alpha=ALPHA, method="holm")[1]
    else:
        adj = ps  # one budget, or prove: an intersection-union test needs no adjustment
    for w, p, a in zip(want, ps, adj):
        w["p_one_sided"], w["p_adjusted"] = float(p), float(a)
        if w["upper95"] < w["limit"]:
            w["outcome"] = "within"
        elif (rule == "breach" and a < ALPHA) or (rule == "prove" and w["lower95"] > w["limit"]):
            w["outcome"] = "over"
        else:
            w["outcome"] = "not resolved"
        w["breached"] = w["outcome"] == "over" or (rule == "prove" and w["outcome"] != "within")
    return {"name": name, "rule": rule, "off": [float(x) for x in base],
            "modes": {m: [float(x) for x in v] for m, v in modes.items()}, "budgets": want}


cases = []
for rule in ("breach", "prove"):
    for label, k in (("well below", -4), ("below", -2.2), ("just below", -0.5), ("at", 0),
                     ("just above", 0.5), ("above", 2.2), ("well above", 4)):
        cases.append(case(f"{rule}: one budget {label} its limit", rule, 6, [("full", 0.5, k)]))
    # Several budgets: below, at and above together; each alone over, Holm not; Holm's step-down.
    cases.append(case(f"{rule}: below, at and above", rule, 8,
                      [("fast", 0.3, -3), ("debug", 1.0, 0), ("full", 2.0, 3.5)]))
    cases.append(case(f"{rule}: two just over, Holm holds both", rule, 6,
                      [("fast", 0.3, 2.2), ("full", 1.0, 2.4)]))
    cases.append(case(f"{rule}: one far over steps the other down", rule, 6,
                      [("fast", 0.3, 2.2), ("full", 1.0, 5)]))
    cases.append(case(f"{rule}: three, all below", rule, 10,
                      [("fast", 0.3, -2.5), ("debug", 0.6, -3), ("full", 1.0, -6)]))
    cases.append(case(f"{rule}: four mixed", rule, 12,
                      [("fast", 0.2, 3), ("debug", 0.5, 2.8), ("full", 1.0, -1), ("trace", 2.0, 1.5)]))

print(json.dumps({"generator": f"gen.py: scipy {scipy.__version__}, statsmodels {statsmodels.__version__}",
                  "cases": cases}, indent=1))
