/* power_methods.h - what the conductor and compute clients share: the
 * power actions and their bus methods, the same names on both topics
 * ("start" -> "start_instance", as Nova's conductor and compute RPC APIs
 * name them). */
#ifndef NB_RPC_POWER_METHODS_H
#define NB_RPC_POWER_METHODS_H

/* The method of power action op ("start", "stop", "reboot", "pause",
 * "unpause", "suspend", "resume"), or NULL for any other op. Static
 * string. */
const char *nb_rpc_power_method(const char *op);

#endif
