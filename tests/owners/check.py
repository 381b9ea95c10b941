#!/usr/bin/python3
"""Table-owner check (issue 10, step 5: one owner per table).

Every table created by src/db/migrations/*.sql (or by a CREATE TABLE in the
C sources, as src/db/sqlite.c's nubo_migrations) has one owning folder in
src/db/owners.tsv. This check scans the SQL string literals of src/**/*.[ch]
and reports each place where a file outside the owner's folder names a table
after FROM, JOIN, INTO, UPDATE, TABLE or REFERENCES. The places known today
are listed in tests/owners/known-violations.tsv (one line per file x table);
the check fails on

  - a violation (file x table) that the baseline does not list,
  - a baseline line that no longer occurs (the baseline only shrinks),
  - a table of the schema without an owner line, an owner line naming no
    table of the schema, or an owner folder that does not exist,
  - a write (INSERT INTO, REPLACE INTO, UPDATE, DELETE FROM) of a table whose
    owner line has a fourth column, the one folder inside the owner that may
    write it (compute's instances: src/compute/objects), from anywhere else.
    No baseline for these.

Migrations (.sql) and tests/ are not scanned: a migration is the owner's own
schema, in the owner's number range (docs/dev-guide.md). SQL built at run
time with the table name in a variable ("FROM %s") is not seen.

Usage: check.py [--root DIR]     run the check (exit 0 pass, 1 fail)
       check.py --list           print today's violations in baseline form
       check.py --self-test      check the checker on synthetic trees
"""
import os
import re
import sys
import tempfile

OWNERS = "src/db/owners.tsv"
BASELINE = "tests/owners/known-violations.tsv"
MIGRATIONS = "src/db/migrations"

# Clause keywords (upper case, as every SQL literal of the tree is written)
# after which a table name follows.
CLAUSE = re.compile(r"\b(FROM|JOIN|INTO|UPDATE|TABLE|REFERENCES)\b")
IDENT = re.compile(r"\s*[\"`\[]?([A-Za-z_][A-Za-z0-9_]*)[\"`\]]?")
SKIP = re.compile(r"\s*(?:OR\s+[A-Z]+\b|IF\s+(?:NOT\s+)?EXISTS\b|ONLY\b)")
# Words that end a FROM item instead of being its alias.
NOT_ALIAS = set(
    "WHERE JOIN LEFT RIGHT INNER OUTER CROSS NATURAL FULL ON USING GROUP ORDER "
    "LIMIT OFFSET HAVING UNION EXCEPT INTERSECT SET VALUES SELECT DEFAULT AS "
    "RETURNING WINDOW INDEXED NOT".split())
CREATE_RE = r"\bCREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?[\"`\[]?([A-Za-z_]\w*)"
CREATE_SQL = re.compile(CREATE_RE, re.I)  # in a migration: any case
CREATE_C = re.compile(CREATE_RE)  # in a C literal: upper case, as SQL is written
WRITE = re.compile(r"\b(?:INSERT(?:\s+OR\s+[A-Z]+)?\s+INTO|REPLACE\s+INTO|"
                   r"UPDATE(?:\s+OR\s+[A-Z]+)?|DELETE\s+FROM)\s+[\"`\[]?([A-Za-z_]\w*)")


def c_literals(text):
    """Yields (sql, lines) for each run of adjacent C string literals in
    text (concatenated as the compiler does; an identifier between two
    literals, a macro such as PRId64 or a column-list macro, becomes a
    space). lines[i] is the source line of sql[i]. Comments and character
    literals are skipped."""
    i, n, line = 0, len(text), 1
    buf, lines, pending = [], [], False  # pending: run may continue
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif c in " \t\r\f\v" or (c == "\\" and text.startswith("\\\n", i)):
            if c == "\\":
                line += 1
                i += 1
            i += 1
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            line += text.count("\n", i, j)
            i = j
        elif c == '"':
            i += 1
            while i < n and text[i] != '"':
                ch = text[i]
                if ch == "\\" and i + 1 < n:
                    nxt = text[i + 1]
                    if nxt == "\n":
                        line += 1
                    else:
                        buf.append({"n": "\n", "t": " "}.get(nxt, nxt))
                        lines.append(line)
                    i += 2
                    continue
                if ch == "\n":  # unterminated: stop the literal
                    break
                buf.append(ch)
                lines.append(line)
                i += 1
            if i < n and text[i] == '"':
                i += 1
            pending = True
        elif c == "'":
            j = i + 1
            while j < n and text[j] != "'" and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            i = j + 1
        elif pending and (c.isalpha() or c == "_"):
            j = i
            while j < n and (text[j].isalnum() or text[j] == "_"):
                j += 1
            buf.append(" ")
            lines.append(line)
            i = j
        else:
            if buf:
                yield "".join(buf), lines
            buf, lines, pending = [], [], False
            i += 1
    if buf:
        yield "".join(buf), lines


