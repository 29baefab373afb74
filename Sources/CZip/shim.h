#ifndef N11_CZIP_SHIM_H
#define N11_CZIP_SHIM_H
#include <zip.h>
/* zlib: the CRC-32 of an entry read without libzip (a salvage's local-header scan). */
#include <zlib.h>
#include <sys/stat.h>

/* Function-like macros do not import into Swift; one wrapper each. */
static inline zip_int64_t n11_zip_supports_readable(void) {
    return ZIP_SOURCE_SUPPORTS_READABLE;
}
/* What an archive read as it arrives (ArrivingZipSource) answers to ZIP_SOURCE_SUPPORTS. */
static inline zip_int64_t n11_zip_supports_seekable(void) {
    return ZIP_SOURCE_SUPPORTS_SEEKABLE;
}
/* What the archive output source (ZipOutputFile) answers to ZIP_SOURCE_SUPPORTS. */
static inline zip_int64_t n11_zip_supports_writable(void) {
    return ZIP_SOURCE_SUPPORTS_WRITABLE;
}
static inline int n11_zip_attributes_are_symlink(zip_uint32_t attributes) {
    return S_ISLNK((attributes >> 16) & 0xffff);
}
static inline int n11_zip_attributes_are_directory(zip_uint32_t attributes) {
    return S_ISDIR((attributes >> 16) & 0xffff);
}
#endif
