/* driver.c - picks the virt driver named by [compute] driver.
 *
 * Drivers register nothing at run time: this file knows the built-in ones
 * and opens the one asked for, as libvirt's virConnectOpen picks a driver by
 * URI scheme. An unknown name is reported once here and NULL returned. */
#include "common/config.h"
#include "common/log.h"
#include "common/util.h"
#include "compute/virt/driver.h"

#include <string.h>
#include <unistd.h>

struct nb_virt_driver *nb_virt_open(const char *name)
{
    if (!name || !strcmp(name, "fake"))
        return nb_virt_fake_open();
    if (!strcmp(name, "libvirt")) {
        char hostname[256] = "localhost";
        gethostname(hostname, sizeof(hostname));
        return nb_virt_libvirt_open(nb_conf_str("DEFAULT", "host", hostname));
    }
    NB_ERROR("nubo.compute.virt", NULL, NULL,
             "Unknown virt driver '%s' in [compute] driver (this build knows: fake, libvirt)",
             name);
    return NULL;
}
