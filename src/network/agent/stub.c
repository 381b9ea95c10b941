/* stub.c - keeps the agent's source list non-empty until agent.c lands
 * (removed then). */
#include "network/agent/netagent.h"
