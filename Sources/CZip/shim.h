#ifndef N11_CZIP_SHIM_H
#define N11_CZIP_SHIM_H
#include <zip.h>
#endif
