"""Merges the rows a scripts/gpu-frameworks.sh run wrote (--out DIR: DIR/table.md) into the compatibility
table of docs/cuda.md, between <!-- frameworks:begin --> and <!-- frameworks:end -->: argv = table.md,
docs file. A row is matched by its workload (the first cell up to ':'); its description is kept and the
other cells replaced, so a run of some workloads (--only) leaves the other rows as they were. Rows not in
the docs are appended. The "unproven" line under the table is recomputed from the Remoted column."""
import sys

BEGIN, END = "<!-- frameworks:begin -->", "<!-- frameworks:end -->"
HEADER = "| Workload | Framework | Native | Remoted | Remoted/native | Date | GPU |"


def cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def key(cell):
    return cell.split(":")[0].strip().strip("`")


def is_row(line):
    return line.startswith("|") and not line.startswith("|---") and cells(line)[0] != "Workload"


def merge(table_md, doc):
    a, b = doc.find(BEGIN), doc.find(END)
    if a < 0 or b < a:
        raise SystemExit(f"apply_table: the docs lack {BEGIN} ... {END}")
    rows = [cells(l) for l in doc[a + len(BEGIN):b].splitlines() if is_row(l)]
    new = [cells(l) for l in table_md.splitlines() if is_row(l)]
    for n in new:
        if len(n) != 7:
            raise SystemExit(f"apply_table: a row of {len(n)} cells, not 7: {n}")
        if n[6].startswith("FAKE"):  # the table is what a real GPU did; --selftest rows prove the harness only
            raise SystemExit(f"apply_table: {n[0]} is a --selftest row (GPU: {n[6]}), not a GPU result")
        hit = [r for r in rows if key(r[0]) == key(n[0])]
        if hit:
            hit[0][1:] = n[1:]
        else:
            rows.append(n)
    unproven = [key(r[0]) for r in rows if r[3] != "PASS"]
    body = [HEADER, "|---|---|---|---|---|---|---|"] + ["| " + " | ".join(r) + " |" for r in rows]
    body += ["", "Unproven (no PASS through the remoting on a GPU yet): " + (", ".join(unproven) if unproven else "none") + "."]
    return doc[:a + len(BEGIN)] + "\n" + "\n".join(body) + "\n" + doc[b:], len(new)


if __name__ == "__main__":
    table, docs = sys.argv[1], sys.argv[2]
    out, n = merge(open(table).read(), open(docs).read())
    open(docs, "w").write(out)
    print(f"apply_table: {n} row(s) from {table} merged into {docs}")
