"""Rewrites an expected-failures list from `tcc check` output: every FAIL line becomes
"NAME  REASON" (an operator without a lowering as "Op (domain, opset N) has no lowering yet",
other failures by their message), the list's '#' header kept.

    build/bin/tcc check --device cpu -q DIR | python3 update_expected_failures.py LIST
"""
import re
import sys


def reason(detail: str) -> str:
    m = re.search(r"unsupported operators? \(\d+ nodes?\): ([\w.]+)::(\w+) \(opset (\d+)\)", detail)
    if m:
        return f"{m.group(2)} ({m.group(1)}, opset {m.group(3)}) has no lowering yet"
    return re.sub(r"^node '[^']*' ", "", detail)[:160]


def main() -> int:
    path = sys.argv[1]
    header = "".join(l for l in open(path) if l.startswith("#"))
    cases = []
    for line in sys.stdin:
        if line.startswith(("FAIL  ", "XFAIL ")):
            name, _, detail = line[6:].rstrip("\n").partition(": ")
            if line.startswith("XFAIL "):  # listed already: keep its reason
                name, _, detail = line[6:].rstrip("\n").partition(" (")
                cases.append(f"{name}  {detail[:-1]}")
            else:
                cases.append(f"{name}  {reason(detail)}")
    with open(path, "w") as f:
        f.write(header + "\n".join(sorted(cases)) + "\n")
    print(f"{path}: {len(cases)} cases", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
