"""Prints the tcc plan predictions of plan.test's runs, with the pipeline's arithmetic checked
against the compile report's stage share."""
import json
import os
import sys

work = sys.argv[1]
load = lambda name: json.load(open(os.path.join(work, name)))  # noqa: E731
for name in ("one.json", "dp2.json"):
    row = load(name)[0]
    print(f"{row['mesh'] or '1 rank'}: ranks {row['ranks']}, compute {row['compute_ms']:.3f} ms, "
          f"communication {row['communication_ms']:.3f} ms")
row = load("dp2pp2.json")[0]
pipeline = load("report.json")["distributed"]["pipeline"]
share = pipeline["largest_stage_share"]
expected = 10 * share * (row["micro_batches"] + 2 - 1) / row["micro_batches"]
print(f"{row['mesh']}: ranks {row['ranks']}, micro-batches {row['micro_batches']}, compute = 10 ms "
      f"x largest stage share x 1.25: {'yes' if abs(row['compute_ms'] - expected) < 1e-4 * expected else 'no'}"
      f", communication {row['communication_ms']:.3f} ms")
print(f"report: {pipeline['stages']} stages, {pipeline['micro_batches']} micro-batches, largest "
      f"stage share in (0.5, 1]: {'yes' if 0.5 < share <= 1 else 'no'}")
