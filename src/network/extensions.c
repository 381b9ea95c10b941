/* extensions.c - the registry behind GET /networking/v2.0/extensions:
 * each network file adds the extensions (neutron_lib's aliases) its
 * resources implement at init (nb_net_extension), and the two handlers
 * list and show them. Declared in network_int.h. */
#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/sbuf.h"
#include "common/util.h"
#include "db/db.h"
#include "network/network.h"
#include "network/network_int.h"

#include <assert.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_EXTS 64
static struct {
    const char *alias, *name, *description;
} exts[MAX_EXTS];
static int nexts;

void nb_net_extension(const char *alias, const char *name, const char *description)
{
    for (int i = 0; i < nexts; i++)
        if (!strcmp(exts[i].alias, alias))
            return;
    assert(nexts < MAX_EXTS);
    exts[nexts].alias = alias;
    exts[nexts].name = name;
    exts[nexts].description = description;
    nexts++;
}

static json_t *ext_view(int i)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:[]}", "alias", exts[i].alias, "name", exts[i].name,
                     "description", exts[i].description, "updated", "2013-01-01T10:00:00-00:00",
                     "links");
}

static int extensions_list(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    json_t *list = json_array();
    for (int i = 0; i < nexts; i++)
        json_array_append_new(list, ext_view(i));
    return nb_net_list_respond(ctx, req, resp, "extensions", list);
}

static int extension_show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const char *alias = nb_req_param(req, "alias");
    for (int i = 0; i < nexts; i++)
        if (!strcmp(exts[i].alias, alias))
            return nb_net_show_respond(req, resp, 200, "extension", ext_view(i));
    return nb_error(ctx, 404, "ExtensionNotFound", "Extension with alias %s does not exist", alias);
}

/* HEAD: Neutron's extensions controller answers 404 ("the legacy extensions
 * controller returned 404"), where its other controllers answer 405. */
static int extensions_head(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    (void)req, (void)resp;
    return nb_error(ctx, 404, NULL, "The resource could not be found.");
}

void nb_net_extensions_routes(void)
{
    nb_http_route("GET", "/networking/v2.0/extensions", extensions_list, 0);
    nb_http_route("GET", "/networking/v2.0/extensions/{alias}", extension_show, 0);
    nb_http_route("HEAD", "/networking/v2.0/extensions", extensions_head, 0);
    nb_http_route("HEAD", "/networking/v2.0/extensions/{alias}", extensions_head, 0);
}
