/* extra_specs_ops.c - Nova's extra_specs_ops.match, the small operator
 * language of flavor extra specs ("s== x86_64", ">= 4", "<in> avx",
 * "<all-in> aes avx", "<or> a <or> b", or a plain value compared as a
 * string). Values are compared in the form Python's str() gives them, so
 * callers pass capabilities already rendered that way. */
#include "compute/scheduler/host_state.h"

#include <stdlib.h>
#include <string.h>

#define MAX_WORDS 64

/* Python's float(): whole string, surrounding blanks allowed. */
static bool to_float(const char *s, double *out)
{
    char *end;
    while (*s == ' ' || *s == '\t')
        s++;
    if (!*s)
        return false;
    *out = strtod(s, &end);
    while (*end == ' ' || *end == '\t' || *end == '\n')
        end++;
    return end != s && *end == '\0';
}

static bool num_op(const char *op, const char *x, const char *y)
{
    double a, b;
    if (!to_float(x, &a) || !to_float(y, &b))
        return false; /* Nova raises ValueError: the host cannot be shown to match */
    if (!strcmp(op, "=") || !strcmp(op, ">="))
        return a >= b;
    if (!strcmp(op, "=="))
        return a == b;
    if (!strcmp(op, "!="))
        return a != b;
    return a <= b; /* "<=" */
}

static bool str_op(const char *op, const char *x, const char *y)
{
    int c = strcmp(x, y);
    if (!strcmp(op, "s=="))
        return c == 0;
    if (!strcmp(op, "s!="))
        return c != 0;
    if (!strcmp(op, "s<"))
        return c < 0;
    if (!strcmp(op, "s<="))
        return c <= 0;
    if (!strcmp(op, "s>"))
        return c > 0;
    return c >= 0; /* "s>=" */
}

static bool is_op(const char *w)
{
    static const char *const ops[] = {"=",   "<in>", "<all-in>", "==",  "!=", ">=",  "<=",
                                      "s==", "s!=",  "s<",       "s<=", "s>", "s>=", NULL};
    for (int i = 0; ops[i]; i++)
        if (!strcmp(ops[i], w))
            return true;
    return false;
}

bool nb_sched_extra_spec_match(const char *value, const char *req)
{
    char *copy = strdup(req), *save = NULL;
    char *words[MAX_WORDS];
    size_t nw = 0;
    for (char *w = strtok_r(copy, " \t\n", &save); w && nw < MAX_WORDS;
         w = strtok_r(NULL, " \t\n", &save))
        words[nw++] = w;
    bool ok = false;
    const char *op = nw ? words[0] : NULL;
    if (!op || (strcmp(op, "<or>") && !is_op(op))) {
        ok = value && !strcmp(value, req);
    } else if (!value) {
        ok = false;
    } else if (!strcmp(op, "<or>")) {
        /* "<or> v1 <or> v2 …": every other word is a candidate value */
        for (size_t i = 1; i < nw && !ok; i += 2)
            ok = !strcmp(words[i], value);
    } else if (nw < 2) {
        ok = false;
    } else if (!strcmp(op, "<in>")) {
        ok = strstr(value, words[1]) != NULL;
    } else if (!strcmp(op, "<all-in>")) {
        ok = true;
        for (size_t i = 1; i < nw && ok; i++)
            ok = strstr(value, words[i]) != NULL;
    } else if (op[0] == 's') {
        ok = str_op(op, value, words[1]);
    } else {
        ok = num_op(op, value, words[1]);
    }
    free(copy);
    return ok;
}
