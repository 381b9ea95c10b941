/* sg_render_tool.c - prints the nft script the network agent renders for a
 * host state (network/agent/sg_render.c), for tests and the benchmark:
 *   sg_render_tool STATE.json TAG   (STATE.json "-" = stdin)
 *   sg_render_tool --cuts OLD.json NEW.json TAG: the conntrack commands the
 *   change from state OLD to NEW runs, one a line */
#include "network/agent/sg.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

static json_t *load(const char *path)
{
    json_error_t e;
    json_t *st = strcmp(path, "-") ? json_load_file(path, 0, &e) : json_loadf(stdin, 0, &e);
    if (!st)
        fprintf(stderr, "%s: %s\n", path, e.text);
    return st;
}

static int cuts(const char *old_path, const char *new_path, const char *tag)
{
    json_t *o = load(old_path), *n = load(new_path);
    struct na_sg_plan po, pn;
    const char *err;
    if (!o || !n || na_sg_render(o, tag, &po, &err) < 0 || na_sg_render(n, tag, &pn, &err) < 0)
        return 1;
    json_t *c = na_sg_conntrack_cuts(po.flows, pn.flows);
    size_t i, j;
    json_t *cmd, *arg;
    json_array_foreach (c, i, cmd) {
        json_array_foreach (cmd, j, arg)
            printf("%s%s", j ? " " : "", json_string_value(arg));
        printf("\n");
    }
    json_decref(c);
    na_sg_plan_free(&po);
    na_sg_plan_free(&pn);
    json_decref(o);
    json_decref(n);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 5 && !strcmp(argv[1], "--cuts"))
        return cuts(argv[2], argv[3], argv[4]);
    if (argc != 3) {
        fprintf(stderr, "usage: %s STATE.json TAG\n", argv[0]);
        return 2;
    }
    json_t *st = load(argv[1]);
    if (!st)
        return 1;
    struct na_sg_plan p;
    const char *err;
    if (na_sg_render(st, argv[2], &p, &err) < 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    fputs(p.script, stdout);
    na_sg_plan_free(&p);
    json_decref(st);
    return 0;
}
