"""compare_losses.py REF TOL RUN: the step losses (REF-steps.json, RUN-steps.json: tcc train
--step-log) and the test loss (REF-metrics.json, RUN-metrics.json: tcc train --metrics, last
epoch) of RUN within relative TOL of REF's. Prints "<n> steps and the test loss within <TOL>%";
fails with both lists otherwise. Any python3 works (only the standard library).
"""
import json
import sys

ref, tol, run = sys.argv[1], float(sys.argv[2]), sys.argv[3]
a = json.load(open(ref + "-steps.json"))
b = json.load(open(run + "-steps.json"))
assert len(a) == len(b) and a, (a, b)
for x, y in zip(a, b):
    assert abs(x - y) <= tol * abs(x), ("step losses", a, b)
ta = json.load(open(ref + "-metrics.json"))[-1]["test_loss"]
tb = json.load(open(run + "-metrics.json"))[-1]["test_loss"]
assert abs(ta - tb) <= tol * abs(ta), ("test loss", ta, tb)
print("%d steps and the test loss within %g%%" % (len(a), tol * 100))
