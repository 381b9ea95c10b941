/* netdev.h - what the agent's phases read of the kernel's network devices
 * (sysfs of the agent's own namespace) and the bridge helpers they share
 * (l2.c). */
#ifndef NB_NETAGENT_NETDEV_H
#define NB_NETAGENT_NETDEV_H

#include "network/agent/internal.h"

#include <stdbool.h>

/* Whether device dev exists in the agent's namespace. */
bool na_dev_exists(const char *dev);
/* The bridge dev is enslaved to, into master (n bytes); "" when none.
 * 0, or -1 when dev does not exist. */
int na_dev_master(const char *dev, char *master, size_t n);
/* dev's MTU, or -1 when it does not exist. */
int na_dev_mtu(const char *dev);
/* Whether dev is administratively up. */
bool na_dev_up(const char *dev);
/* Whether dev is a tap (a tun/tap device: a guest's, libvirt's). */
bool na_dev_is_tap(const char *dev);

/* Makes bridge exist and be up, STP off, IPv6 off, with mtu (> 0), and
 * records it as the agent's when a is given (a may be NULL: nb_vif_plug
 * outside an agent). 0/-1 after nb_error. */
int na_bridge_ensure(struct na *a, struct nb_ctx *ctx, const char *bridge, int mtu);
/* Enslaves dev to bridge and sets it up, unless it already is. 0/-1 after
 * nb_error. */
int na_dev_enslave(struct nb_ctx *ctx, const char *dev, const char *bridge);

#endif