def named_tables(sql):
    """Yields (offset, table) for each table name sql puts after a clause
    keyword; after FROM, every item of a comma list."""
    for m in CLAUSE.finditer(sql):
        pos = m.end()
        while True:
            s = SKIP.match(sql, pos)
            if not s:
                break
            pos = s.end()
        while True:
            t = IDENT.match(sql, pos)
            if not t or t.group(1).upper() in NOT_ALIAS and t.group(1).isupper():
                break
            yield t.start(1), t.group(1)
            pos = t.end()
            if m.group(1) != "FROM":
                break
            a = re.compile(r"\s+(?:AS\s+)?([A-Za-z_]\w*)").match(sql, pos)
            if a and a.group(1) not in NOT_ALIAS:
                pos = a.end()
            comma = re.compile(r"\s*,").match(sql, pos)
            if not comma:
                break
            pos = comma.end()


def source_files(root):
    """src/**/*.c and *.h, relative to root, sorted."""
    out = []
    for d, dirs, files in os.walk(os.path.join(root, "src")):
        dirs[:] = sorted(x for x in dirs if x != "migrations")
        for f in files:
            if f.endswith((".c", ".h")):
                out.append(os.path.relpath(os.path.join(d, f), root))
    return sorted(out)


def read_tsv(path, ncols):
    """Rows (lineno, fields) of a tab-separated file; # starts a comment."""
    rows = []
    with open(path, encoding="utf-8") as f:
        for no, raw in enumerate(f, 1):
            s = raw.rstrip("\n")
            if not s.strip() or s.lstrip().startswith("#"):
                continue
            fields = s.split("\t")
            rows.append((no, fields + [""] * (ncols - len(fields))))
    return rows


def schema_tables(root, literals):
    """{table: where created} from the migrations and C CREATE TABLEs."""
    tables = {}
    mdir = os.path.join(root, MIGRATIONS)
    for f in sorted(os.listdir(mdir)) if os.path.isdir(mdir) else []:
        if f.endswith(".sql"):
            with open(os.path.join(mdir, f), encoding="utf-8") as fh:
                text = re.sub(r"--[^\n]*", "", fh.read())
            for m in CREATE_SQL.finditer(text):
                tables.setdefault(m.group(1), f"{MIGRATIONS}/{f}")
    for path, lits in literals.items():
        for sql, _ in lits:
            for m in CREATE_C.finditer(sql):
                tables.setdefault(m.group(1), path)
    return tables


def owns(owner, path):
    return path == owner or path.startswith(owner.rstrip("/") + "/")


