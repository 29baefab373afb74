#ifndef N11_CSQLITE_SHIM_H
#define N11_CSQLITE_SHIM_H
#include <sqlite3.h>

/* SQLITE_TRANSIENT is a cast macro, which does not import into Swift: bound text and blobs
   are copied by SQLite before the call returns. */
static inline sqlite3_destructor_type n11_sqlite_transient(void) {
    return SQLITE_TRANSIENT;
}
#endif
