/* policy.c - `nubo policy list`: prints the policy table (policy/policy.h),
 * one route a line, so operators can see who may call what and the e2e
 * policy matrix can be generated from the table itself.
 *
 * Default output: "METHOD PATTERN RULE NAME" columns; with --json, one JSON
 * array of {"method", "path", "rule", "name"} objects. */
#include "cmd/cmd.h"
#include "policy/policy.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

static int list(bool as_json)
{
    size_t n;
    const struct nb_policy_entry *t = nb_policy_table(&n);
    if (!as_json) {
        for (size_t i = 0; i < n; i++)
            printf("%-6s %-72s %-6s %s\n", t[i].method, t[i].pattern, nb_policy_rule_str(t[i].rule),
                   t[i].name);
        return 0;
    }
    json_t *all = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(all, json_pack("{s:s, s:s, s:s, s:s}", "method", t[i].method, "path",
                                             t[i].pattern, "rule", nb_policy_rule_str(t[i].rule),
                                             "name", t[i].name));
    int rc = json_dumpf(all, stdout, JSON_INDENT(1)) < 0 ? 1 : 0;
    putchar('\n');
    json_decref(all);
    return rc;
}

int nb_cmd_policy(int argc, char **argv)
{
    if (argc >= 1 && !strcmp(argv[0], "list"))
        return list(argc >= 2 && !strcmp(argv[1], "--json"));
    fputs("usage: nubo policy list [--json]\n", stderr);
    return 64;
}