def run(root, out, mode="check"):
    """Runs the check on the tree at root, printing to out. Returns the exit
    status (0 pass, 1 fail)."""
    errors = []
    literals = {}
    for path in source_files(root):
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            literals[path] = list(c_literals(f.read()))
    tables = schema_tables(root, literals)

    owner = {}
    writer = {}  # table -> the one folder that may write it, when narrowed
    opath = os.path.join(root, OWNERS)
    rows = read_tsv(opath, 4) if os.path.exists(opath) else []
    if not rows:
        errors.append(f"{OWNERS}: missing or empty")
    for no, (table, folder, _note, writes) in rows:
        where = f"{OWNERS}:{no}"
        if writes:
            if not owns(folder, writes) or not os.path.isdir(os.path.join(root, writes)):
                errors.append(f"{where}: writer folder '{writes}' of {table} is not a folder "
                              f"inside its owner {folder}")
            writer[table] = writes
        if table in owner:
            errors.append(f"{where}: table {table} has a second owner line")
        elif table not in tables:
            errors.append(f"{where}: names table {table}, which no migration creates")
        elif not folder or not os.path.isdir(os.path.join(root, folder)):
            errors.append(f"{where}: owner folder '{folder}' of {table} does not exist")
        owner.setdefault(table, folder)
    for table, where in sorted(tables.items()):
        if table not in owner:
            errors.append(f"{where}: creates table {table}, which has no line in {OWNERS}")

    found = {}  # (path, table) -> first line
    for path, lits in literals.items():
        for sql, lines in lits:
            for off, table in named_tables(sql):
                o = owner.get(table)
                if o and not owns(o, path):
                    found.setdefault((path, table), lines[off])

    for path, lits in literals.items():
        for sql, lines in lits:
            for m in WRITE.finditer(sql):
                w = writer.get(m.group(1))
                if w and not owns(w, path):
                    errors.append(f"{path}:{lines[m.start(1)]}: writes table {m.group(1)}, "
                                  f"which only {w} writes")

    if mode == "list":
        for (path, table) in sorted(found):
            print(f"{path}\t{table}\tstep 5: to be moved behind {owner[table]}'s API", file=out)
        return 0

    known = {}
    bpath = os.path.join(root, BASELINE)
    for no, (path, table, _note) in read_tsv(bpath, 3) if os.path.exists(bpath) else []:
        if (path, table) in known:
            errors.append(f"{BASELINE}:{no}: {path} x {table} listed twice")
        known[(path, table)] = no
    for (path, table), line in sorted(found.items()):
        if (path, table) not in known:
            errors.append(f"{path}:{line}: names table {table} owned by {owner[table]}")
    for (path, table), no in sorted(known.items()):
        if (path, table) not in found:
            errors.append(f"{BASELINE}:{no}: {path} no longer names {table}: "
                          "delete this line (the baseline only shrinks)")

    per_owner = {}
    for (path, table) in known:
        if (path, table) in found:
            o = owner[table]
            per_owner.setdefault(o, {}).setdefault(table, 0)
            per_owner[o][table] += 1
    total = sum(sum(t.values()) for t in per_owner.values())
    print(f"table owners: {len(tables)} tables, {total} known violations "
          f"(file x table) remaining in {BASELINE}", file=out)
    for o in sorted(per_owner, key=lambda k: (-sum(per_owner[k].values()), k)):
        ts = per_owner[o]
        detail = ", ".join(f"{t} {c}" for t, c in sorted(ts.items(), key=lambda x: (-x[1], x[0])))
        print(f"  {o:<14} {sum(ts.values()):3d}  ({detail})", file=out)
    for e in errors:
        print(e, file=out)
    if errors:
        print(f"table owners: FAILED, {len(errors)} problem(s); see {OWNERS} and "
              f"{BASELINE} (docs/architecture.md, 'Table owners')", file=out)
    return 1 if errors else 0


