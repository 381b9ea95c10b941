#!/usr/bin/env python3
"""Writes a C file holding every migrations/NNN_name.sql as a string, in
order, so `nubo db sync` needs no files at run time.
Usage: SRC_DIR OUT.c [SYMBOL] (default nb_migrations; the MariaDB set is
nb_migrations_mariadb)"""
import os
import re
import sys

src, out = sys.argv[1], sys.argv[2]
symbol = sys.argv[3] if len(sys.argv) > 3 else "nb_migrations"
items = []
for name in sorted(os.listdir(src)):
    m = re.match(r"^(\d{3})_([a-z0-9_]+)\.sql$", name)
    if m:
        with open(os.path.join(src, name), encoding="utf-8") as f:
            items.append((int(m.group(1)), name, f.read()))
versions = [v for v, _, _ in items]
if len(set(versions)) != len(versions):
    sys.exit("duplicate migration number in %s" % src)


def c_string(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", '\\n"\n    "') + '"'


body = ["/* Generated from src/db/migrations by embed_migrations.py. */",
        '#include "db/migrations.h"', "",
        "const struct nb_migration %s[] = {" % symbol]
for v, name, sql in items:
    body.append("  {%d, \"%s\",\n    %s}," % (v, name, c_string(sql)))
body.append("  {0, 0, 0}\n};\n")
text = "\n".join(body)
if not os.path.exists(out) or open(out, encoding="utf-8").read() != text:
    with open(out, "w", encoding="utf-8") as f:
        f.write(text)
