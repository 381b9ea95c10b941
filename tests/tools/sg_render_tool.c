/* sg_render_tool.c - prints the nft script the network agent renders for a
 * host state (network/agent/sg_render.c), for tests and the benchmark:
 *   sg_render_tool STATE.json TAG   (STATE.json "-" = stdin) */
#include "network/agent/sg.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s STATE.json TAG\n", argv[0]);
        return 2;
    }
    json_error_t e;
    json_t *st = strcmp(argv[1], "-") ? json_load_file(argv[1], 0, &e) : json_loadf(stdin, 0, &e);
    if (!st) {
        fprintf(stderr, "%s: %s\n", argv[1], e.text);
        return 1;
    }
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
