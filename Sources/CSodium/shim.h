#ifndef N11_CSODIUM_SHIM_H
#define N11_CSODIUM_SHIM_H
#include <sodium.h>
#endif
