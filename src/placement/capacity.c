/* capacity.c - placement's capacity arithmetic, in one place.
 *
 * An inventory offers (total - reserved) * allocation_ratio units; an
 * allocation of `amount` fits when used + amount stays within that and the
 * amount respects min_unit <= amount <= max_unit and amount % step_size == 0.
 * Placement compares against the unrounded product when writing
 * allocations and reports int() of it as "capacity"; for integer amounts
 * the two comparisons agree, so both paths use plc_capacity(). */
#include "placement/internal.h"

long long plc_capacity(long long total, long long reserved, double ratio)
{
    double cap = (double)(total - reserved) * ratio;
    /* int() in Python truncates toward zero. */
    return (long long)cap;
}

enum plc_fit plc_fit(const struct plc_inv *inv, long long used, long long amount)
{
    if (amount < inv->min_unit || amount > inv->max_unit ||
        (inv->step_size > 0 && amount % inv->step_size != 0))
        return PLC_FIT_CONSTRAINT;
    if (used + amount > plc_capacity(inv->total, inv->reserved, inv->ratio))
        return PLC_FIT_CAPACITY;
    return PLC_FIT_OK;
}

long long plc_free(const struct plc_inv *inv)
{
    long long free = plc_capacity(inv->total, inv->reserved, inv->ratio) - inv->used;
    return free > 0 ? free : 0;
}

bool plc_inv_capacity_ok(long long total, long long reserved, double ratio, int mv)
{
    long long cap = plc_capacity(total, reserved, ratio);
    return mv >= 26 ? cap >= 0 : cap > 0;
}