def self_test():
    """Builds synthetic trees and checks that the checker passes and fails
    where it must. Returns 0 when every case behaves."""
    import io
    base = {
        MIGRATIONS + "/001_initial.sql":
            "-- CREATE TABLE commented (x);\nCREATE TABLE widgets (id INTEGER);\n"
            "CREATE TABLE IF NOT EXISTS gadgets (id INTEGER);\n",
        OWNERS: "# table\towner\tnote\nwidgets\tsrc/a\tthe widget store\n"
                "gadgets\tsrc/b\tgadgets\n",
        "src/a/w.c": 'static const char *q = "SELECT id FROM widgets w, "\n'
                     '    "gadgets g WHERE 1";\n',
        "src/b/sub/g.c": '/* FROM widgets in a comment */\n'
                         'const char *m = "cannot move widgets from here";\n'
                         'const char *s = "UPDATE gadgets SET widgets = 1";\n',
        BASELINE: "src/a/w.c\tgadgets\tstep 5: to be moved behind src/b's API\n",
    }
    new_violation = '#define COLS "id"\nconst char *q =\n    "DELETE FROM " \n' \
                    '    "gadgets WHERE x IN (SELECT id FROM "\n    "\\"widgets\\")" COLS;\n'
    cases = [
        ("clean tree passes", {}, 0, ["1 known violations"]),
        ("new violation fails", {"src/b/sub/new.c": new_violation}, 1,
         ["src/b/sub/new.c:5: names table widgets owned by src/a"]),
        ("join on a later line", {"src/b/j.c": 'x("SELECT 1 FROM gadgets g"\n  " LEFT JOIN widgets"'
                                                 ' USING (id)");'}, 1,
         ["src/b/j.c:2: names table widgets owned by src/a"]),
        ("conflict clauses and OR forms", {"src/b/u.c":
                                            'q("INSERT INTO gadgets (id) VALUES (1) ON CONFLICT(id) "\n'
                                            '  "DO UPDATE SET id = 2");\n'
                                            'q("UPDATE OR IGNORE gadgets SET id = 3");\n'
                                            'q("INSERT OR REPLACE INTO widgets (id) VALUES (4)");\n'}, 1,
         ["src/b/u.c:4: names table widgets owned by src/a", "1 problem(s)"]),
        ("table created in C without an owner fails",
         {"src/a/db.c": 'x("CREATE TABLE IF NOT EXISTS ledger (v INTEGER)");\n'
                        'y("cannot create table ledger2");\n'}, 1,
         ["src/a/db.c: creates table ledger, which has no line in", "1 problem(s)"]),
        ("stale baseline line fails", {"src/a/w.c": 'const char *q = "SELECT 1 FROM widgets";\n'}, 1,
         ["no longer names gadgets"]),
        ("table without owner fails",
         {MIGRATIONS + "/002_more.sql": "CREATE TABLE sprockets (id INTEGER);\n"}, 1,
         ["creates table sprockets, which has no line in"]),
        ("owner of a table that does not exist fails",
         {OWNERS: base[OWNERS] + "sprockets\tsrc/a\tnone\n"}, 1,
         ["names table sprockets, which no migration creates"]),
        ("owner folder that does not exist fails",
         {OWNERS: base[OWNERS].replace("src/b\t", "src/nope\t")}, 1,
         ["owner folder 'src/nope' of gadgets does not exist"]),
        ("a narrowed writer passes its own writes",
         {OWNERS: base[OWNERS].replace("widget store\n", "widget store\tsrc/a/obj\n"),
          "src/a/obj/o.c": 'q("UPDATE widgets SET id = 1");\n'}, 0, ["1 known violations"]),
        ("a write outside the narrowed writer fails",
         {OWNERS: base[OWNERS].replace("widget store\n", "widget store\tsrc/a/obj\n"),
          "src/a/obj/o.c": "",
          "src/a/x.c": 'q("SELECT id FROM widgets");\nq("DELETE FROM "\n  "widgets");\n'}, 1,
         ["src/a/x.c:3: writes table widgets, which only src/a/obj writes", "1 problem(s)"]),
        ("a writer folder outside the owner fails",
         {OWNERS: base[OWNERS].replace("widget store\n", "widget store\tsrc/b\n")}, 1,
         ["writer folder 'src/b' of widgets is not a folder inside its owner src/a"]),
        ("words and columns are not tables",
         {"src/b/ok.c": 'const char *e = "Unable to delete from widgets";\n'
                        'const char *s = "SELECT widgets FROM gadgets";\n'
                        "char c = '\"'; const char *t = \"INSERT INTO gadgets (widgets) VALUES (1)\";\n"}, 0,
         ["1 known violations"]),
    ]
    bad = 0
    for name, changes, want, needles in cases:
        files = dict(base, **changes)
        with tempfile.TemporaryDirectory() as d:
            for rel, text in files.items():
                os.makedirs(os.path.dirname(os.path.join(d, rel)), exist_ok=True)
                with open(os.path.join(d, rel), "w", encoding="utf-8") as f:
                    f.write(text)
            buf = io.StringIO()
            got = run(d, buf)
            text = buf.getvalue()
        missing = [s for s in needles if s not in text]
        ok = got == want and not missing
        bad += not ok
        print(f"self-test: {'ok  ' if ok else 'FAIL'} {name}")
        if not ok:
            print(f"  exit {got}, wanted {want}; missing {missing}\n" +
                  "".join("  | " + s + "\n" for s in text.splitlines()))
    return 1 if bad else 0


def main(argv):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    mode = "check"
    args = list(argv)
    while args:
        a = args.pop(0)
        if a == "--root" and args:
            root = args.pop(0)
        elif a == "--list":
            mode = "list"
        elif a == "--self-test":
            return self_test()
        else:
            print(__doc__, file=sys.stderr)
            return 2
    return run(root, sys.stdout, mode)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
