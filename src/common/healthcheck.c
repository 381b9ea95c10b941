/* healthcheck.c - oslo.middleware's healthcheck answer (see healthcheck.h). */
#include "common/healthcheck.h"
#include "common/config.h"
#include "common/util.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* The quality Accept gives type ("text/plain"): the most specific match
 * of type, its "major/any" range or "any/any"; 1 without an Accept header, 0 when none. */
static double quality(const char *accept, const char *type)
{
    if (!accept || !*accept)
        return 1.0;
    double best = 0;
    int best_spec = -1;
    const char *slash = strchr(type, '/');
    size_t major = (size_t)(slash - type);
    const char *p = accept;
    while (*p) {
        size_t n = strcspn(p, ",");
        char item[128];
        nb_strlcpy(item, p, n + 1 < sizeof(item) ? n + 1 : sizeof(item));
        p += n + (p[n] == ',');
        char *semi = strchr(item, ';');
        double q = 1.0;
        if (semi) {
            const char *qp = strstr(semi, "q=");
            if (qp)
                q = strtod(qp + 2, NULL);
            *semi = '\0';
        }
        char *t = item;
        while (*t == ' ')
            t++;
        char *e = t + strlen(t);
        while (e > t && e[-1] == ' ')
            *--e = '\0';
        int spec = -1;
        if (strcasecmp(t, type) == 0)
            spec = 2;
        else if (strlen(t) == major + 2 && strncasecmp(t, type, major + 1) == 0 &&
                 t[major + 1] == '*')
            spec = 1;
        else if (strcmp(t, "*/*") == 0)
            spec = 0;
        if (spec > best_spec) {
            best_spec = spec;
            best = q;
        }
    }
    return best;
}

static bool disabled(void)
{
    const char *path = nb_conf_str("healthcheck", "disable_by_file_path", NULL);
    return path && *path && access(path, F_OK) == 0;
}

int nb_healthcheck_answer(const char *method, const char *accept, struct nb_healthcheck *out)
{
    static const char *const offers[] = {"text/plain", "text/html", "application/json"};
    bool healthy = !disabled();
    const char *reason = healthy ? "OK" : "DISABLED BY FILE";
    memset(out, 0, sizeof(*out));
    out->content_type = "text/plain; charset=UTF-8";
    if (strcmp(method, "HEAD") == 0) {
        out->status = healthy ? 204 : 503;
        out->body = strdup("");
        return out->body ? 0 : -1;
    }
    out->status = healthy ? 200 : 503;
    int pick = 0;
    double best = 0;
    for (int i = 0; i < 3; i++) {
        double q = quality(accept, offers[i]);
        if (q > best) {
            best = q;
            pick = i;
        }
    }
    if (pick == 1) {
        out->content_type = "text/html; charset=UTF-8";
        out->body = nb_strdup_printf(
            "<HTML>\n<HEAD><TITLE>Healthcheck Status</TITLE></HEAD>\n<BODY>\n\n<H2>Result of 1 "
            "checks:</H2>\n<TABLE bgcolor=\"#ffffff\" border=\"1\">\n<TBODY>\n<TR>\n\n<TH>\n"
            "Reason\n</TH>\n</TR>\n<TR>\n\n    <TD>%s</TD>\n\n</TR>\n</TBODY>\n</TABLE>\n"
            "<HR></HR>\n\n</BODY>\n</HTML>",
            reason);
    } else if (pick == 2) {
        out->content_type = "application/json";
        out->body = nb_strdup_printf(
            "{\n    \"detailed\": false,\n    \"reasons\": [\n        \"%s\"\n    ]\n}", reason);
    } else {
        out->body = strdup(reason);
    }
    if (!out->body)
        return -1;
    out->len = strlen(out->body);
    return 0;
}
