#ifndef N11_CLINUX_SHIM_H
#define N11_CLINUX_SHIM_H
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/random.h>

/* prctl is variadic, which Swift cannot call; one fixed-arity wrapper per use. */
static inline int n11_set_not_dumpable(void) {
    return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}
static inline int n11_get_dumpable(void) {
    return prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
}
#endif
