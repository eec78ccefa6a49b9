"""Compares a native and a remoted RESULT line: argv = native file, remoted file. Prints one JSON line
{verdict, why, ratios} for gpu-frameworks.sh; exits 0 on PASS."""
import json
import sys

RTOL = 1e-6


def near(a, b):
    try:
        return abs(a - b) <= RTOL * max(abs(a), abs(b))
    except TypeError:
        return False


def load(p):
    for line in open(p, errors="replace"):
        if line.startswith("RESULT "):
            try:
                return json.loads(line[7:])
            except ValueError:
                continue  # a program's own "RESULT name PASS" line, not a workload's JSON
    return None


def main():
    n, r = load(sys.argv[1]), load(sys.argv[2])
    why = []
    if n is None or not n["ok"]:
        why.append("native: " + (n.get("note", "not ok") if n else "no RESULT line"))
    if r is None or not r["ok"]:
        why.append("remoted: " + (r.get("note", "not ok") if r else "no RESULT line"))
    ratios = {}
    if n and r:
        for k, v in n["exact"].items():
            if r["exact"].get(k) != v:
                why.append(f"{k} differs")
        for k, v in n["close"].items():
            w = r["close"].get(k)
            if k.endswith("_err") or k.endswith("_vs_cpu") or k.endswith("_vs_torch") or k.endswith("_vs_eager"):
                continue  # sanity figures, checked by each side's ok
            # written as "not within" so that a NaN (or a non-number) on either side fails
            if not isinstance(w, list) or len(w) != len(v) or not all(near(a, b) for a, b in zip(v, w)):
                why.append(f"{k} beyond {RTOL} relative")
        for k in ("step_ms", "wall_ms"):
            if n["perf"].get(k) and r["perf"].get(k):
                ratios[k] = round(r["perf"][k] / n["perf"][k], 2)
        if n["perf"].get("tokens_per_s") and r["perf"].get("tokens_per_s"):
            ratios["tokens_per_s"] = round(r["perf"]["tokens_per_s"] / n["perf"]["tokens_per_s"], 3)
    print(json.dumps({"verdict": "FAIL" if why else "PASS", "why": "; ".join(why)[:300], "ratios": ratios,
                      "native": n and n["perf"], "remoted": r and r["perf"]}))
    return 1 if why else 0


sys.exit(main())
